"""Small editing helpers the transforms share: placement of new ops, adding outputs to existing ops
and graphs, cloning a graph, and reordering the ops of a graph.

Every op id stays unique in the Ir and "id order is a valid schedule" keeps holding inside each
graph: reordering a graph permutes the ids its ops already use.
"""
from contextlib import contextmanager
from typing import Dict, Iterable, List, Optional, Sequence

from popxl import dtypes
from popxl.context import get_current_context
from popxl.graph import Graph
from popxl.op import Op
from popxl.tensor import Constant, Tensor, constant, graph_input, graph_output

__all__ = ["placement", "add_op_output", "callers_of", "add_graph_output", "clone_ops_into", "clone_graph",
           "reorder_ops", "move_ops_before"]


@contextmanager
def placement(op: Op):
    """Create ops on the IPU and tile set of ``op``, in its execution context and its name scope
    (so a gradient op says which layer it belongs to, as the forward op it differentiates does)."""
    ctx = get_current_context()
    with ctx._placed(op.ipu if op.ipu is not None else ctx.ipu_id, op.tile_set == "io", op.execution_context,
                     op.scope.split("/") if op.scope else []):
        yield


def add_op_output(op: Op, shape: Sequence[int], dtype: "dtypes.dtype", name: str,
                  meta_shape: Sequence[int] = ()) -> Tensor:
    """Append a new output tensor to an existing op and return it."""
    g = op.graph
    tid = g.ir._unique_tensor_id(g._scope_prefix + name)
    t = Tensor._create(g, tid, shape, dtype, meta_shape, producer=op, ipu=op.ipu, tile_set=op.tile_set)
    op.outputs = tuple(op.outputs) + (t,)
    return t


def callers_of(graph: Graph) -> List[Op]:
    """Every op of the Ir that calls ``graph`` (call, repeat, conditional)."""
    found = []
    for g in graph.ir.graphs:
        for op in g._ops:
            if any(c is graph for c in op.called_graphs):
                found.append(op)
    return found


def add_graph_output(graph: Graph, t: Tensor) -> None:
    """Make ``t`` the next output of ``graph`` and give every call op calling ``graph`` the
    matching new output. Raises ValueError if a repeat or conditional op calls ``graph`` (a new
    output would change what they carry / return)."""
    callers = callers_of(graph)
    bad = [op for op in callers if op.type != "call"]
    if bad:
        raise ValueError(
            f"autodiff needs to add the activation {t.id} as an output of {graph} (it is needed by the "
            f"gradient graph), but {graph} is called by {bad[0].type} op '{bad[0].name}', whose outputs can't "
            "change. Differentiate the graph that contains that op instead (autodiff handles repeat and "
            "conditional bodies itself), or call the graph with ops.call.")
    if t.graph is not graph:
        raise ValueError(f"{t} is not a tensor of {graph}.")
    graph._add_output(t)
    for op in callers:
        add_op_output(op, t.shape, t.dtype, t.name.split("/")[-1], t.meta_shape)


def clone_ops_into(src: Graph, tmap: Dict[Tensor, Tensor]) -> Dict[Op, Op]:
    """Re-create the constants and ops of ``src`` in the current graph. ``tmap`` maps the inputs of
    ``src`` to tensors of the current graph on entry and is extended with every other tensor."""
    for c in src.constants:
        if c not in tmap:
            tmap[c] = constant(c._data, c.dtype, c.name)
    opmap: Dict[Op, Op] = {}
    for op in sorted(src._ops, key=lambda o: o.id):
        from popxl.ops._op_builder import create_op
        with placement(op):
            nop = create_op(op.type, [tmap[x] for x in op.inputs], [(o.shape, o.dtype) for o in op.outputs],
                            dict(op.attrs), out_names=[o.name for o in op.outputs], name=op.name.split("/")[-1],
                            inplace=op.inplace, modified=op.modified, aliases=op.aliases,
                            called_graphs=op.called_graphs, check_placement=False,
                            out_meta_shapes=[o.meta_shape for o in op.outputs])
        nop.name, nop.scope = op.name, op.scope
        nop.after = tuple(opmap[a] for a in op.after if a in opmap)
        nop.debug_context = op.debug_context
        opmap[op] = nop
        for o, no in zip(op.outputs, nop.outputs):
            tmap[o] = no
    return opmap


def clone_graph(src: Graph, name: Optional[str] = None, extra_outputs: Iterable[Tensor] = ()):
    """A copy of ``src`` (same inputs, ops and outputs, then ``extra_outputs`` of ``src``).
    Returns (new graph, tensor map src -> new)."""
    g = src.ir.create_empty_graph(name or src.id)
    tmap: Dict[Tensor, Tensor] = {}
    with g:
        for t in src.inputs:
            tmap[t] = graph_input(t.shape, t.dtype, t.name, by_ref=t in src._by_ref_inputs, meta_shape=t.meta_shape)
        clone_ops_into(src, tmap)
        for t in list(src.outputs) + list(extra_outputs):
            graph_output(tmap[t])
    return g, tmap


def reorder_ops(graph: Graph, new_order: Sequence[Op]) -> None:
    """Give the ops of ``graph`` the schedule ``new_order`` by permuting the ids they hold."""
    old = graph.ops
    if len(new_order) != len(old) or {id(o) for o in new_order} != {id(o) for o in old}:
        raise ValueError("Internal error: reorder_ops needs a permutation of the graph's ops.")
    ids = sorted(op.id for op in old)
    for op, i in zip(new_order, ids):
        op.id = i
    graph._set_op_order(new_order)


def move_ops_before(graph: Graph, new_ops: Sequence[Op], anchor: Op) -> None:
    """Schedule ``new_ops`` (in their order) just before ``anchor``."""
    moving = {id(o) for o in new_ops}
    order = [o for o in sorted(graph._ops, key=lambda o: o.id) if id(o) not in moving]
    pos = next(i for i, o in enumerate(order) if o is anchor)
    order[pos:pos] = list(new_ops)
    reorder_ops(graph, order)


def is_constant(t: Tensor) -> bool:
    return isinstance(t, Constant)
