"""`createOpInGraph` of the served binding modules: record a custom op in an `_ir.Graph` with the
tensor ids and settings the Python wrapper passes, as PopART's `Graph::createConnectedOp` does."""
from __future__ import annotations

from typing import Any, Dict, Mapping


def _ordered(kind: str, m: Mapping[int, str]) -> list:
    keys = sorted(int(k) for k in m)
    if keys != list(range(len(keys))):
        raise ValueError(f"createOpInGraph: {kind} indices must be 0..{len(keys) - 1}, got {keys}")
    return [m[k] for k in keys]


def create_in_graph(op_def, graph, inputs: Mapping[int, str], outputs: Mapping[int, str], attrs: Dict[str, Any],
                    settings=None):
    """Record custom op `op_def` in `graph` (an `_ir.Graph`) reading tensors `inputs` {index: id}
    and creating `outputs` {index: id}; returns the op as an `_ir.Op`. The caller tells the
    op-created hooks (`ctx._op_created(op)`), as PopXL's wrappers do."""
    from popxl.context import get_current_context
    from popxl.graph import Graph

    g = Graph._from_pb(graph)
    ins = [g.get_tensor(tid) for tid in _ordered("input", inputs)]
    out_ids = _ordered("output", outputs)
    ctx = get_current_context()
    with ctx._op_settings_applied(g, settings):
        name = settings.name.rsplit("/", 1)[-1] if settings is not None else None
        op = op_def.record(ins, attrs, name=name, out_ids=out_ids, notify=False)
    return op._pb_op


def binding_class(class_name: str, op_def, create):
    """A class named like the pybind11 class with `createOpInGraph = create` (a staticmethod)."""
    return type(class_name, (), {"createOpInGraph": staticmethod(create), "op_type": op_def.op_type,
                                 "__doc__": f"{class_name}: the custom op {op_def.op_type!r} (popxl/_addons)."})
