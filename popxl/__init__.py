"""PopXL (SDK 3.x) frontend for the tile-level IPU simulator: build an Ir of graphs, tensors and ops
with the PopXL API, then run it with ``popxl.Session``."""
import warnings as _warnings

# `python -m popxl.op_table erf` runs the table module once more as __main__ (it prints where the
# rules of an op live); runpy's warning that the package already imported it says nothing to fix
_warnings.filterwarnings("ignore", "'popxl.op_table' found in sys.modules", RuntimeWarning)

from . import dtypes  # noqa: E402
from .context import (ExecutionContext, gcg, get_current_context, get_current_graph, get_ir, get_main_graph, gir,
                      gmg, in_sequence, io_tiles, ipu, name_scope, op_debug_context)
from .dtypes import (bool, complex64, complex128, double, dtype, float, float8_143, float8_152, float16, float32,
                     float64, half, int8, int16, int32, int64, uint8, uint16, uint32, uint64)
from .errors import UndefinedValue
from .graph import Graph
from .ir import Ir
from .module import Module
from .op import Op
from .remote_buffer import RemoteBuffer, remote_buffer
from .replica_grouping import ReplicaGrouping
from .streams import DeviceToHostStream, HostToDeviceStream, d2h_stream, h2d_stream
from .tensor import (Constant, Tensor, TensorByRef, TensorSpec, Variable, constant, graph_input, graph_output,
                     remote_replica_sharded_variable, remote_variable, replica_sharded_buffer,
                     replica_sharded_variable, variable)
from .tensorlocation import ReplicatedTensorSharding, TensorLocation, TensorStorage, TileSet
from . import fp8_utils, ops, random_seed, testing, utils  # noqa: E402  (ops needs the names above)
from .random_seed import create_seeds  # noqa: E402  (popxl.create_seeds, as popxl-addons' seed_variable uses it)
from . import transforms  # noqa: E402  (autodiff and friends build on ops)

try:  # the Session and lowering are written separately and may not be present (or importable) yet
    from .session import Session  # noqa: F401
except ImportError as _session_import_error:  # pragma: no cover - depends on the other half of the project
    _SESSION_ERROR = _session_import_error

    def __getattr__(name):
        if name == "Session":
            raise ImportError(f"popxl.Session is not available: {_SESSION_ERROR}") from _SESSION_ERROR
        raise AttributeError(f"module 'popxl' has no attribute {name!r}")

__all__ = [
    "Ir", "Graph", "Module", "Op", "Tensor", "Variable", "Constant", "TensorSpec", "TensorByRef", "variable",
    "constant", "graph_input", "graph_output", "remote_variable", "remote_replica_sharded_variable",
    "replica_sharded_buffer", "replica_sharded_variable", "h2d_stream", "d2h_stream", "HostToDeviceStream",
    "DeviceToHostStream", "RemoteBuffer", "remote_buffer", "ReplicaGrouping", "TensorLocation", "TensorStorage",
    "ReplicatedTensorSharding", "TileSet", "ExecutionContext", "UndefinedValue", "dtype", "dtypes", "bool", "int8",
    "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float8_143", "float8_152", "float16",
    "float32", "float64", "complex64", "complex128", "half", "float", "double", "gcg", "gmg", "get_current_graph",
    "get_main_graph", "get_current_context", "get_ir", "gir", "in_sequence", "io_tiles", "ipu", "name_scope",
    "op_debug_context", "ops", "random_seed", "transforms", "utils", "create_seeds",
]
if "Session" in globals():
    __all__.append("Session")

# popxl-addons' C++ custom ops are served in Python (popxl/_addons): nothing is compiled
from popxl import _addons  # noqa: E402

_addons.install()
