"""The op classes of `_ir.op` that scripts test with isinstance, with their own methods.

CallOp: input index = the called graph's input index (PopART's CallOp numbering); connecting an
index the call site does not feed yet adds an input to the call site (how popxl-addons routes a
tensor into a subgraph).

LoopOp: PopXL's repeat is, in PopART, a LoopOp over a wrapper graph whose one op is a CallOp of the
user's graph: loop input 0 is the trip count, 1 the condition, 2 + k feeds wrapper input 2 + k,
which the CallOp passes to user graph input k; loop output k is the wrapper's output k + 1 (its
output 0 is the condition). The popxl IR holds only the repeat op and the user's graph, so the
wrapper graph, its CallOp and its tensors are views made here (`LoopWrapper`): edits through them
(a new loop input routed to a new user graph input, a new carried output) land on the repeat op.
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Dict, List, Optional, Tuple

from .graph import Graph
from .values import GraphId
from .views import Op, Tensor, edits, graph_view, tensor_view

if TYPE_CHECKING:
    from popxl.tensor import Tensor as XTensor

__all__ = ["CallOp", "LoopOp", "IfOp", "IpuCopyOp", "InitOp", "HostLoadOp", "HostStoreOp", "RemoteLoadOp",
           "RemoteStoreOp", "MatMulOp", "op_class_for"]


class _Subgraph(Op):
    def getCalledGraph(self) -> Graph:  # noqa: N802
        return self.getCalledGraphs()[0]


class CallOp(_Subgraph, Op):
    def _ours_in(self, index: int) -> Optional[int]:
        return self._op.attrs["input_map"].get(int(index))

    def _view_in(self, ours: int) -> int:
        for gi, oi in self._op.attrs["input_map"].items():
            if oi == ours:
                return gi
        return ours

    def _new_input_slot(self, index: int) -> int:
        graph = self._op.attrs["graph"]
        if not 0 <= index < len(graph._inputs):
            raise IndexError(f"{self.debugName()}: the called graph {graph.id!r} has no input {index}")
        slot = len(self._op.inputs)
        self._op.attrs["input_map"][int(index)] = slot
        if graph._inputs[index] in graph._by_ref_inputs:
            self._op.attrs["by_ref"] = tuple(sorted(set(self._op.attrs.get("by_ref", ())) | {int(index)}))
            self._op.modified = tuple(sorted(set(self._op.modified) | {slot}))
            self._op.inplace = True
        return slot

    def opInToSubgraphInIndex(self, index: int) -> int:  # noqa: N802
        return int(index)

    def subgraphInToOpInIndex(self, index: int) -> int:  # noqa: N802
        return int(index)

    def opOutToSubgraphOutIndex(self, index: int) -> int:  # noqa: N802
        return int(index)

    def subgraphOutToOpOutIndex(self, index: int) -> int:  # noqa: N802
        return int(index)

    def _out_spec(self, index: int):
        t = self._op.attrs["graph"]._outputs[index]
        return t.shape, t.dtype, t.meta_shape

    def getInputIndexMap(self):  # noqa: N802
        return {gi: tensor_view(self._op.inputs[oi]) for gi, oi in sorted(self._op.attrs["input_map"].items())
                if oi < len(self._op.inputs) and self._op.inputs[oi] is not None}


class LoopOp(_Subgraph, Op):
    """PopXL's repeat as PopART's LoopOp (see the module doc)."""

    def __init__(self, op):
        super().__init__(op)
        self._wrapper = LoopWrapper(self)

    @property
    def _graph(self):
        return self._op.attrs["graph"]

    def _ours_in(self, index: int) -> Optional[int]:
        k = int(index) - 2
        if 0 <= k < len(self._graph._inputs):
            return self._op.attrs["input_map"].get(k)
        return self._wrapper._pending_slot(int(index))

    def _view_in(self, ours: int) -> int:
        for gi, oi in self._op.attrs["input_map"].items():
            if oi == ours:
                return gi + 2
        return self._wrapper._pending_view_index(ours)

    def getInputIndexMap(self):  # noqa: N802
        out = {}
        for gi, oi in sorted(self._op.attrs["input_map"].items()):
            if oi < len(self._op.inputs) and self._op.inputs[oi] is not None:
                out[gi + 2] = tensor_view(self._op.inputs[oi])
        for vi, t in self._wrapper._pending.items():
            out[vi] = tensor_view(t)
        return out

    def hasInput(self, index: int) -> bool:  # noqa: N802
        return int(index) in self.getInputIndexMap()

    def inTensor(self, index: int) -> Tensor:  # noqa: N802
        try:
            return self.getInputIndexMap()[int(index)]
        except KeyError:
            raise IndexError(f"{self.debugName()} has no input at index {index}") from None

    def hasInputTensor(self, t) -> bool:  # noqa: N802
        return any(v == t for v in self.getInputIndexMap().values())

    def inIndex(self, t) -> int:  # noqa: N802
        for k, v in self.getInputIndexMap().items():
            if v == t:
                return k
        raise ValueError(f"{t} is not an input of {self.debugName()}")

    @edits
    def addModified(self, index: int, regions) -> None:  # noqa: N802
        from .values import any_modified
        vi = int(index)
        if vi in self._wrapper._pending:
            if any_modified(regions):
                self._wrapper._modified_proxies.add(id(self._wrapper._proxies[("pending", vi)]))
            return
        super().addModified(index, regions)

    def getCalledGraphs(self) -> List[Graph]:  # noqa: N802
        return [self._wrapper]

    def getTripCountValue(self) -> int:  # noqa: N802
        return int(self._op.attrs["repeat_count"])

    @edits
    def setTripCountValue(self, n: int) -> None:  # noqa: N802
        self._op.attrs["repeat_count"] = int(n)

    def getNumExplicitInputs(self) -> int:  # noqa: N802
        return 2 + int(self._op.attrs.get("num_carried", len(self._graph._outputs)))

    def getNumImplicitInputs(self) -> int:  # noqa: N802
        return len(self.getInputIndexMap()) - (self.getNumExplicitInputs() - 2)

    def opInToSubgraphInIndex(self, index: int) -> int:  # noqa: N802
        return int(index)

    def subgraphInToOpInIndex(self, index: int) -> int:  # noqa: N802
        return int(index)

    def opOutToSubgraphOutIndex(self, index: int) -> int:  # noqa: N802
        return int(index) + 1

    def subgraphOutToOpOutIndex(self, index: int) -> int:  # noqa: N802
        return int(index) - 1

    @edits
    def addLoopInput(self, index: int, tensorId: str, subgraphTensorId: str, overwrite: bool = False) -> None:  # noqa: N802,N803
        """A new implicit (not carried) loop input: parent tensor `tensorId`, wrapper tensor
        `subgraphTensorId`. It reaches the user graph when the wrapper's CallOp connects it."""
        if int(index) < self.getNumExplicitInputs():
            raise NotImplementedError("addLoopInput: a new loop-carried input needs a matching output; the "
                                      "simulator adds implicit loop inputs only (index >= getNumExplicitInputs())")
        parent = self._tensor_by_id(tensorId)
        self._wrapper._add_pending(parent, subgraphTensorId)

    @edits
    def addLoopOutput(self, index: int, tensorId: str, subgraphTensorId: str, overwrite: bool = True) -> None:  # noqa: N802,N803
        """Loop output `index` takes the value of wrapper tensor `subgraphTensorId` (a CallOp
        output, i.e. a user graph output) each iteration."""
        g = self._graph
        src = self._wrapper._call._user_output_of(subgraphTensorId)
        k = int(index)
        carried = int(self._op.attrs.get("num_carried", len(self._op.outputs)))
        if not (overwrite and 0 <= k < carried):
            raise NotImplementedError("addLoopOutput: the simulator replaces existing loop outputs (overwrite=True) "
                                      "only; a new loop-carried value needs a new loop input too")
        j = next(i for i, t in enumerate(g._outputs) if t is src)
        g._set_output(k, src)
        if j >= carried:  # the extra output the wrapper's call op needed: the loop carries it now
            g._remove_output(j)
            self._wrapper._call._forget_output(j)

    def getCalledGraphIds(self) -> List[GraphId]:  # noqa: N802
        return [self._wrapper.id]


class LoopWrapper(Graph):
    """The wrapper graph of a LoopOp (a view: the popxl IR has no such graph)."""

    def __init__(self, loop: LoopOp):
        from popxl.graph import Graph as XGraph
        self._loop = loop
        user = loop._graph
        # a popxl Graph object for `popxl.Graph._from_pb` (tensor ids, proxies); never lowered
        self._g = XGraph._create(user.ir, f"{user.id}__loop_wrapper")
        self._g._set_pb_view(self)
        self._modified_proxies: set = set()  # ids of pending wrapper inputs marked modified
        self._pending: Dict[int, XTensor] = {}  # loop input index -> parent tensor, not yet in the user graph
        self._proxies: Dict[Tuple[str, int], XTensor] = {}  # key -> wrapper tensor (a popxl Tensor of self._g)
        self._parent_of_proxy: Dict[int, XTensor] = {}
        self._call = WrapperCallOp(self)

    @property
    def id(self) -> GraphId:
        return GraphId(self._g.id)

    def _proxy(self, key, name: str, like, tensor_id: Optional[str] = None):
        from popxl.tensor import Tensor as XTensor
        p = self._proxies.get(key)
        if p is None:
            tid = tensor_id or self._g.ir._unique_tensor_id(f"{self._g.id}/{name}")
            p = XTensor._create(self._g, tid, like.shape, like.dtype, like.meta_shape)
            self._proxies[key] = p
        return p

    # wrapper inputs: 0 iteration, 1 condition, 2 + k <-> user input k, then pending ones
    def _input_proxies(self) -> Dict[int, XTensor]:
        user = self._loop._graph
        out = {}
        for k, u in enumerate(user._inputs):
            p = self._proxy(("in", id(u)), u.name, u)
            out[k + 2] = p
            oi = self._loop._op.attrs["input_map"].get(k)
            if oi is not None:
                self._parent_of_proxy[id(p)] = self._loop._op.inputs[oi]
        for vi in self._pending:
            out[vi] = self._proxies[("pending", vi)]
        return out

    def _add_pending(self, parent, wrapper_tensor_id: str) -> None:
        vi = 2 + len(self._loop._graph._inputs) + len(self._pending)
        while vi in self._pending:
            vi += 1
        self._pending[vi] = parent
        p = self._proxy(("pending", vi), parent.name, parent, tensor_id=wrapper_tensor_id)
        self._parent_of_proxy[id(p)] = parent

    def _pending_slot(self, vi: int) -> Optional[int]:
        return None

    def _pending_view_index(self, ours: int) -> int:
        return ours + 2

    def _connect_user_input(self, k: int, proxy: "XTensor") -> None:
        """The wrapper's CallOp feeds user input k from wrapper tensor `proxy`: the repeat op
        feeds it from the parent tensor behind the proxy."""
        op = self._loop._op
        parent = self._parent_of_proxy.get(id(proxy))
        if parent is None:
            raise RuntimeError(f"{proxy.id} is not a loop input of {self._loop.debugName()}")
        for vi, t in list(self._pending.items()):
            if t is parent and self._proxies.get(("pending", vi)) is proxy:
                del self._pending[vi]
                self._proxies[("in", id(self._loop._graph._inputs[k]))] = proxy
        slot = len(op.inputs)
        op.attrs["input_map"][int(k)] = slot
        Op._set_input(self._loop, slot, parent)
        user = self._loop._graph
        if user._inputs[k] in user._by_ref_inputs:
            op.attrs["by_ref"] = tuple(sorted(set(op.attrs.get("by_ref", ())) | {int(k)}))
            op.modified = tuple(sorted(set(op.modified) | {slot}))
            op.inplace = True
        if id(proxy) in self._modified_proxies:
            op.modified = tuple(sorted(set(op.modified) | {slot}))
            op.inplace = True

    # the Graph view interface
    def getOps(self) -> List[Op]:  # noqa: N802
        return [self._call]

    def getOpSchedule(self, requireOptimalSchedule: bool = False) -> List[Op]:  # noqa: N802,N803
        return [self._call]

    def getCalledGraphs(self) -> List[Graph]:  # noqa: N802
        return [graph_view(self._loop._graph)]

    def getInputIds(self) -> List[str]:  # noqa: N802
        return [p.id for _, p in sorted(self._input_proxies().items())]

    def getInputTensor(self, index: int) -> Tensor:  # noqa: N802
        return tensor_view(self._input_proxies()[int(index)])

    def getInputId(self, index: int) -> str:  # noqa: N802
        return self.getInputTensor(index).id

    def getInputIndex(self, tensorId: str) -> int:  # noqa: N802,N803
        for vi, p in self._input_proxies().items():
            if p.id == tensorId:
                return vi
        raise ValueError(f"{tensorId!r} is not an input of {self._g.id!r}")

    def getOutputIds(self) -> List[str]:  # noqa: N802
        return [self._call.outId(j) for j in range(len(self._loop._graph._outputs))]

    def getTensor(self, tensorId: str) -> Tensor:  # noqa: N802,N803
        return tensor_view(self._g.get_tensor(tensorId))

    @edits
    def eraseOp(self, opid: int) -> None:  # noqa: N802
        raise NotImplementedError("The wrapper graph of a repeat holds one call op, which can't be erased")

    def __eq__(self, other) -> bool:
        return other is self

    def __hash__(self) -> int:
        return id(self)


class WrapperCallOp(CallOp):
    """The CallOp of a LoopOp's wrapper graph (a view)."""

    def __init__(self, wrapper: LoopWrapper):
        self._w = wrapper
        self._op = wrapper._loop._op  # for ipu / names / settings: the repeat op's
        self._outs: Dict[int, "XTensor"] = {}

    @property
    def id(self) -> int:
        return -1 - self._op.id

    def opType(self) -> str:  # noqa: N802
        return "Call"

    def getGraph(self) -> Graph:  # noqa: N802
        return self._w

    def getCalledGraphs(self) -> List[Graph]:  # noqa: N802
        return [graph_view(self._w._loop._graph)]

    def getInputIndexMap(self):  # noqa: N802
        proxies = self._w._input_proxies()
        return {vi - 2: tensor_view(p) for vi, p in proxies.items()
                if vi - 2 < len(self._w._loop._graph._inputs) and vi - 2 in self._w._loop._op.attrs["input_map"]}

    def hasInput(self, index: int) -> bool:  # noqa: N802
        return int(index) in self.getInputIndexMap()

    def inTensor(self, index: int) -> Tensor:  # noqa: N802
        return self.getInputIndexMap()[int(index)]

    def hasInputTensor(self, t) -> bool:  # noqa: N802
        return any(v == t for v in self.getInputIndexMap().values())

    def inIndex(self, t) -> int:  # noqa: N802
        for k, v in self.getInputIndexMap().items():
            if v == t:
                return k
        raise ValueError(f"{t} is not an input of the wrapper call")

    @edits
    def connectInTensor(self, index: int, tensorId: str, *args) -> None:  # noqa: N802,N803
        proxy = self._w._g.get_tensor(tensorId)
        self._w._connect_user_input(int(index), proxy)

    @edits
    def addModified(self, index: int, regions) -> None:  # noqa: N802
        from .values import any_modified
        if not any_modified(regions):
            return
        op = self._w._loop._op
        oi = op.attrs["input_map"].get(int(index))
        if oi is not None:
            op.modified = tuple(sorted(set(op.modified) | {oi}))
            op.inplace = True

    def getOutputIndexMap(self):  # noqa: N802
        return {j: tensor_view(self._out_proxy(j)) for j in range(len(self._w._loop._graph._outputs))}

    def _out_proxy(self, j: int, tensor_id: Optional[str] = None):
        u = self._w._loop._graph._outputs[j]
        p = self._outs.get(id(u))
        if p is None:
            p = self._w._proxy(("out", id(u)), u.name, u, tensor_id=tensor_id)
            self._outs[id(u)] = p
        return p

    def _user_output_of(self, tensor_id: str):
        for key, p in self._outs.items():
            if p.id == tensor_id:
                for u in self._w._loop._graph._outputs:
                    if id(u) == key:
                        return u
        raise KeyError(f"{tensor_id!r} is not an output of the wrapper's call op")

    def _forget_output(self, j: int) -> None:
        pass

    def hasOutput(self, index: int) -> bool:  # noqa: N802
        return 0 <= index < len(self._w._loop._graph._outputs)

    def outTensor(self, index: int) -> Tensor:  # noqa: N802
        return tensor_view(self._out_proxy(index))

    @edits
    def createAndConnectOutTensor(self, index: int, tensorId: str) -> None:  # noqa: N802,N803
        if not self.hasOutput(index):
            raise IndexError(f"the repeated graph has no output {index}")
        tid = tensorId if tensorId not in self._w._g.ir._tensor_ids else None
        self._out_proxy(index, tid)

    def setup(self) -> None:
        pass

    def cloneIntoGraph(self, graph):  # noqa: N802
        raise NotImplementedError("The call op of a repeat's wrapper graph can't be cloned")


class IfOp(_Subgraph, Op):
    pass


class IpuCopyOp(Op):
    def getSourceIpu(self, tensorId: Optional[str] = None) -> int:  # noqa: N802,N803
        return int(self._op.attrs["source"])

    def getDestIpu(self) -> int:  # noqa: N802
        return int(self._op.attrs["destination"])

    @edits
    def connectInTensor(self, index: int, tensorId: str, sourceIpu: Optional[int] = None) -> None:  # noqa: N802,N803
        super().connectInTensor(index, tensorId)
        if sourceIpu is not None:
            self._op.attrs["source"] = int(sourceIpu)
            self._op.ipu = int(sourceIpu)


class InitOp(Op):
    pass


class HostLoadOp(Op):
    def getHostStreamTensorId(self) -> str:  # noqa: N802
        return self._op.attrs["stream"].tensor_id


class HostStoreOp(Op):
    def getHostStreamTensorId(self) -> str:  # noqa: N802
        return self._op.attrs["stream"].tensor_id


class RemoteLoadOp(Op):
    pass


class RemoteStoreOp(Op):
    pass


class _AvailableMemory(Op):
    """Ops with an available-memory proportion (matmul, gather, scatter, topk, ...): recorded in
    the op's attributes."""

    @edits
    def setAvailableMemoryProportion(self, value) -> None:  # noqa: N802
        """Recorded in the op's attributes (the matmul planner plans for tile memory as a whole)."""
        self._op.attrs["available_memory_proportion"] = None if value is None else float(value)

    def getAvailableMemoryProportion(self):  # noqa: N802
        return self._op.attrs.get("available_memory_proportion")


class MatMulOp(_AvailableMemory, Op):
    @edits
    def setUseFullyConnectedPass(self, use: bool) -> None:  # noqa: N802
        """Recorded (popxl-addons 3.4's disable_fc_pass): PopART then stops preparing transposed
        weights for the backward pass; the simulated matmul planner lays out each product itself."""
        self._op.attrs["use_fully_connected_pass"] = bool(use)

    def useFullyConnectedPass(self) -> bool:  # noqa: N802
        return bool(self._op.attrs.get("use_fully_connected_pass", True))


class AvailableMemoryOp(_AvailableMemory, Op):
    pass


def op_class_for(op_type: str) -> type:
    """The `_ir.op` class of an out-of-place popxl op of type `op_type` (op_classes.py)."""
    from .op_classes import class_named, names_of
    return class_named(names_of(op_type, False)[1], op_type)
