"""Built-in lowering rules, one module per op family (mirroring popxl/ops/)."""
from . import control, conv, elementwise, host_io, matmul, nn, reduce, shape  # noqa: F401
from . import indexing  # noqa: F401
from . import rowwise  # noqa: F401
from . import var_updates  # noqa: F401
from . import random  # noqa: F401
from . import misc  # noqa: F401
from . import resize  # noqa: F401
from . import remote  # noqa: F401
from . import collectives  # noqa: F401
from . import roi_align  # noqa: F401
from . import float8  # noqa: F401
