"""ATen -> popxl translation: the registry (context.py) and one module of rules per family."""
from . import elementwise, nn, poptorch_ops, random, reduce, shape  # noqa: F401  (register the rules)
from .context import RULES, Op, Translation, aten, device_dtype, host_array, supported_ops  # noqa: F401
