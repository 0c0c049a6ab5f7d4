"""`popart._internal.ir`: the part of PopART's internal IR bindings that PopXL programs and
popxl-addons reach into, as live views over this package's IR.

PopXL's objects carry handles to PopART's C++ IR (`Ir._pb_ir`, `Graph._pb_graph`,
`Tensor._pb_tensor`, ...). Here there is no C++ IR: every handle is a view (`views.py`) that reads
the popxl records (`popxl.Ir`, `popxl.Graph`, `popxl.Tensor`, `popxl.op.Op`) and changes them when
told to (connect an input, clone an op into another graph, erase an op, remove a graph output,
mark inputs modified), so the lowering sees the edited program. One view per object, so views
compare and hash like the C++ objects do. `popart/_internal/ir.py` re-exports this module's
names under PopART's layout (`_ir.op.CallOp`, `_ir.view.Region`, `_ir.patterns.Patterns`, ...);
with popxl/_frontends.py it is the seam PopART builds on (its `__all__` is what popart may use).
"""
from popxl.context import ExecutionContext

from .graph import Graph, Ir, TopoCons
from .values import (BwdGraphInfo, ExpectedConnection, ExpectedConnectionType, GraphId, OpSettings, Region, Regions,
                     TensorInfo)
from .views import Op, Tensor, graph_view, ir_view, op_view, tensor_view
from .ops import (CallOp, HostLoadOp, HostStoreOp, IfOp, InitOp, IpuCopyOp, LoopOp, MatMulOp, RemoteLoadOp,
                  RemoteStoreOp, op_class_for)
from .patterns import Patterns, PatternsLevel
from .op_classes import all_classes as all_op_classes
from .op_classes import find_class as find_op_class

__all__ = ["BwdGraphInfo", "ExecutionContext", "ExpectedConnection", "ExpectedConnectionType", "Graph", "GraphId",
           "Ir", "Op", "OpSettings", "Region", "Regions", "Tensor", "TensorInfo", "TopoCons", "graph_view",
           "ir_view", "op_view", "tensor_view", "CallOp", "HostLoadOp", "HostStoreOp", "IfOp", "InitOp",
           "IpuCopyOp", "LoopOp", "MatMulOp", "RemoteLoadOp", "RemoteStoreOp", "op_class_for", "Patterns",
           "PatternsLevel", "all_op_classes", "find_op_class"]
