"""Built-in codelets (vertex types) of the simulated IPU.

Importing this package registers every codelet with `ipu.register` (popxl's lowering imports it; a
program written directly against `ipu/` writes `import codelets`). Each module holds one family:
kernel, NumPy reference, cost model with its source; op codes are one IntEnum per codelet.

- scaled_add: ScaledAdd
- matmul: MatMulBlock, MatMulReducePartials (the AMP); plans/: the multi-tile matmul planner
  (matmul_plan.py), the programs it leads to (matmul_build.py) and how operand blocks reach
  their tiles (matmul_operands.py)
- elementwise: UnaryOp, BinaryOp (`UnaryOpCode`, `BinaryOpCode`; costs in elementwise_costs.py)
- broadcast: BroadcastVectorOuter (a per-row vector over a 2D region: batch norm's per-channel terms)
- cast: Cast
- cast_float8: Pow2ScaleThenCast, CastThenPow2Scale (float8, see float8.py for the formats)
- matmul_float8: MatMulBlockPow2Scaled (the float8 AMP)
- fill: Fill, Copy, Arange
- reduce: Reduce (`ReduceOpCode`, layouts ROWS / PARTIALS)
- select: Select, Clamp
- indexing: MultiSlice, MultiUpdate (`UpdateOpCode`), DynamicSlice, DynamicUpdate, EncodeOneHot
- rowwise: ArgMinMax, ArgMinMaxPartial, ArgMinMaxCombine, TopK, Median, CumSum
- rng: RandomUniform, RandomNormal, Dropout, ModifySeed
- histogram: Histogram, HistogramCombine
- roi_align: RoiAlign, RoiAlignGrad
- transpose: Transpose2d
- nonlinearity: NonLinearityGrad (popnn: an activation's gradient in one vertex)
- conv: ConvPartialHorizontalMac, ConvPartialVerticalMac (grouped / depthwise convolutions); plans/:
  their planner (conv_plan.py) and programs (conv_build.py)
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
from . import conv  # noqa: F401
from . import broadcast  # noqa: F401
from . import nonlinearity  # noqa: F401
