"""`popart._internal.ir`: the PopART internal IR bindings that PopXL scripts and popxl-addons use,
served by views of the popxl IR (popxl/_pb; docs/popxl-addons.md lists what is covered).

The names keep PopART's layout: `_ir.Graph`, `_ir.Op`, `_ir.Tensor`, `_ir.op.CallOp`,
`_ir.op.exchange.HostLoadOp`, `_ir.view.Region`, `_ir.patterns.Patterns`, ...
"""
import sys
import types

from popxl._pb import all_op_classes
from popxl._pb import (BwdGraphInfo, CallOp, ExecutionContext, ExpectedConnection, ExpectedConnectionType, Graph,
                       GraphId, HostLoadOp, HostStoreOp, IfOp, InitOp, IpuCopyOp, Ir, LoopOp, MatMulOp, Op,
                       OpSettings, Patterns, PatternsLevel, Region, Regions, RemoteLoadOp, RemoteStoreOp, Tensor,
                       TensorInfo, TopoCons)

__all__ = ["BwdGraphInfo", "ExecutionContext", "ExpectedConnection", "ExpectedConnectionType", "Graph", "GraphId",
           "Ir", "Op", "OpSettings", "Region", "Tensor", "TensorInfo", "TopoCons", "op", "view", "patterns",
           "addScope", "removeScope"]


def _module(name: str, doc: str, **names) -> types.ModuleType:
    m = types.ModuleType(f"{__name__}.{name}", doc)
    m.__dict__.update(names)
    sys.modules[m.__name__] = m
    return m


def _op_module(sub: str, doc: str) -> types.ModuleType:
    """`_ir.op` / `_ir.op.<sub>`: the classes of the op table, and on first use the class of any op
    type registered later (custom ops)."""
    from popxl._pb import find_op_class as find_class
    m = _module("op" + (f".{sub}" if sub else ""), doc, **_op_classes[sub])
    m.__getattr__ = lambda name: find_class(sub, name)  # PEP 562: names the table did not list
    return m


_op_classes = all_op_classes()
op = _op_module("", "PopART's op classes (views of popxl ops; popxl/_pb/op_classes.py).")
op.exchange = _op_module("exchange", "Host and remote exchange ops.")
op.collectives = _op_module("collectives", "Collective ops.")
op.dynamic = _op_module("dynamic", "Dynamic slice and update ops.")
view = _module("view", "Regions of tensors.", Region=Region, Regions=Regions)
patterns = _module("patterns", "Graph rewrites.", Patterns=Patterns, PatternsLevel=PatternsLevel)


def addScope(graph: Graph, name: str) -> str:  # noqa: N802 - PopART's name
    """`name` in the scope of `graph` (its id and '/'; nothing for the main graph)."""
    gid = graph.id.str()
    return f"{gid}/{name}" if gid and not name.startswith(gid + "/") else name


def removeScope(graph: Graph, tensor_id: str) -> str:  # noqa: N802
    gid = graph.id.str()
    return tensor_id[len(gid) + 1:] if gid and tensor_id.startswith(gid + "/") else tensor_id
