"""Built-in codelets (vertex types) of the simulated IPU.

Importing this package registers every codelet with `ipu.register`; `ipu` imports it on first
use of a codelet name. Each module holds one family: kernel, NumPy reference, cost model.

- scaled_add: ScaledAdd
- elementwise: UnaryOp, BinaryOp (op tables UNARY_OPS, BINARY_OPS)
- cast: Cast
- cast_float8: Pow2ScaleThenCast, CastThenPow2Scale (float8, see float8.py for the formats)
- matmul_float8: MatMulBlockPow2Scaled (the float8 AMP)
- fill: Fill, Copy, Arange
- reduce: Reduce (op table REDUCE_OPS, layouts ROWS / PARTIALS)
- select: Select, Clamp
- transpose: Transpose2d
"""
from . import scaled_add  # noqa: F401
from . import matmul  # noqa: F401
from . import elementwise  # noqa: F401
from . import cast  # noqa: F401
from . import cast_float8  # noqa: F401
from . import matmul_float8  # noqa: F401
from . import fill  # noqa: F401
from . import reduce  # noqa: F401
from . import select  # noqa: F401
from . import indexing  # noqa: F401
from . import rowwise  # noqa: F401
from . import rng  # noqa: F401
from . import histogram  # noqa: F401
from . import roi_align  # noqa: F401
from . import transpose  # noqa: F401
