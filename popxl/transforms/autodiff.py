"""Automatic differentiation of a graph (``popxl.transforms.autodiff``).

``autodiff(graph)`` builds a new *gradient graph* whose

- inputs are, first, the gradients of the forward tensors in ``grads_provided`` (default: every
  output of ``graph``; ``ExpectedConnectionType.FwdGrad``), then the forward tensors (inputs,
  intermediates, outputs) the backward computation reads (``ExpectedConnectionType.Fwd``);
- outputs are the gradients of ``grads_required`` (default: every input of ``graph``), in order.

The forward intermediates the gradient graph needs are added as outputs of ``graph`` (PopXL's
"add forward outputs" stitching), and every ``call`` op that calls ``graph`` gets the matching new
outputs, so ``GradGraphInfo.inputs_dict(fwd_call_info)`` can connect them at a call site. Nothing
is recomputed.

Gradients are built op by op, in reverse schedule order, with the rules of
:mod:`popxl.transforms.grad_rules`. A tensor read by several ops gets the sum of its partial
gradients (a chain of ``add`` ops tagged ``attrs['grad_sum']``, placed where the total is first
needed; :func:`popxl.transforms.decompose_sum` moves each addition next to its partial). A required
gradient that no path reaches is zero (``ops.init``).

Called graphs: ``call`` ops use ``called_graphs_grad_info[graph]`` or differentiate the called
graph recursively; ``repeat`` ops are differentiated by a reverse repeat of the body's gradient,
reading per-iteration activations that the forward loop stacks (see grad_rules/control.py);
``conditional`` ops by a conditional over the gradients of the two branches.
"""
from enum import Enum
from typing import Callable, Dict, Iterable, List, Mapping, Optional, Sequence, Tuple, Union

import popxl.ops as ops
from popxl.graph import Graph
from popxl.op import Op
from popxl.ops.control import CallSiteInfo
from popxl.tensor import Constant, Tensor, constant, graph_input, graph_output

from ._graph_edit import add_graph_output, placement
from .grad_rules._registry import NON_DIFFERENTIABLE, get_grad_rule

__all__ = ["ExpectedConnectionType", "ExpectedConnection", "GradGraphInfo", "autodiff"]

GRAD_PREFIX = "Gradient___"


class ExpectedConnectionType(Enum):
    """What a gradient-graph input or output corresponds to in the forward graph."""
    Fwd = "Fwd"
    """The value of a forward tensor (an activation)."""
    FwdGrad = "FwdGrad"
    """The gradient of a forward tensor."""


class ExpectedConnection:
    """One input or output of a gradient graph: a forward tensor and how it is connected."""

    # set by _create (the constructor is closed to users)
    _fwd_tensor: Tensor
    _connection_type: ExpectedConnectionType

    def __init__(self) -> None:
        raise TypeError("ExpectedConnection is created by popxl.transforms.autodiff; it can't be constructed directly.")

    @classmethod
    def _create(cls, fwd_tensor: Tensor, connection_type: ExpectedConnectionType) -> "ExpectedConnection":
        self = object.__new__(cls)
        self._fwd_tensor = fwd_tensor
        self._connection_type = connection_type
        return self

    @classmethod
    def _from_pb(cls, fwd_graph, pb_ec) -> "ExpectedConnection":
        """From PopART's `_ir.ExpectedConnection` (a forward tensor id and a type) of forward
        graph `fwd_graph` (an `_ir.Graph` or popxl Graph)."""
        g = Graph._from_pb(fwd_graph) if not isinstance(fwd_graph, Graph) else fwd_graph
        return cls._create(g.get_tensor(pb_ec.fwdId), ExpectedConnectionType[pb_ec.type.name])

    @property
    def _pb_ec(self):
        """This connection as PopART's `_ir.ExpectedConnection`."""
        from popxl._pb import ExpectedConnection as PbEC, ExpectedConnectionType as PbType
        return PbEC(self._fwd_tensor.id, PbType[self._connection_type.name])

    @property
    def fwd_tensor(self) -> Tensor:
        """The tensor of the forward graph."""
        return self._fwd_tensor

    @property
    def connection_type(self) -> ExpectedConnectionType:
        """``Fwd`` (its value) or ``FwdGrad`` (its gradient)."""
        return self._connection_type

    def __repr__(self) -> str:
        return f"({self._connection_type.name}, {self._fwd_tensor})"

    def __eq__(self, other) -> bool:
        return (isinstance(other, ExpectedConnection) and self._fwd_tensor == other._fwd_tensor
                and self._connection_type == other._connection_type)

    def __hash__(self) -> int:
        return hash((self._fwd_tensor, self._connection_type))


class GradGraphInfo:
    """The result of :func:`autodiff`: the gradient graph and how to connect it."""

    # set by _create (the constructor is closed to users)
    _graph: Graph
    _forward_graph: Graph
    _expected_inputs: Tuple[ExpectedConnection, ...]
    _expected_outputs: Tuple[ExpectedConnection, ...]

    def __init__(self) -> None:
        raise TypeError("GradGraphInfo is created by popxl.transforms.autodiff; it can't be constructed directly.")

    @classmethod
    def _create(cls, graph: Graph, forward_graph: Graph, expected_inputs: Sequence[ExpectedConnection],
                expected_outputs: Sequence[ExpectedConnection]) -> "GradGraphInfo":
        self = object.__new__(cls)
        self._graph = graph
        self._forward_graph = forward_graph
        self._expected_inputs = tuple(expected_inputs)
        self._expected_outputs = tuple(expected_outputs)
        return self

    @classmethod
    def _from_pb(cls, ir, fwd_graph, bwd_info) -> "GradGraphInfo":
        """From PopART's `_ir.BwdGraphInfo` (the backward graph's id and its expected inputs and
        outputs as forward tensor ids) of forward graph `fwd_graph`."""
        fwd = Graph._from_pb(fwd_graph) if not isinstance(fwd_graph, Graph) else fwd_graph
        popxl_ir = getattr(ir, "_ir", ir)
        gid = bwd_info.bwdGraphId.str() if hasattr(bwd_info.bwdGraphId, "str") else str(bwd_info.bwdGraphId)
        bwd = next((g for g in popxl_ir.graphs if g.id == gid), None)
        if bwd is None:
            raise KeyError(f"GradGraphInfo._from_pb: no graph {gid!r} in the Ir")
        ins = [ExpectedConnection._from_pb(fwd, ec) for ec in bwd_info.expectedInputs]
        outs = [ExpectedConnection._from_pb(fwd, ec) for ec in bwd_info.expectedOutputs]
        # as PopART's BwdGraphInfo: the connections describe the graph's first inputs / outputs (a
        # transform may have added inputs after them, e.g. accumulators, or removed outputs)
        return cls._create(bwd, fwd, ins, outs)

    @property
    def _pb_bwd_graph_info(self):
        from popxl._pb import BwdGraphInfo
        return BwdGraphInfo(self._graph.id, [ec._pb_ec for ec in self._expected_inputs],
                            [ec._pb_ec for ec in self._expected_outputs])

    @property
    def graph(self) -> Graph:
        """The gradient graph."""
        return self._graph

    @property
    def forward_graph(self) -> Graph:
        """The graph that was differentiated."""
        return self._forward_graph

    @property
    def expected_inputs(self) -> Tuple[ExpectedConnection, ...]:
        """One connection per input of the gradient graph, in input order."""
        return self._expected_inputs

    @property
    def expected_outputs(self) -> Tuple[ExpectedConnection, ...]:
        """One connection (``FwdGrad``) per output of the gradient graph, in output order."""
        return self._expected_outputs

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        """The forward tensors of the expected inputs, in gradient-graph input order (PopXL's
        meaning: ``ec.fwd_tensor`` of each expected input; the gradient graph's own inputs are
        ``info.graph.inputs``)."""
        return tuple(ec.fwd_tensor for ec in self._expected_inputs)

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        """The forward tensors whose gradients the gradient graph outputs, in output order."""
        return tuple(ec.fwd_tensor for ec in self._expected_outputs)

    def _check_call_site(self, info: CallSiteInfo, what: str) -> None:
        if not isinstance(info, CallSiteInfo):
            raise TypeError(f"{what} must be a CallSiteInfo (from ops.call_with_info), got {type(info).__name__}.")

    def inputs_dict(self, fwd_call_info: CallSiteInfo) -> Dict[Tensor, Tensor]:
        """Map the ``Fwd`` inputs of the gradient graph to the tensors of the forward call site's
        parent graph that hold those values (the call's inputs and outputs).

        Use it as ``inputs_dict`` of the call to the gradient graph; the ``FwdGrad`` inputs (the
        gradients of the forward outputs) are given separately.

        Raises:
            ValueError: the call site does not call the forward graph, or a needed forward tensor is
                not an input or output of the forward graph.
        """
        self._check_call_site(fwd_call_info, "fwd_call_info")
        if fwd_call_info.called_graph != self._forward_graph:
            raise ValueError(f"The call site calls {fwd_call_info.called_graph}, not the forward graph "
                             f"{self._forward_graph} of this GradGraphInfo.")
        fwd_ins = {t: i for i, t in enumerate(self._forward_graph.inputs)}
        fwd_outs = {t: i for i, t in enumerate(self._forward_graph.outputs)}
        out: Dict[Tensor, Tensor] = {}
        for grad_in, conn in zip(self._graph.inputs, self._expected_inputs):
            if conn.connection_type is not ExpectedConnectionType.Fwd:
                continue
            t = conn.fwd_tensor
            if t in fwd_ins:
                out[grad_in] = fwd_call_info.parent_input(fwd_call_info.graph_to_parent_input_index(fwd_ins[t]))
            elif t in fwd_outs:
                out[grad_in] = fwd_call_info.parent_output(fwd_outs[t])
            else:
                raise ValueError(f"The gradient graph needs the forward tensor {t.id}, which is neither an input "
                                 f"nor an output of {self._forward_graph}, so the call site can't provide it.")
        return out

    def fwd_graph_ins_to_grad_parent_outs(self, grad_call_info: CallSiteInfo) -> Dict[Tensor, Tensor]:
        """Map each forward-graph tensor whose gradient the gradient graph computes (normally the
        forward graph's inputs) to the parent-graph tensor the gradient call site outputs for it."""
        self._check_call_site(grad_call_info, "grad_call_info")
        if grad_call_info.called_graph != self._graph:
            raise ValueError(f"The call site calls {grad_call_info.called_graph}, not the gradient graph "
                             f"{self._graph}.")
        return {conn.fwd_tensor: grad_call_info.parent_output(i) for i, conn in enumerate(self._expected_outputs)}

    def fwd_parent_ins_to_grad_parent_outs(self, fwd_call_info: CallSiteInfo,
                                           grad_call_info: CallSiteInfo) -> Dict[Tensor, Tensor]:
        """Map the parent tensors given to the forward call site to their gradients output by the
        gradient call site (for the forward-graph inputs whose gradients are computed)."""
        self._check_call_site(fwd_call_info, "fwd_call_info")
        if fwd_call_info.called_graph != self._forward_graph:
            raise ValueError(f"The call site calls {fwd_call_info.called_graph}, not the forward graph "
                             f"{self._forward_graph} of this GradGraphInfo.")
        fwd_ins = {t: i for i, t in enumerate(self._forward_graph.inputs)}
        out: Dict[Tensor, Tensor] = {}
        for fwd_t, grad_t in self.fwd_graph_ins_to_grad_parent_outs(grad_call_info).items():
            if fwd_t in fwd_ins:
                idx = fwd_call_info.graph_to_parent_input_index(fwd_ins[fwd_t])
                out[fwd_call_info.parent_input(idx)] = grad_t
        return out

    def __repr__(self) -> str:
        return (f"GradGraphInfo[graph={self._graph.id} forward_graph={self._forward_graph.id} "
                f"inputs={len(self._expected_inputs)} outputs={len(self._expected_outputs)}]")


# ------------------------------------------------------------------------------------------------
# the builder


class _State:
    """Shared by the builders of one autodiff call: the grad infos of called graphs."""

    def __init__(self, called_graphs_grad_info: Optional[Mapping[Graph, GradGraphInfo]],
                 recompute: Iterable[Op] = ()):
        self.infos: Dict[Graph, GradGraphInfo] = dict(called_graphs_grad_info or {})
        self.building: List[Graph] = []
        # forward ops whose outputs the gradient graph computes again instead of reading them
        # (PopART's RecomputeType.Recompute; see recompute_ops)
        self.recompute = frozenset(recompute)

    def grad_info(self, graph: Graph) -> GradGraphInfo:
        """The grad info of a called graph: given by the user, or made now (stitched)."""
        if graph in self.infos:
            return self.infos[graph]
        if graph in self.building:
            raise RuntimeError(f"autodiff: recursive calls of {graph} can't be differentiated.")
        if not graph._recursive_autodiff:
            raise RuntimeError(
                f"autodiff: {graph} is marked as not recursively differentiable "
                f"(_pb_graph.setCanBeRecursivelyAutodiffed(False)): pass the GradGraphInfo of its gradient "
                f"graph in called_graphs_grad_info.")
        info = _autodiff_stitched(graph, list(graph.outputs), list(graph.inputs), self)
        self.infos[graph] = info
        return info


def _is_float(t: Tensor) -> bool:
    return t.dtype.is_floating_point


class RuleContext:
    """What a gradient rule sees of the autodiff in progress (one per differentiated op)."""

    def __init__(self, builder: "_GradBuilder", op: Op, wants: Sequence[bool]):
        self._b = builder
        self.op = op
        self._wants = tuple(wants)

    # -- forward values ---------------------------------------------------------------------
    def fwd(self, t: Tensor) -> Tensor:
        """The value of the forward tensor ``t`` in the gradient graph (a Fwd connection)."""
        return self._b.fwd_value(t)

    def input(self, i: int) -> Tensor:
        """The value of forward input ``i`` of the op."""
        return self._b.fwd_value(self.op.inputs[i])

    def output(self, i: int) -> Tensor:
        """The value of forward output ``i`` of the op."""
        return self._b.fwd_value(self.op.outputs[i])

    # -- what is asked ----------------------------------------------------------------------
    def wants(self, i: int) -> bool:
        """Whether the gradient of input ``i`` is needed."""
        return self._wants[i]

    def wants_any(self, *idx: int) -> bool:
        return any(self._wants[i] for i in idx)

    @property
    def fwd_graph(self) -> Graph:
        return self._b.fwd

    @property
    def grad_graph(self) -> Graph:
        return self._b.grad_graph

    @property
    def state(self) -> _State:
        return self._b.state

    def grad_info(self, graph: Graph) -> GradGraphInfo:
        """Grad info of a graph called by the op (made now if needed)."""
        return self._b.state.grad_info(graph)

    def build_unstitched(self, graph: Graph, grads_provided: Sequence[Tensor], grads_required: Sequence[Tensor]):
        """Differentiate ``graph`` without adding outputs to it. Returns (gradient graph, expected
        inputs, expected outputs); the Fwd connections may name intermediates of ``graph``."""
        return _build(graph, grads_provided, grads_required, self._b.state)

    def is_only_grad_source(self, t: Tensor) -> bool:
        """True if the op is the only consumer of ``t`` that passes a gradient to it and ``t`` is
        neither provided nor required (so the op's gradient for ``t`` is its whole gradient)."""
        return self._b.only_grad_source(t, self.op)


class _DirectGrad:
    """A gradient that skips the producer of a tensor: the rule of the producer returns
    ``grads_of_inputs`` as is (used by nll_loss_with_softmax_grad -> softmax)."""

    def __init__(self, producer: Op, grads_of_inputs: Dict[int, Tensor]):
        self.producer = producer
        self.grads_of_inputs = grads_of_inputs


class OuterInputs:
    """By-reference inputs of a gradient graph standing for tensors of the graph that calls it (the
    weights and optimizer state a gradient consumer updates, see ``autodiff_recomputing``). Called
    with an outer tensor inside the gradient graph, it gives that tensor's input (made once); the
    inputs come after the gradient graph's expected inputs, and ``inputs`` maps each outer tensor to
    its input for the call site."""

    def __init__(self):
        self.inputs: Dict[Tensor, Tensor] = {}

    def __call__(self, outer: Tensor) -> Tensor:
        t = self.inputs.get(outer)
        if t is None:
            t = graph_input(outer.shape, outer.dtype, outer.name, by_ref=True, meta_shape=outer.meta_shape)
            self.inputs[outer] = t
        return t


GradientConsumer = Callable[[Tensor, Tensor], None]


class _GradBuilder:
    def __init__(self, fwd: Graph, grads_provided: Sequence[Tensor], grads_required: Sequence[Tensor],
                 state: _State, on_gradient: Optional[GradientConsumer] = None,
                 outer: Optional[OuterInputs] = None):
        self.fwd = fwd
        self.gp = list(grads_provided)
        self.gr = list(grads_required)
        self.state = state
        self.on_gradient = on_gradient
        self.outer = outer
        self.grad_graph = fwd.ir.create_empty_graph(f"{fwd.id}_grad" if fwd.id else "grad")
        self.expected_inputs: List[ExpectedConnection] = []
        self.expected_outputs: List[ExpectedConnection] = []
        self.values: Dict[Tensor, Tensor] = {}
        self.partials: Dict[Tensor, List] = {}
        self.direct: Dict[Tensor, _DirectGrad] = {}
        self.ops = sorted(fwd._ops, key=lambda o: o.id)

    # -- analysis -----------------------------------------------------------------------------
    def _analyse(self):
        req = set(self.gr)
        needs: Dict[Tensor, bool] = {t: (t in req) for t in self.fwd.inputs}
        for op in self.ops:
            flows = op.type not in NON_DIFFERENTIABLE and any(needs.get(x, False) for x in op.inputs)
            for o in op.outputs:
                needs[o] = (o in req) or (flows and _is_float(o))
        prov = set(self.gp)
        has: Dict[Tensor, bool] = {t: True for t in prov}
        for op in reversed(self.ops):
            if op.type in NON_DIFFERENTIABLE:
                continue
            if any(has.get(o, False) and _is_float(o) for o in op.outputs):
                for x in op.inputs:
                    if _is_float(x):
                        has[x] = True
        self.needs, self.has = needs, has
        # consumers that pass a gradient to each tensor
        self.grad_consumers: Dict[Tensor, List[Op]] = {}
        for op in self.ops:
            if self._relevant(op):
                for i, x in enumerate(op.inputs):
                    if self._wants(op, i):
                        self.grad_consumers.setdefault(x, []).append(op)

    def _relevant(self, op: Op) -> bool:
        if op.type in NON_DIFFERENTIABLE:
            return False
        return (any(self.has.get(o, False) and _is_float(o) for o in op.outputs)
                and any(self.needs.get(x, False) for x in op.inputs))

    def _wants(self, op: Op, i: int) -> bool:
        x = op.inputs[i]
        return self.needs.get(x, False) and _is_float(x)

    def only_grad_source(self, t: Tensor, op: Op) -> bool:
        if t in self.gp or t in self.gr:
            return False
        return self.grad_consumers.get(t, []) == [op]

    # -- values -------------------------------------------------------------------------------
    def fwd_value(self, t: Tensor) -> Tensor:
        if t in self.values:
            return self.values[t]
        if t.graph is not self.fwd:
            raise ValueError(f"autodiff: {t} is not a tensor of the forward graph {self.fwd}.")
        v: Tensor
        if isinstance(t, Constant):
            v = constant(t._data, t.dtype, t.name)
        elif self._recomputed(t):
            return self._recompute(t)
        else:
            for c in t.consumers:
                if c.graph is self.fwd and any(c.inputs[j] is t for j in c.modified):
                    raise NotImplementedError(
                        f"autodiff: the gradient needs the value of {t.id}, but the in-place op '{c.name}' "
                        f"({c.type}) overwrites it in the forward graph. Use the out-of-place form of the op.")
            v = graph_input(t.shape, t.dtype, t.name, meta_shape=t.meta_shape)
            self.expected_inputs.append(ExpectedConnection._create(t, ExpectedConnectionType.Fwd))
        self.values[t] = v
        return v

    def _recomputed(self, t: Tensor) -> bool:
        """Whether ``t`` is computed again in the gradient graph: its producer is marked for
        recomputation and ``t`` is not an input or output of the forward graph (those are at hand)."""
        op = t._producer
        return (op is not None and op in self.state.recompute and op.graph is self.fwd
                and t not in self.fwd.inputs and t not in self.fwd.outputs)

    def _recompute(self, t: Tensor) -> Tensor:
        """A copy of the producer of ``t`` in the gradient graph, placed where its value is first
        needed (as PopART runs a recomputed op just before the first backward op reading it), its
        inputs the forward values (kept, or recomputed in turn). The forward tensor is no longer an
        output of the forward graph, so it dies after its last forward reader."""
        from popxl.ops._op_builder import create_op
        op = t._producer_op()
        ins = [self.fwd_value(x) for x in op.inputs]
        with placement(op):
            nop = create_op(op.type, ins, [(o.shape, o.dtype) for o in op.outputs], dict(op.attrs),
                            out_names=[o.name.split("/")[-1] for o in op.outputs], name=op.name.split("/")[-1],
                            inplace=op.inplace, modified=op.modified, aliases=op.aliases,
                            called_graphs=op.called_graphs, check_placement=False,
                            out_meta_shapes=[o.meta_shape for o in op.outputs])
        nop.debug_context = op.debug_context
        self.fwd.ir._add_recomputation(nop, op)  # the lowering reruns op's programs for it (lowering/context.py)
        for o, no in zip(op.outputs, nop.outputs):
            self.values[o] = no
        return self.values[t]

    def _total(self, t: Tensor):
        ps = self.partials.get(t)
        if not ps:
            return None
        if len(ps) > 1:
            group = ps[0].id  # unique in the Ir and the same each time it is built (executable cache keys)
            acc = ps[0]
            for p in ps[1:]:
                acc = ops.add(acc, p)
                acc._producer_op().attrs["grad_sum"] = group
            self.partials[t] = [acc]
        return self.partials[t][0]

    def _add_partial(self, t: Tensor, g: Tensor, op: Op) -> None:
        if not isinstance(g, Tensor):
            raise TypeError(f"autodiff: the gradient rule of {op.type!r} returned {g!r} for input {t.id}.")
        if g.shape != t.shape:
            raise RuntimeError(f"autodiff: the gradient rule of {op.type!r} (op '{op.name}') returned a gradient "
                               f"of shape {g.shape} for {t.id} of shape {t.shape}.")
        if g.dtype != t.dtype:
            g = ops.cast(g, t.dtype)
        self.partials.setdefault(t, []).append(g)

    # -- build --------------------------------------------------------------------------------
    def build(self):
        for t in list(self.gp) + list(self.gr):
            if not isinstance(t, Tensor):
                raise TypeError(f"autodiff: expected popxl Tensors in grads_provided / grads_required, got {t!r}.")
            if t.graph is not self.fwd:
                raise ValueError(f"autodiff: {t} is not a tensor of the graph being differentiated ({self.fwd}).")
        self._analyse()
        self.state.building.append(self.fwd)
        try:
            with self.grad_graph:
                for t in self.gp:
                    g = graph_input(t.shape, t.dtype, GRAD_PREFIX + t.name.split("/")[-1], meta_shape=t.meta_shape)
                    self.expected_inputs.append(ExpectedConnection._create(t, ExpectedConnectionType.FwdGrad))
                    self.partials.setdefault(t, []).append(g)
                complete = self._completed_by()
                for op in reversed(self.ops):
                    if self._relevant(op):
                        self._differentiate(op)
                    for t in complete.get(op, ()):
                        self._consume(t, self._total(t))
                for t in self.gr:
                    g = self._total(t)
                    if g is None:
                        g = ops.init(t.shape, t.dtype, GRAD_PREFIX + t.name.split("/")[-1], "zero")
                    if t not in self._consumed:
                        self._consume(t, g)
                    graph_output(g)
                    self.expected_outputs.append(ExpectedConnection._create(t, ExpectedConnectionType.FwdGrad))
                if self.outer is not None:  # the outer tensors' inputs go after the expected ones
                    for t in self.outer.inputs.values():
                        self.grad_graph._remove_input(self.grad_graph.inputs.index(t))
                        self.grad_graph._add_input(t, by_ref=True)
        except BaseException:
            # leave no half-built gradient graph behind (graphs it called stay: they may be complete)
            if not any(self.grad_graph in op.called_graphs for g in self.fwd.ir.graphs for op in g._ops):
                self.fwd.ir._forget_graph(self.grad_graph.id)
            raise
        finally:
            self.state.building.remove(self.fwd)
        return self.grad_graph, self.expected_inputs, self.expected_outputs

    def _completed_by(self) -> Dict[Op, List[Tensor]]:
        """For ``on_gradient``: the op after which each required input of the graph has its whole
        gradient and nothing of the gradient graph reads it any more: its first reader in the
        forward schedule, the last one the reverse walk reaches (a rule reads, and recomputes,
        only forward tensors of its own op or of ops after it)."""
        self._consumed: set = set()
        out: Dict[Op, List[Tensor]] = {}
        if self.on_gradient is None:
            return out
        ins = set(self.fwd.inputs)
        for t in self.gr:
            readers = [c for c in t.consumers if c.graph is self.fwd]
            if t in ins and t not in self.gp and readers:
                out.setdefault(min(readers, key=lambda o: o.id), []).append(t)
        return out

    def _consume(self, t: Tensor, g: Optional[Tensor]) -> None:
        if self.on_gradient is not None and g is not None and t not in self._consumed:
            self._consumed.add(t)
            self.on_gradient(t, g)

    def _differentiate(self, op: Op) -> None:
        inputs = tuple(op.inputs)  # rules of control-flow ops may rewrite the op (repeat stacking)
        direct = [self.direct.get(o) for o in op.outputs]
        if any(d is not None for d in direct):
            d = next(d for d in direct if d is not None)
            for i, g in d.grads_of_inputs.items():
                if self._wants(op, i) and g is not None:
                    self._add_partial(inputs[i], g, op)
            return
        with placement(op):  # gradient ops (and the sums of an output's partials) in op's scope
            grads = tuple(self._total(o) if _is_float(o) else None for o in op.outputs)
            if all(g is None for g in grads):
                return
            wants = [self._wants(op, i) for i in range(len(inputs))]
            if any(wants) and op.type in FLOAT8_OP_TYPES:
                raise RuntimeError(
                    f"Floating point 8 is not supported for training: autodiff reached {op.type} ({op.name}), "
                    "which has no gradient in PopXL. Keep float8 ops out of the differentiated graph (inference "
                    "only), or detach their inputs with ops.detach.")
            rule = get_grad_rule(op.type)
            ctx = RuleContext(self, op, wants)
            result = rule(ctx, op, grads)
        if isinstance(result, _DirectGrad):
            raise RuntimeError("Internal error: a rule returned a direct gradient for the op itself.")
        items = result.items() if isinstance(result, dict) else enumerate(result or ())
        for i, g in items:
            if g is None or not wants[i]:
                continue
            if isinstance(g, _DirectGrad):
                self.direct[inputs[i]] = g
                continue
            self._add_partial(inputs[i], g, op)


def _build(graph: Graph, grads_provided: Sequence[Tensor], grads_required: Sequence[Tensor], state: _State,
           on_gradient: Optional[GradientConsumer] = None, outer: Optional[OuterInputs] = None):
    return _GradBuilder(graph, grads_provided, grads_required, state, on_gradient, outer).build()


def _autodiff_stitched(graph: Graph, grads_provided: Sequence[Tensor], grads_required: Sequence[Tensor],
                       state: _State, on_gradient: Optional[GradientConsumer] = None,
                       outer: Optional[OuterInputs] = None) -> GradGraphInfo:
    grad_graph, exp_in, exp_out = _build(graph, grads_provided, grads_required, state, on_gradient, outer)
    ins, outs = set(graph.inputs), set(graph.outputs)
    for conn in exp_in:
        t = conn.fwd_tensor
        if conn.connection_type is ExpectedConnectionType.Fwd and t not in ins and t not in outs:
            add_graph_output(graph, t)
            outs.add(t)
    return GradGraphInfo._create(grad_graph, graph, exp_in, exp_out)


# ops PopART gives no gradient ("Floating point 8 is not supported for training", getGradOps of
# Pow2ScaleThenCastOp / CastThenPow2ScaleOp; "Using a scaled matmul in a backwards pass is currently
# not supported", MatMulOp / ConvOp with a log2 scale input)
FLOAT8_OP_TYPES = frozenset({"pow2scale_then_cast", "cast_then_pow2scale", "matmul_pow2scaled", "conv_pow2scaled",
                             "conv_transpose_pow2scaled"})


def autodiff(graph: Graph, grads_provided: Optional[Iterable[Tensor]] = None,
             grads_required: Optional[Iterable[Tensor]] = None,
             called_graphs_grad_info: Optional[Mapping[Graph, GradGraphInfo]] = None,
             return_all_grad_graphs: bool = False) -> Union[GradGraphInfo, Dict[Graph, GradGraphInfo]]:
    """Differentiate ``graph`` and return the :class:`GradGraphInfo` of its new gradient graph.

    Args:
        graph: the forward graph (not the main graph).
        grads_provided: forward tensors whose gradients are inputs of the gradient graph (default:
            every output of ``graph``). They come first among its inputs, in this order.
        grads_required: forward tensors whose gradients the gradient graph outputs, in this order
            (default: every input of ``graph``).
        called_graphs_grad_info: grad infos to use for graphs that ``graph`` calls; other called
            graphs are differentiated too.
        return_all_grad_graphs: return the dict {forward graph: GradGraphInfo} of every graph
            differentiated (and given) instead of the info of ``graph`` alone.

    The forward intermediates the gradient graph needs become new outputs of ``graph`` (and of
    the call ops that call it): differentiate a graph before calling it.

    Raises:
        TypeError / ValueError: bad arguments (tensors of another graph, the main graph).
        NotImplementedError: an op on a gradient path has no gradient rule.
    """
    if not isinstance(graph, Graph):
        raise TypeError(f"autodiff: expected a popxl.Graph, got {type(graph).__name__}.")
    if graph.is_main_graph:
        raise ValueError("autodiff: the main graph can't be differentiated (it has no inputs or outputs). Build the "
                         "forward pass with Ir.create_graph and call it.")
    grads_provided = list(graph.outputs) if grads_provided is None else list(grads_provided)
    grads_required = list(graph.inputs) if grads_required is None else list(grads_required)
    if called_graphs_grad_info is not None:
        for g, info in dict(called_graphs_grad_info).items():
            if not isinstance(info, GradGraphInfo):
                raise TypeError(f"autodiff: called_graphs_grad_info[{g}] is not a GradGraphInfo.")
    state = _State(called_graphs_grad_info)
    info = _autodiff_stitched(graph, grads_provided, grads_required, state)
    state.infos[graph] = info
    if return_all_grad_graphs:
        return dict(state.infos)
    return info


def autodiff_recomputing(graph: Graph, grads_provided: Sequence[Tensor], grads_required: Sequence[Tensor],
                         recompute: Iterable[Op] = (), on_gradient: Optional[GradientConsumer] = None,
                         outer: Optional[OuterInputs] = None) -> GradGraphInfo:
    """``autodiff`` (stitched) where the outputs of the forward ops ``recompute`` are computed again
    in the gradient graph, each just before its first backward reader, instead of being kept from
    the forward pass (PopART's implicit recomputation, driven by popart/_recompute.py). Outputs of
    ``graph`` and its inputs are never recomputed. Results are those of plain ``autodiff``.

    ``on_gradient(t, g)``, called inside the gradient graph as soon as the gradient ``g`` of a
    required input ``t`` of ``graph`` is whole (after the rule of its last consumer; ``g`` is also
    the graph's output), adds the ops that consume it there: PopART's scheduler runs a weight's
    VarUpdate right after its gradient, which frees the gradient, and not after the whole backward
    pass. ``outer`` gives those ops the caller's tensors (weights, optimizer state) as by-reference
    inputs of the gradient graph, after its expected inputs."""
    state = _State(None, recompute)
    info = _autodiff_stitched(graph, list(grads_provided), list(grads_required), state, on_gradient, outer)
    state.infos[graph] = info
    return info
