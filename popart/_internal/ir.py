"""`popart._internal.ir`: the PopART internal IR bindings that PopXL scripts and popxl-addons use,
served by views of the popxl IR (popxl/_pb; docs/popxl-addons.md lists what is covered).

The names keep PopART's layout: `_ir.Graph`, `_ir.Op`, `_ir.Tensor`, `_ir.op.CallOp`,
`_ir.op.exchange.HostLoadOp`, `_ir.view.Region`, `_ir.patterns.Patterns`, ...
"""
import sys
import types

from popxl._pb.op_classes import all_classes as all_op_classes
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


_op_classes = all_op_classes()
op = _module("op", "PopART's op classes (views of popxl ops; popxl/_pb/op_classes.py).", **_op_classes[""])
op.exchange = _module("op.exchange", "Host and remote exchange ops.", **_op_classes["exchange"])
op.collectives = _module("op.collectives", "Collective ops.", **_op_classes["collectives"])
op.dynamic = _module("op.dynamic", "Dynamic slice and update ops.", **_op_classes["dynamic"])
view = _module("view", "Regions of tensors.", Region=Region, Regions=Regions)
patterns = _module("patterns", "Graph rewrites.", Patterns=Patterns, PatternsLevel=PatternsLevel)


def addScope(graph: Graph, name: str) -> str:  # noqa: N802 - PopART's name
    """`name` in the scope of `graph` (its id and '/'; nothing for the main graph)."""
    gid = graph.id.str()
    return f"{gid}/{name}" if gid and not name.startswith(gid + "/") else name


def removeScope(graph: Graph, tensor_id: str) -> str:  # noqa: N802
    gid = graph.id.str()
    return tensor_id[len(gid) + 1:] if gid and tensor_id.startswith(gid + "/") else tensor_id
