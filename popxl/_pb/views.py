"""Views of the popxl IR with the interface of PopART's `_internal.ir` bindings.

One view object per popxl object (cached on it), so views compare, hash and key dicts like the
C++ objects they stand for. Every read goes to the popxl record; every edit changes it, so what
a script edits through a view is what the lowering lowers. Index conventions follow PopART:
an op's input / output indices are its own (for call ops, the called graph's input index; for
loop ops, see ops.py), graph input / output indices are the graph's.
"""
from __future__ import annotations

import builtins  # the classes below have PopART's method `str`, which hides the type in their bodies
import functools

from typing import TYPE_CHECKING, Dict, Iterable, List, Optional

from popxl.context import ExecutionContext

from .values import GraphId, OpSettings, Region, TensorInfo, any_modified

if TYPE_CHECKING:
    from popxl.graph import Graph as XGraph
    from .graph import Graph, Ir

__all__ = ["Tensor", "Op", "graph_view", "ir_view", "op_view", "tensor_view", "unwrap_op", "unwrap_tensor"]



def _owning_ir(view):
    """The popxl Ir a view belongs to."""
    for attr, get in (("_op", lambda o: o.graph.ir), ("_g", lambda g: g.ir), ("_t", lambda t: t.graph.ir),
                      ("_ir", lambda ir: ir)):
        obj = getattr(view, attr, None)
        if obj is not None:
            return get(obj)
    raise TypeError(f"{type(view).__name__} is not a view of the IR")


def edits(method):
    """Marks a view method that changes the IR. Once a popxl.Session has compiled the Ir it owns it
    (PopXL's rule), so the edit is refused before anything changes: the session would go on
    running the program it compiled."""
    @functools.wraps(method)
    def checked(self, *args, **kwargs):
        _owning_ir(self)._check_not_prepared(f"its graphs ({type(self).__name__}.{method.__name__})")
        return method(self, *args, **kwargs)
    return checked

def ir_view(ir) -> "Ir":
    return ir._pb_ir


def graph_view(g) -> "Graph":
    return g._pb_graph


def tensor_view(t) -> "Tensor":
    return t._pb_tensor


def op_view(op) -> "Op":
    return op._pb_op


def unwrap_op(op):
    """The popxl Op behind an `_ir.Op` view (or the popxl Op itself)."""
    return getattr(op, "_op", op)


def unwrap_tensor(t):
    return getattr(t, "_t", t)


# -- tensors ------------------------------------------------------------------------------------
class _Consumers:
    def __init__(self, t):
        self._t = t

    def getOps(self) -> List["Op"]:  # noqa: N802
        return [op_view(o) for o in self._t.consumers]

    def getTotal(self) -> int:  # noqa: N802
        return len(self._t.consumers)

    def n(self, op) -> int:
        op = unwrap_op(op)
        return sum(1 for x in op.inputs if x is self._t)


class Tensor:
    """`_ir.Tensor`: a view of a popxl tensor."""

    def __init__(self, t):
        self._t = t

    @property
    def id(self) -> str:
        return self._t.id

    @property
    def info(self) -> TensorInfo:
        return TensorInfo(self._t.dtype, self._t.shape, self._t.meta_shape)

    @property
    def consumers(self) -> _Consumers:
        return _Consumers(self._t)

    def hasProducer(self) -> bool:  # noqa: N802
        return self._t._producer is not None

    def getProducer(self) -> "Op":  # noqa: N802
        if self._t._producer is None:
            raise RuntimeError(f"Tensor {self._t.id} has no producer")
        return op_view(self._t._producer)

    def getProducerUnsafe(self) -> Optional["Op"]:  # noqa: N802
        return op_view(self._t._producer) if self._t._producer is not None else None

    def getGraph(self) -> "Graph":  # noqa: N802
        return graph_view(self._t.graph)

    def getIr(self) -> "Ir":  # noqa: N802
        return ir_view(self._t.graph.ir)

    def isGraphInput(self) -> bool:  # noqa: N802
        return any(x is self._t for x in self._t.graph._inputs)

    def isGraphOutput(self) -> bool:  # noqa: N802
        return any(x is self._t for x in self._t.graph._outputs)

    def getGraphInputIndex(self) -> int:  # noqa: N802
        return graph_view(self._t.graph).getInputIndex(self._t.id)

    def getGraphOutputIndex(self) -> int:  # noqa: N802
        return graph_view(self._t.graph).getOutputIndex(self._t.id)

    def tensorType(self) -> str:  # noqa: N802
        from popxl.tensor import Constant, Variable
        if isinstance(self._t, Variable):
            return "Variable"
        if isinstance(self._t, Constant):
            return "Const"
        return "ActGrad"

    def isModified(self) -> bool:  # noqa: N802
        return any(i in o.modified for o in self._t.consumers for i, x in enumerate(o.inputs) if x is self._t)

    def modifiedRegionsByOps(self, ops: Iterable["Op"], aliasModel=None) -> List[Region]:  # noqa: N802,N803
        """The regions of this tensor that `ops` change: the whole tensor when one of them modifies
        it (directly, or through a view that aliases it), else an empty region."""
        wanted = {id(unwrap_op(o)) for o in ops}
        if _modified_through(self._t, wanted, set()):
            return [Region.getFull(self._t.shape)]
        return [Region.getEmpty(len(self._t.shape))]

    def __eq__(self, other) -> bool:
        return isinstance(other, Tensor) and other._t is self._t

    def __hash__(self) -> int:
        return id(self._t)

    def __repr__(self) -> str:
        return f"_ir.Tensor({self._t.id!r})"


def _drop_consumer(t, op) -> None:
    while any(c is op for c in t.consumers):
        t._remove_consumer(op)


def _modified_through(t, op_ids, seen) -> bool:
    """Does one of the ops `op_ids` change `t`, directly or through an output aliasing it?"""
    if id(t) in seen:
        return False
    seen.add(id(t))
    for op in t._consumers:
        for i, x in enumerate(op.inputs):
            if x is not t:
                continue
            if id(op) in op_ids and i in op.modified:
                return True
            for out_i, in_i in op.aliases.items():
                if in_i == i and out_i < len(op.outputs) and _modified_through(op.outputs[out_i], op_ids, seen):
                    return True
    return False


# -- ops ----------------------------------------------------------------------------------------
def pb_op_type(op) -> str:
    """PopART's op type of popxl op `op` ("Add", "AddLhsInplace", ...: op_classes.py's table)."""
    if op.attrs.get("_custom_op_type"):
        return op.attrs["_custom_op_type"]
    from .op_classes import names_of
    return names_of(op.type, bool(op.inplace))[0]


class Op:
    """`_ir.Op`: a view of a popxl op. Subclasses for the op classes scripts test with isinstance
    (CallOp, LoopOp, IpuCopyOp, InitOp, HostLoadOp, HostStoreOp, ...) live in ops.py."""

    def __init__(self, op):
        self._op = op
        self._pending_specs: dict = {}  # output index -> (shape, dtype, meta) of a cloned op's outputs

    # -- identity -------------------------------------------------------------------------------
    @property
    def id(self) -> int:
        return self._op.id

    @property
    def opid(self) -> str:
        return self.opType()

    def opType(self) -> str:  # noqa: N802
        return pb_op_type(self._op)

    def name(self) -> str:
        return self._op.name

    getName = name  # noqa: N815

    def debugName(self) -> str:  # noqa: N802
        return f"{self.opType()}({self._op.name})"

    def str(self) -> str:  # noqa: A003
        return f"{self._op.id} ({self.opType()})"

    @property
    def settings(self) -> OpSettings:
        op = self._op
        return OpSettings(op.graph, op.name, op.scope, op.ipu, op.tile_set, op.execution_context, op.debug_context)

    def getSettings(self) -> OpSettings:  # noqa: N802
        return self.settings

    def getGraph(self) -> "Graph":  # noqa: N802
        return graph_view(self._op.graph)

    def getIr(self) -> "Ir":  # noqa: N802
        return ir_view(self._op.graph.ir)

    def getVirtualGraphId(self) -> int:  # noqa: N802
        return 0 if self._op.ipu is None else int(self._op.ipu)

    def hasVirtualGraphId(self) -> bool:  # noqa: N802
        return self._op.ipu is not None

    @edits
    def setVirtualGraphId(self, ipu: Optional[int]) -> None:  # noqa: N802
        self._op.ipu = ipu

    def getExecutionContext(self) -> ExecutionContext:  # noqa: N802
        return self._op.execution_context

    def isInplaceViewChange(self) -> bool:  # noqa: N802
        return bool(self._op.aliases) and not self._op.modified

    def modifies(self, index: int) -> bool:
        return self._ours_in(index) in self._op.modified

    def getCalledGraphs(self) -> List["Graph"]:  # noqa: N802
        return [graph_view(g) for g in self._op.called_graphs]

    def getCalledGraphIds(self) -> List[GraphId]:  # noqa: N802
        return [g.id for g in self.getCalledGraphs()]

    # -- index translation (identity here; call / loop ops override) ----------------------------
    def _ours_in(self, index: int) -> Optional[int]:
        """Our input position of PopART input index `index` (None: the op has no such input yet)."""
        return int(index)

    def _view_in(self, ours: int) -> int:
        return ours

    # -- inputs ---------------------------------------------------------------------------------
    def getInputIndexMap(self) -> Dict[int, Tensor]:  # noqa: N802
        return {self._view_in(i): tensor_view(t) for i, t in enumerate(self._op.inputs) if t is not None}

    def getOutputIndexMap(self) -> Dict[int, Tensor]:  # noqa: N802
        return {i: tensor_view(t) for i, t in enumerate(self._op.outputs) if t is not None}

    def getInputTensors(self) -> List[Tensor]:  # noqa: N802
        return [v for _, v in sorted(self.getInputIndexMap().items())]

    def getOutputTensors(self) -> List[Tensor]:  # noqa: N802
        return [v for _, v in sorted(self.getOutputIndexMap().items())]

    def hasInput(self, index: int) -> bool:  # noqa: N802
        i = self._ours_in(index)
        return i is not None and 0 <= i < len(self._op.inputs) and self._op.inputs[i] is not None

    def hasOutput(self, index: int) -> bool:  # noqa: N802
        return 0 <= index < len(self._op.outputs) and self._op.outputs[index] is not None

    def inTensor(self, index: int) -> Tensor:  # noqa: N802
        if not self.hasInput(index):
            raise IndexError(f"{self.debugName()} has no input at index {index}")
        i = self._ours_in(index)
        assert i is not None  # hasInput checked it
        return tensor_view(self._op.inputs[i])

    def outTensor(self, index: int) -> Tensor:  # noqa: N802
        if not self.hasOutput(index):
            raise IndexError(f"{self.debugName()} has no output at index {index}")
        return tensor_view(self._op.outputs[index])

    def inId(self, index: int) -> builtins.str:  # noqa: N802
        return self.inTensor(index).id

    def outId(self, index: int) -> builtins.str:  # noqa: N802
        return self.outTensor(index).id

    def inTensorCount(self) -> int:  # noqa: N802
        return sum(1 for t in self._op.inputs if t is not None)

    def outTensorCount(self) -> int:  # noqa: N802
        return sum(1 for t in self._op.outputs if t is not None)

    def hasInputTensor(self, t: Tensor) -> bool:  # noqa: N802
        t = unwrap_tensor(t)
        return any(x is t for x in self._op.inputs)

    def hasOutputTensor(self, t: Tensor) -> bool:  # noqa: N802
        t = unwrap_tensor(t)
        return any(x is t for x in self._op.outputs)

    def inIndex(self, t: Tensor) -> int:  # noqa: N802
        t = unwrap_tensor(t)
        for i, x in enumerate(self._op.inputs):
            if x is t:
                return self._view_in(i)
        raise ValueError(f"{t.id} is not an input of {self.debugName()}")

    def outIndex(self, t: Tensor) -> int:  # noqa: N802
        t = unwrap_tensor(t)
        for i, x in enumerate(self._op.outputs):
            if x is t:
                return i
        raise ValueError(f"{t.id} is not an output of {self.debugName()}")

    # -- edits ----------------------------------------------------------------------------------
    def _tensor_by_id(self, tensor_id: builtins.str):
        for t in self._op.graph._tensors.values():
            if t.id == tensor_id:
                return t
        raise KeyError(f"No tensor {tensor_id!r} in graph {self._op.graph.id!r} (connecting {self.debugName()})")

    @edits
    def connectInTensor(self, index: int, tensorId: builtins.str, *args) -> None:  # noqa: N802,N803
        """Connect tensor `tensorId` of the op's graph as input `index`."""
        t = self._tensor_by_id(tensorId)
        i = self._ours_in(index)
        if i is None:
            i = self._new_input_slot(index)
        self._set_input(i, t)

    def _new_input_slot(self, index: int) -> int:
        raise IndexError(f"{self.debugName()} has no input index {index}")

    def _set_input(self, i: int, t) -> None:
        op = self._op
        ins = list(op.inputs)
        while len(ins) <= i:
            ins.append(None)
        if ins[i] is not None:
            raise RuntimeError(f"{self.debugName()} already has input {self._view_in(i)} ({ins[i].id}); "
                               "disconnect it first")
        ins[i] = t
        op.inputs = tuple(ins)
        if not any(c is op for c in t.consumers):
            t._add_consumer(op)

    @edits
    def disconnectInTensor(self, index_or_tensor) -> None:  # noqa: N802
        op = self._op
        if isinstance(index_or_tensor, int):
            idxs = [self._ours_in(index_or_tensor)]
        else:
            t = unwrap_tensor(index_or_tensor)
            idxs = [i for i, x in enumerate(op.inputs) if x is t]
        ins = list(op.inputs)
        for i in idxs:
            if i is None or i >= len(ins) or ins[i] is None:
                continue
            t = ins[i]
            ins[i] = None
            if not any(x is t for x in ins):
                _drop_consumer(t, op)
        op.inputs = tuple(ins)
        self._compact_inputs()

    def _compact_inputs(self) -> None:
        """Drop trailing empty input slots (holes in the middle stay until connected)."""
        ins = list(self._op.inputs)
        while ins and ins[-1] is None:
            ins.pop()
        self._op.inputs = tuple(ins)

    @edits
    def disconnectAllInputs(self) -> None:  # noqa: N802
        op = self._op
        for t in set(op.inputs) - {None}:
            _drop_consumer(t, op)
        op.inputs = ()

    @edits
    def disconnectAllOutputs(self) -> None:  # noqa: N802
        for t in self._op.outputs:
            if t is not None and t.producer is self._op:
                t._set_producer(None)
        self._op.outputs = ()

    @edits
    def disconnectOutTensor(self, t) -> None:  # noqa: N802
        t = unwrap_tensor(t)
        outs = list(self._op.outputs)
        for i, x in enumerate(outs):
            if x is t:
                outs[i] = None
                t._set_producer(None)
        while outs and outs[-1] is None:
            outs.pop()
        self._op.outputs = tuple(outs)

    def _out_spec(self, index: int):
        """(shape, dtype, meta_shape) of output `index` before it exists: what the op was cloned
        from, or what its own inference says (custom ops)."""
        if index in self._pending_specs:
            return self._pending_specs[index]
        raise RuntimeError(f"{self.debugName()}: cannot infer the shape of output {index}; "
                           "create the op with its outputs (or clone it from an op that has them)")

    @edits
    def createAndConnectOutTensor(self, index: int, tensorId: builtins.str) -> None:  # noqa: N802,N803
        """Create tensor `tensorId` in the op's graph as output `index` (shape and type from the op)."""
        from popxl.tensor import Tensor as XTensor
        op = self._op
        g = op.graph
        shape, dtype, meta = self._out_spec(index)
        tid = tensorId if tensorId not in g.ir._tensor_ids else g.ir._unique_tensor_id(g._scope_prefix + tensorId)
        t = XTensor._create(g, tid, shape, dtype, meta, producer=op, ipu=op.ipu, tile_set=op.tile_set)
        self.connectOutTensor(index, t)

    @edits
    def connectOutTensor(self, index: int, t) -> None:  # noqa: N802
        op = self._op
        t = unwrap_tensor(t)
        if isinstance(t, str):
            t = self._tensor_by_id(t)
        outs = list(op.outputs)
        while len(outs) <= index:
            outs.append(None)
        if outs[index] is not None:
            raise RuntimeError(f"{self.debugName()} already has output {index} ({outs[index].id})")
        outs[index] = t
        t._set_producer(op)
        op.outputs = tuple(outs)

    def cloneIntoGraph(self, graph: "Graph | XGraph") -> "Op":  # noqa: N802
        """A copy of this op (type, attributes, placement, names) in `graph` (a view or a popxl
        Graph), with no inputs or outputs: connect them, then `setup()`. Its id is new, after every
        op of the Ir."""
        from popxl.graph import Graph as XGraph
        from popxl.op import Op as XOp
        src = self._op
        g = graph if isinstance(graph, XGraph) else graph._g
        attrs = dict(src.attrs)
        if "input_map" in attrs:
            attrs["input_map"] = dict(attrs["input_map"])
        # the clone's input slots are holes until connectInTensor fills them (PopART's edit order);
        # the op record's type states the connected form
        holes: tuple = (None,) * len(src.inputs)
        new = XOp(id=g.ir._next_op_id(), type=src.type, graph=g, inputs=holes, outputs=(),
                  attrs=attrs, name=src.name, scope=src.scope, ipu=src.ipu, tile_set=src.tile_set,
                  inplace=src.inplace, modified=tuple(src.modified), aliases=dict(src.aliases),
                  called_graphs=tuple(src.called_graphs), after=(), execution_context=src.execution_context,
                  debug_context=src.debug_context)
        g._add_op(new)
        view = op_view(new)
        view._set_pending_specs({i: (t.shape, t.dtype, t.meta_shape) for i, t in enumerate(src.outputs)
                                 if t is not None})
        return view

    def _set_pending_specs(self, specs: dict) -> None:
        self._pending_specs = dict(specs)

    def setup(self) -> None:
        """Check the op is fully connected and keep the graph's schedule valid (an input produced
        after the op moves the op after its producer)."""
        op = self._op
        missing = [self._view_in(i) for i, t in enumerate(op.inputs) if t is None]
        if missing:
            raise RuntimeError(f"{self.debugName()}: inputs {missing} are not connected")
        if any(t is None for t in op.outputs):
            raise RuntimeError(f"{self.debugName()}: some outputs are not connected")
        for t in op.inputs:
            if t.graph is not op.graph:
                raise RuntimeError(f"{self.debugName()}: input {t.id} is in graph {t.graph.id!r}, the op in "
                                   f"{op.graph.id!r}")
        if any(t._producer is not None and t._producer.id > op.id for t in op.inputs):
            from .schedule import restore_schedule
            restore_schedule(op.graph)

    @edits
    def addModified(self, index: int, regions) -> None:  # noqa: N802
        """Mark input `index` modified by the op when `regions` are not empty."""
        if any_modified(regions):
            i = self._ours_in(index)
            if i is None:
                raise IndexError(f"{self.debugName()} has no input index {index}: connect it before addModified")
            self._op.modified = tuple(sorted(set(self._op.modified) | {i}))
            self._op.inplace = True

    @edits
    def removeModified(self, index: int) -> None:  # noqa: N802
        i = self._ours_in(index)
        self._op.modified = tuple(m for m in self._op.modified if m != i)

    def __repr__(self) -> builtins.str:
        return f"_ir.{type(self).__name__}({self._op.id}, {self.opType()}, {self._op.name!r})"
