"""The one place ops are recorded. Every op function validates its arguments, infers its output
shapes and dtypes, then calls :func:`create_op` (or :func:`single`)."""

from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple

from popxl import dtypes
from popxl.context import get_current_context
from popxl.graph import Graph
from popxl.op import Op
from popxl.op_table import check_op
from popxl.tensor import Tensor

__all__ = ["create_op", "single", "check_inputs_in_graph", "not_a_tensor"]

OutSpec = Tuple[Iterable[int], "dtypes.dtype"]


def _not_in_graph_error(name: str, t: Tensor, g: Graph) -> ValueError:
    """PopXL's check_in_graph words for input `name`, then what went wrong and what to do."""
    sdk = f"The input tensor `{name}` is not in the current Graph {g.name}."
    if t.graph.ir is not g.ir:
        return ValueError(
            f"{sdk} The tensor {t} belongs to another popxl.Ir than the graph it is being used in ({g._label} of "
            f"Ir {g.ir.id}; the tensor is in {t.graph._label} of Ir {t.graph.ir.id}). An Ir can only use its "
            "own tensors: create the tensor (or a copy of its data, e.g. popxl.constant / popxl.variable) "
            "inside this Ir.")
    return ValueError(
        f"{sdk} The tensor {t} is in {t.graph._label}, but it is being used in {g._label}. A graph can only use "
        f"its own tensors: pass the tensor to {g._label} as a graph input (a tensor argument of the "
        "function given to `Ir.create_graph`, or `popxl.graph_input`) and provide it at the call site.")


def not_a_tensor(name: str, value: Any, op: str) -> TypeError:
    """PopXL's words for an input that is not a tensor, then which op wanted it and what to do."""
    return TypeError(f"The input `{name}` is not a Tensor. Type: {type(value)}. Value: {value!r}. {op} takes a "
                     "popxl.Tensor there: make one with popxl.constant or popxl.variable, or pass a tensor of "
                     "the graph being built.")


def check_inputs_in_graph(g: Graph, inputs: Sequence[Any], names: Optional[Sequence[str]] = None) -> None:
    """Raise TypeError for a non-tensor input, ValueError for a tensor of another graph."""
    for i, t in enumerate(inputs):
        name = names[i] if names else str(i)
        if not isinstance(t, Tensor):
            raise TypeError(f"The input `{name}` is not a Tensor. Type: {type(t)}. Value: {t!r}.")
        if t.graph is not g:
            raise _not_in_graph_error(name, t, g)


def _check_placement(inputs: Sequence[Tensor], names: Optional[Sequence[str]] = None) -> None:
    """PopXL's check_tensor_ipu_and_tile_set: inputs with a known IPU (tile set) must agree. The
    SDK's words (naming the inputs by argument name where known), then what to do."""
    named = list(zip(names if names else [t.id for t in inputs], inputs))
    ipus = [(t._ipu, n) for n, t in named if t._ipu is not None]
    for ipu, n in ipus[1:]:
        if ipu != ipus[0][0]:
            raise ValueError(f"The input tensors `{ipus[0][1]}` and `{n}` are located on different IPUs: "
                             f"{ipus[0][0]} != {ipu}. Copy one of them with `ops.ipu_copy` first.")
    tiles = [(t._tile_set, n) for n, t in named if t._tile_set is not None]
    for tile_set, n in tiles[1:]:
        if tile_set != tiles[0][0]:
            raise ValueError(f"The input tensors `{tiles[0][1]}` and `{n}` are located on different tile sets: "
                             f"{tiles[0][0]} != {tile_set}. Use `ops.io_tile_copy` first.")


def create_op(op_type: str, inputs: Sequence[Tensor], outputs: Sequence[OutSpec],
              attrs: Optional[Dict[str, Any]] = None, *, out_names: Optional[Sequence[str]] = None,
              input_names: Optional[Sequence[str]] = None, name: Optional[str] = None,
              inplace: bool = False, modified: Iterable[int] = (), aliases: Optional[Dict[int, int]] = None,
              called_graphs: Iterable[Graph] = (), check_placement: bool = True,
              out_meta_shapes: Optional[Sequence[Iterable[int]]] = None, out_ids: Optional[Sequence[str]] = None,
              notify: bool = True) -> Op:
    """Record an op in the current graph and return it.

    Args:
        op_type: the registry key (see docs/ir.md).
        inputs: input tensors, all of the current graph.
        outputs: (shape, dtype) of each output; the output tensors are created here.
        attrs: static attributes.
        out_names: names of the output tensors (default ``<op_type>_out``).
        input_names: names of the inputs, for error messages.
        name: the op's name without scope (default ``op_type``).
        inplace, modified, aliases, called_graphs: see :class:`popxl.op.Op`.
        check_placement: check that the inputs are on one IPU and one tile set.
        out_ids: exact ids of the output tensors (PopART's createConnectedOp; a taken id is made
            unique), instead of ids made from ``out_names``.
        notify: tell the op-created hooks (custom ops' createOpInGraph leave it to their caller,
            which calls ``ctx._op_created(op)`` as PopXL's wrappers do).
    """
    check_op(op_type, attrs or ())
    ctx = get_current_context()
    g = ctx.graph
    inputs = tuple(inputs)
    check_inputs_in_graph(g, inputs, input_names)
    if check_placement:
        _check_placement(inputs, input_names)
    modified = tuple(sorted(set(int(i) for i in modified)))
    aliases = dict(aliases or {})
    for i in modified:
        if not 0 <= i < len(inputs):
            raise ValueError(f"Internal error: modified input index {i} out of range for {op_type}.")
    if modified or aliases:
        inplace = True

    scope = "/".join(ctx.name_scopes)
    base = name or op_type
    op = Op(
        id=g.ir._next_op_id(), type=op_type, graph=g, inputs=inputs, outputs=(), attrs=dict(attrs or {}),
        name=f"{scope}/{base}" if scope else base, scope=scope, ipu=ctx.ipu_id,
        tile_set="io" if ctx.io_tile_set else "compute", inplace=bool(inplace), modified=modified,
        aliases=aliases, called_graphs=tuple(called_graphs), after=(),
        execution_context=ctx.execution_context, debug_context=tuple(ctx._debug_names))
    outs: List[Tensor] = []
    for i, (shape, dt) in enumerate(outputs):
        out_name = out_names[i] if out_names else f"{op_type}_out"
        meta = out_meta_shapes[i] if out_meta_shapes else ()
        if out_ids is not None:
            tid = out_ids[i] if out_ids[i] not in g.ir._tensor_ids else g.ir._unique_tensor_id(out_ids[i])
        else:
            tid = g._create_tensor_id(out_name)
        outs.append(Tensor._create(g, tid, shape, dt, meta, producer=op, ipu=op.ipu, tile_set=op.tile_set))
    op.outputs = tuple(outs)
    op.after = ctx._sequence_op(op)
    g._add_op(op)
    seen = set()
    for t in inputs:
        if id(t) not in seen:
            seen.add(id(t))
            t._add_consumer(op)
    if notify:
        ctx._op_created(op)
    return op


def single(op_type: str, inputs: Sequence[Tensor], shape: Iterable[int], dtype: "dtypes.dtype",
           attrs: Optional[Dict[str, Any]] = None, **kwargs) -> Tensor:
    """Record an op with one output and return that output."""
    return create_op(op_type, inputs, [(shape, dtype)], attrs, **kwargs).outputs[0]
