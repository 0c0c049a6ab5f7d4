"""Built-in codelets (vertex types) of the simulated IPU.

Importing this package registers every codelet with `ipu.register`; `ipu` imports it on first
use of a codelet name. Each module holds one family: kernel, NumPy reference, cost model.
"""
from . import scaled_add  # noqa: F401
from . import matmul  # noqa: F401
from . import rowwise  # noqa: F401
