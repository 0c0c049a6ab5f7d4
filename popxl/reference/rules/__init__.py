"""Built-in reference rules, one module per op family (mirroring popxl/ops/ and popxl/lowering/rules/)."""
from . import collectives, control, conv, elementwise, host_io, indexing, matmul, misc, nn, random, reduce  # noqa: F401
from . import float8, shape, var_updates  # noqa: F401
