"""Ops that run other graphs: call, repeat and conditional.

Call-like ops record ``attrs['input_map']`` (graph input index -> op input index; the identity
when every input is given) and output ``i`` of the op is output ``i`` of the called graph.
Inputs of by-reference graph inputs (``TensorByRef``) are listed in ``Op.modified``.
"""

from collections.abc import Iterable as _Iterable
from typing import Dict, Iterable, List, Mapping, Optional, Tuple, Union

import numpy as np

from popxl import dtypes
from popxl.context import get_current_context, op_debug_context
from popxl.graph import Graph
from popxl.op import Op
from popxl.tensor import Tensor, TensorLike
from popxl.utils import table_to_string

from ._op_builder import create_op

__all__ = ["CallSiteInfo", "call", "call_with_info", "repeat", "repeat_with_info", "ConditionalSiteInfo",
           "conditional", "conditional_with_info"]


class CallSiteInfo:
    """What a call site (a call or repeat op) connects: parent tensors <-> called graph tensors."""

    def __init__(self, subgraph_op: Op):
        subgraph_op = getattr(subgraph_op, "_op", subgraph_op)  # PopART's _ir.CallOp / LoopOp view too
        if not isinstance(subgraph_op, Op) or "input_map" not in subgraph_op.attrs:
            raise TypeError(f"CallSiteInfo needs a call or repeat op, got {subgraph_op!r}.")
        self._xop = subgraph_op

    @property
    def op(self) -> Op:
        """The popxl op of the call site."""
        return self._xop

    @property
    def _op(self):
        """The call site as PopART's `_ir.op.CallOp` / `LoopOp` (what PopXL keeps here)."""
        return self._xop._pb_op

    @property
    def called_graph(self) -> Graph:
        return self._xop.attrs["graph"]

    def graph_to_parent_input_index(self, idx: int) -> int:
        """The op input index that feeds graph input ``idx``."""
        try:
            return self._xop.attrs["input_map"][idx]
        except KeyError:
            raise IndexError(f"Graph input {idx} of {self.called_graph} is not connected at this call site.") from None

    def parent_to_graph_input_index(self, idx: int) -> int:
        """The graph input index fed by op input ``idx``."""
        for g_idx, op_idx in self._xop.attrs["input_map"].items():
            if op_idx == idx:
                return g_idx
        raise IndexError(f"The call site has no input {idx}.")

    def graph_to_parent_output_index(self, idx: int) -> int:
        if not 0 <= idx < len(self._xop.outputs):
            raise IndexError(f"The call site has no output {idx}.")
        return idx

    def parent_to_graph_output_index(self, idx: int) -> int:
        if not 0 <= idx < len(self._xop.outputs):
            raise IndexError(f"The call site has no output {idx}.")
        return idx

    def graph_to_parent(self, graph_tensor: Tensor) -> Tensor:
        """The parent tensor connected to an input or output of the called graph."""
        g = self.called_graph
        for i, t in enumerate(g.inputs):
            if t is graph_tensor:
                return self._xop.inputs[self.graph_to_parent_input_index(i)]
        for i, t in enumerate(g.outputs):
            if t is graph_tensor and i < len(self._xop.outputs):
                return self._xop.outputs[i]
        raise ValueError(f"Tensor {graph_tensor.name} is not an input or output of the called graph(s).")

    def parent_to_graph(self, parent_tensor: Tensor) -> Tensor:
        """The called graph's input fed by ``parent_tensor`` (the first, if it feeds several)."""
        for i, t in enumerate(self._xop.inputs):
            if t is parent_tensor:
                return self.called_graph.inputs[self.parent_to_graph_input_index(i)]
        raise ValueError(f"Tensor {parent_tensor.name} is not a parent graph input of the call site.")

    def parent_input(self, idx: int) -> Tensor:
        return self._xop.inputs[idx]

    def parent_output(self, idx: int) -> Tensor:
        return self._xop.outputs[idx]

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        return self._xop.inputs

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        return self._xop.outputs

    def set_parent_input_modified(self, parent_tensor: Tensor, infer_modified_regions: bool = False):
        """Declare that the call changes ``parent_tensor`` (as for a by-reference input)."""
        idx = self._xop.input_index(parent_tensor)
        self._xop.modified = tuple(sorted(set(self._xop.modified) | {idx}))
        self._xop.inplace = True


def _flatten_inputs(inputs) -> List:
    flat: List = []  # tensors, and host values the caller checks
    for x in inputs or ():
        if isinstance(x, _Iterable) and not isinstance(x, (str, bytes, np.ndarray, Tensor)):
            flat.extend(x)
        else:
            flat.append(x)
    return flat


def _connect_inputs(check_inputs: bool, parent: Graph, graph: Graph, graph_name: str, inputs,
                    inputs_dict: Optional[Mapping[Tensor, TensorLike]]) -> List[Tuple[int, Tensor]]:
    """Validate call-site inputs; return (graph input index, parent tensor) pairs in graph input order."""
    if not isinstance(graph, Graph):
        raise TypeError(f"Expected a popxl.Graph to call, got {type(graph).__name__}.")
    if graph.ir is not parent.ir:
        raise ValueError(f"{graph} belongs to another Ir than the graph it is called from ({parent}).")
    if graph is parent:
        raise ValueError(f"{graph} cannot call itself.")
    inputs = _flatten_inputs(inputs)
    inputs_dict = dict(inputs_dict or {})
    g_inputs = graph.inputs
    if len(inputs) > len(g_inputs):
        raise ValueError(f"Too many inputs have been provided to the {graph_name} graph {graph}: "
                         f"{len(inputs)} positional inputs but the graph has {len(g_inputs)} inputs.")
    connected: Dict[int, Tensor] = {}

    def coerce(value, graph_tensor: Tensor, where: str) -> Tensor:
        if isinstance(value, Tensor):
            if value.graph is not parent:
                raise ValueError(f"The parent input tensor {value} ({where}) is not in the parent graph {parent}: "
                                 f"it belongs to {value.graph._label}.")
            return value
        try:  # host values are broadcast to the graph input's shape
            value = np.broadcast_to(np.asarray(value), graph_tensor.shape)
            return graph_tensor._ensure_tensor(value)
        except (TypeError, ValueError) as e:
            raise TypeError(f"Input {where} could not be coerced into a tensor for the {graph_name} graph: "
                            f"Type {type(value)}. Value: {value!r}") from e

    for i, value in enumerate(inputs):
        connected[i] = coerce(value, g_inputs[i], f"at position {i}")
    index_of = {id(t): i for i, t in enumerate(g_inputs)}
    for graph_tensor, value in inputs_dict.items():
        if not isinstance(graph_tensor, Tensor) or id(graph_tensor) not in index_of:
            raise ValueError(f"The graph input tensor {graph_tensor} is not an input of the {graph_name} "
                             f"graph {graph}.")
        i = index_of[id(graph_tensor)]
        if i in connected:
            raise ValueError(f"Graph input tensor is specified twice for the {graph_name} graph, in `inputs_dict` "
                             f"and positionally in `inputs`: {graph_tensor}")
        connected[i] = coerce(value, graph_tensor, f"for {graph_tensor.name}")

    missing = [i for i in range(len(g_inputs)) if i not in connected]
    if missing and check_inputs:
        miss = [("Index", "Graph Tensor")] + [(i, g_inputs[i].id) for i in missing]
        conn = [("Index", "Graph Tensor", "Parent Graph Tensor")] + \
            [(i, g_inputs[i].id, connected[i].id) for i in sorted(connected)]
        raise ValueError(f"Not enough inputs have been provided for the {graph_name} graph ({graph}).\n\n"
                         f"Missing inputs:\n{table_to_string(miss)}\n\nConnected inputs:\n{table_to_string(conn)}")
    for i, t in connected.items():
        g_t = g_inputs[i]
        if t.shape != g_t.shape or t.dtype != g_t.dtype:
            raise ValueError(f"The parent tensor given for input {i} ({g_t.name}) of the {graph_name} graph {graph} "
                             f"must match its shape and dtype: the graph input is {g_t.dtype.name} {g_t.shape}, "
                             f"the parent tensor {t.id} is {t.dtype.name} {t.shape}.")
    return sorted(connected.items())


def _call_like(op_type: str, graph: Graph, connected: List[Tuple[int, Tensor]], attrs: dict) -> Op:
    inputs = [t for _, t in connected]
    input_map = {g_i: op_i for op_i, (g_i, _) in enumerate(connected)}
    by_ref = tuple(i for i, t in enumerate(graph.inputs) if t in graph._by_ref_inputs)
    modified = [op_i for g_i, op_i in input_map.items() if g_i in by_ref]
    outs = [(t.shape, t.dtype) for t in graph.outputs]
    names = [t.name for t in graph.outputs]
    attrs = dict(attrs, graph=graph, input_map=input_map, by_ref=by_ref)
    op = create_op(op_type, inputs, outs, attrs, out_names=names, modified=modified, called_graphs=(graph,),
                   out_meta_shapes=[t.meta_shape for t in graph.outputs], check_placement=False)
    # as PopART's subgraph ops: an output lives on the tile set of the graph output it comes from
    for out, g_out in zip(op.outputs, graph.outputs):
        if g_out._tile_set is not None:
            out._set_tile_set(g_out._tile_set)
    return op


def call(graph: Graph, *inputs: Union[TensorLike, Iterable[TensorLike]],
         inputs_dict: Optional[Mapping[Tensor, TensorLike]] = None) -> Tuple[Tensor, ...]:
    """Run ``graph`` with ``inputs`` (positional, in graph input order) and/or ``inputs_dict``
    (graph input tensor -> parent tensor); return the parent tensors of the graph's outputs."""
    return call_with_info(graph, *inputs, inputs_dict=inputs_dict).outputs


@op_debug_context("call")
def call_with_info(graph: Graph, *inputs: Union[TensorLike, Iterable[TensorLike]],
                   inputs_dict: Optional[Mapping[Tensor, TensorLike]] = None,
                   check_inputs: bool = True) -> CallSiteInfo:
    """``call`` returning the CallSiteInfo of the call site.

    Raises:
        ValueError: too many or (with ``check_inputs``) too few inputs, an input specified twice,
            a parent tensor of another graph, or an input of the wrong shape or dtype.
        TypeError: an input that cannot be turned into a tensor.
    """
    parent = get_current_context().graph
    connected = _connect_inputs(check_inputs, parent, graph, "called", inputs, inputs_dict)
    return CallSiteInfo(_call_like("call", graph, connected, {}))


def repeat(graph: Graph, repeat_count: int, *inputs: Union[Tensor, Iterable[Tensor]],
           inputs_dict: Optional[Mapping[Tensor, Tensor]] = None) -> Tuple[Tensor, ...]:
    """Run ``graph`` ``repeat_count`` times. Its first N inputs are loop-carried, where N is its
    number of outputs: after each iteration output i is fed back as input i. Returns the final
    values of the N loop-carried tensors."""
    return repeat_with_info(graph, repeat_count, *inputs, inputs_dict=inputs_dict).outputs


@op_debug_context("repeat")
def repeat_with_info(graph: Graph, repeat_count: int, *inputs: Union[Tensor, Iterable[Tensor]],
                     inputs_dict: Optional[Mapping[Tensor, Tensor]] = None, check_inputs: bool = True) -> CallSiteInfo:
    """``repeat`` returning the CallSiteInfo of the repeat op.

    Raises:
        ValueError: ``repeat_count < 0``; the graph has more outputs than inputs; a loop-carried
            output differs in shape or dtype from its input; or as for ``call_with_info``.
    """
    if isinstance(repeat_count, bool) or int(repeat_count) != repeat_count:
        raise TypeError(f"repeat_count must be an integer, not {repeat_count!r}.")
    repeat_count = int(repeat_count)
    if repeat_count < 0:
        raise ValueError(f"Repeat count must be >= 0. Repeat count: {repeat_count}. Graph: {graph}")
    if not isinstance(graph, Graph):
        raise TypeError(f"Expected a popxl.Graph to repeat, got {type(graph).__name__}.")
    n_in, n_out = len(graph.inputs), len(graph.outputs)
    if n_in < n_out:
        raise ValueError(f"To repeat the subgraph ({graph.id}) the number of inputs must be greater than or "
                         f"equal to the number of outputs. {n_in} < {n_out}")
    for i, (ins, outs) in enumerate(zip(graph.inputs, graph.outputs)):
        if ins.shape != outs.shape or ins.dtype != outs.dtype:
            raise ValueError(f"Output {i} of the repeated graph {graph.id} ({outs.name}: {outs.dtype.name} "
                             f"{outs.shape}) is loop-carried into input {i} ({ins.name}: {ins.dtype.name} "
                             f"{ins.shape}): their shapes and dtypes must match.")
    parent = get_current_context().graph
    connected = _connect_inputs(check_inputs, parent, graph, "repeated", inputs, inputs_dict)
    op = _call_like("repeat", graph, connected, {"repeat_count": repeat_count, "num_carried": n_out})
    return CallSiteInfo(op)


class ConditionalSiteInfo(CallSiteInfo):
    """What a conditional op connects. Op input 0 is the condition; the then-branch inputs
    follow, then the else-branch inputs. Output i is output i of whichever branch ran."""

    def __init__(self, subgraph_op: Op):
        if not isinstance(subgraph_op, Op) or subgraph_op.type != "conditional":
            raise TypeError(f"ConditionalSiteInfo needs a conditional op, got {subgraph_op!r}.")
        self._xop = subgraph_op

    def _map(self, then_branch: bool) -> Dict[int, int]:
        return self._xop.attrs["then_input_map" if then_branch else "else_input_map"]

    # PopXL's API: a conditional's "called graph" is the pair of branches
    @property
    def called_graph(self) -> Tuple[Graph, Graph]:  # type: ignore[override]
        return self._xop.attrs["then_branch"], self._xop.attrs["else_branch"]

    def graph_to_parent_input_index(self, idx: int, then_branch: bool = True) -> int:
        try:
            return self._map(then_branch)[idx]
        except KeyError:
            raise IndexError("Invalid graph input index") from None

    def parent_to_graph_input_index(self, idx: int) -> int:
        for then_branch in (True, False):
            for g_idx, op_idx in self._map(then_branch).items():
                if op_idx == idx:
                    return g_idx
        raise IndexError("Invalid parent graph input index")

    def is_parent_index_in_then_branch(self, idx: int) -> bool:
        if idx in self._map(True).values():
            return True
        if idx in self._map(False).values():
            return False
        raise IndexError("Invalid parent graph input index")

    def graph_to_parent_output_index(self, idx: int, then_branch: bool = True) -> int:
        return super().graph_to_parent_output_index(idx)

    def parent_to_graph_output_index(self, idx: int, then_branch: bool = True) -> int:
        return super().parent_to_graph_output_index(idx)

    def graph_to_parent(self, graph_tensor: Tensor) -> Tensor:
        for g, then_branch in zip(self.called_graph, (True, False)):
            for i, t in enumerate(g.inputs):
                if t is graph_tensor:
                    return self._xop.inputs[self.graph_to_parent_input_index(i, then_branch)]
            for i, t in enumerate(g.outputs):
                if t is graph_tensor:
                    return self._xop.outputs[i]
        raise ValueError(f"Tensor {graph_tensor.name} is not an input or output of the called graph(s).")

    def parent_to_graph(self, parent_tensor: Tensor) -> Tensor:
        for i, t in enumerate(self._xop.inputs):
            if t is parent_tensor and i > 0:
                g = self.called_graph[0 if self.is_parent_index_in_then_branch(i) else 1]
                return g.inputs[self.parent_to_graph_input_index(i)]
        raise ValueError(f"Tensor {parent_tensor.name} is not a parent graph input of the call site.")

    def set_parent_input_modified(self, parent_tensor: Tensor, infer_modified_regions: bool = True):
        raise NotImplementedError("Parent input modification is not yet implemented for the conditional op.")


def conditional(cond: Tensor, then_branch: Graph, else_branch: Graph,
                then_inputs: Optional[Iterable[Union[Tensor, Iterable[Tensor]]]] = None,
                else_inputs: Optional[Iterable[Union[Tensor, Iterable[Tensor]]]] = None,
                then_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                else_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None) -> Tuple[Tensor, ...]:
    """Run ``then_branch`` if the boolean scalar ``cond`` is true at run time, else ``else_branch``.
    Both branches must have outputs of the same number, shapes and dtypes."""
    return conditional_with_info(cond, then_branch, else_branch, then_inputs, else_inputs, then_inputs_dict,
                                 else_inputs_dict).outputs


@op_debug_context("conditional")
def conditional_with_info(cond: Tensor, then_branch: Graph, else_branch: Graph,
                          then_inputs: Optional[Iterable[Union[Tensor, Iterable[Tensor]]]] = None,
                          else_inputs: Optional[Iterable[Union[Tensor, Iterable[Tensor]]]] = None,
                          then_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                          else_inputs_dict: Optional[Mapping[Tensor, Tensor]] = None,
                          check_inputs: bool = True) -> ConditionalSiteInfo:
    """``conditional`` returning the ConditionalSiteInfo of the op."""
    parent = get_current_context().graph
    if not isinstance(cond, Tensor):
        raise TypeError(f"conditional: cond must be a bool Tensor, got {type(cond).__name__}.")
    if cond.graph is not parent:
        raise ValueError(f"conditional: the condition {cond} is not in the current graph {parent}.")
    if cond.dtype != dtypes.bool or cond.nelms != 1:
        raise TypeError(f"conditional: cond must be a bool tensor with one element, got {cond}.")
    then_conn = _connect_inputs(check_inputs, parent, then_branch, "then_branch", then_inputs, then_inputs_dict)
    else_conn = _connect_inputs(check_inputs, parent, else_branch, "else_branch", else_inputs, else_inputs_dict)
    t_outs, e_outs = then_branch.outputs, else_branch.outputs
    if len(t_outs) != len(e_outs):
        raise ValueError("`then_branch` graph and `else_branch` graph must have the same number of outputs: "
                         f"{len(t_outs)} != {len(e_outs)}")
    for i, (a, b) in enumerate(zip(t_outs, e_outs)):
        if a.shape != b.shape or a.dtype != b.dtype:
            raise ValueError(f"Output {i} of then_branch ({a.dtype.name} {a.shape}) and of else_branch "
                             f"({b.dtype.name} {b.shape}) must have the same shape and dtype.")
    inputs = [cond] + [t for _, t in then_conn] + [t for _, t in else_conn]
    then_map = {g_i: 1 + k for k, (g_i, _) in enumerate(then_conn)}
    else_map = {g_i: 1 + len(then_conn) + k for k, (g_i, _) in enumerate(else_conn)}
    attrs = {"then_branch": then_branch, "else_branch": else_branch, "then_input_map": then_map,
             "else_input_map": else_map}
    names = [f"{a.name}_or_{b.name}" for a, b in zip(t_outs, e_outs)]
    op = create_op("conditional", inputs, [(a.shape, a.dtype) for a in t_outs], attrs, out_names=names,
                   called_graphs=(then_branch, else_branch), check_placement=False)
    return ConditionalSiteInfo(op)
