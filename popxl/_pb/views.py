"""Views of the popxl IR with the interface of PopART's `_internal.ir` bindings.

One view object per popxl object (cached on it), so views compare, hash and key dicts like the
C++ objects they stand for. Every read goes to the popxl record; every edit changes it, so what
a script edits through a view is what the lowering lowers. Index conventions follow PopART:
an op's input / output indices are its own (for call ops, the called graph's input index; for
loop ops, see ops.py), graph input / output indices are the graph's.
"""
from __future__ import annotations

from enum import Enum
from typing import Dict, Iterable, List, Optional, Sequence

from popxl.context import ExecutionContext

__all__ = ["GraphId", "TensorInfo", "Tensor", "Op", "Graph", "Ir", "Region", "Regions", "TopoCons",
           "ExpectedConnectionType", "ExpectedConnection", "BwdGraphInfo", "OpSettings", "ExecutionContext",
           "graph_view", "ir_view", "op_view", "tensor_view"]

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


# -- small value types -------------------------------------------------------------------------
class GraphId:
    """A graph's id (`_ir.GraphId`): compares equal to another GraphId of the same string."""

    def __init__(self, s: str = ""):
        self._s = str(s)

    def str(self) -> str:  # noqa: A003 - PopART's name
        return self._s

    def __eq__(self, other) -> bool:
        if isinstance(other, GraphId):
            return self._s == other._s
        return isinstance(other, str) and self._s == other

    def __hash__(self) -> int:
        return hash(self._s)

    def __str__(self) -> str:
        return self._s

    def __repr__(self) -> str:
        return f"GraphId({self._s!r})"


_DATA_TYPES = {"float32": "FLOAT", "float16": "FLOAT16", "float64": "DOUBLE", "int8": "INT8", "int16": "INT16",
               "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
               "uint64": "UINT64", "bool": "BOOL", "float8_143": "FLOAT8_143", "float8_152": "FLOAT8_152"}


class TensorInfo:
    """Shape and type of a tensor (`_ir.TensorInfo`)."""

    def __init__(self, dtype, shape, meta_shape=()):
        self._dtype = dtype
        self._shape = tuple(int(s) for s in shape)
        self._meta = tuple(meta_shape or ())

    def shape(self) -> List[int]:
        return list(self._shape)

    def metaShape(self) -> List[int]:  # noqa: N802
        return list(self._meta)

    def rank(self) -> int:
        return len(self._shape)

    def nelms(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    def nbytes(self) -> int:
        return self.nelms() * self._dtype.itemsize

    def dataType(self) -> str:  # noqa: N802
        return _DATA_TYPES.get(self._dtype.name, self._dtype.name.upper())

    def data_type_lcase(self) -> str:
        return self._dtype.name

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorInfo) and (self._dtype, self._shape) == (other._dtype, other._shape)

    def __repr__(self) -> str:
        return f"TensorInfo({self.dataType()}, {list(self._shape)})"


class Region:
    """A box of a tensor (`_ir.view.Region`): lower and upper corner, or empty.

    The simulator's IR records whether an op modifies an input, not which part: a non-empty region
    marks the whole input modified (what PopART does when it cannot prove less)."""

    def __init__(self, lower: Sequence[int], upper: Sequence[int]):
        self._lower = [int(x) for x in lower]
        self._upper = [int(x) for x in upper]
        if len(self._lower) != len(self._upper):
            raise ValueError("Region: lower and upper must have the same rank")

    @staticmethod
    def getFull(shape: Sequence[int]) -> "Region":  # noqa: N802
        return Region([0] * len(shape), list(shape))

    @staticmethod
    def getEmpty(rank: int) -> "Region":  # noqa: N802
        return Region([0] * rank, [0] * rank)

    def isEmpty(self) -> bool:  # noqa: N802
        return any(u <= lo for lo, u in zip(self._lower, self._upper)) if self._lower else False

    def getLower(self) -> List[int]:  # noqa: N802
        return list(self._lower)

    def getUpper(self) -> List[int]:  # noqa: N802
        return list(self._upper)

    def rank(self) -> int:
        return len(self._lower)

    def nelms(self) -> int:
        n = 1
        for lo, u in zip(self._lower, self._upper):
            n *= max(0, u - lo)
        return n

    def __eq__(self, other) -> bool:
        return isinstance(other, Region) and (self._lower, self._upper) == (other._lower, other._upper)

    def __repr__(self) -> str:
        return f"Region(L={self._lower}, U={self._upper})"


Regions = List[Region]


def any_modified(regions) -> bool:
    if isinstance(regions, Region):
        regions = [regions]
    return any(not r.isEmpty() for r in regions)


class ExpectedConnectionType(Enum):
    Fwd = 0
    FwdGrad = 1


class ExpectedConnection:
    """`_ir.ExpectedConnection`: a forward tensor id and how a gradient graph connects to it."""

    def __init__(self, fwdId: str, type: ExpectedConnectionType):  # noqa: N803,A002
        if not isinstance(type, ExpectedConnectionType):
            type = ExpectedConnectionType[getattr(type, "name", str(type))]
        self.fwdId = str(fwdId)
        self.type = type

    def __eq__(self, other) -> bool:
        return isinstance(other, ExpectedConnection) and (self.fwdId, self.type) == (other.fwdId, other.type)

    def __repr__(self) -> str:
        return f"ExpectedConnection({self.fwdId!r}, {self.type.name})"


class BwdGraphInfo:
    """`_ir.BwdGraphInfo`: a backward graph id and its expected inputs and outputs."""

    def __init__(self, bwdGraphId, expectedInputs: Iterable[ExpectedConnection],  # noqa: N803
                 expectedOutputs: Iterable[ExpectedConnection]):  # noqa: N803
        self.bwdGraphId = bwdGraphId if isinstance(bwdGraphId, GraphId) else GraphId(bwdGraphId)
        self.expectedInputs = list(expectedInputs)
        self.expectedOutputs = list(expectedOutputs)

    def __repr__(self) -> str:
        return f"BwdGraphInfo({self.bwdGraphId.str()!r}, {self.expectedInputs}, {self.expectedOutputs})"


class OpSettings:
    """`Op::Settings` of an op about to be created: where it goes and what it is called.

    `ctx._get_op_settings(name)` makes one from the build context (graph, name scope, IPU, tile
    set, execution context); custom ops' `createOpInGraph` read it."""

    def __init__(self, graph, name: str, scope: str, ipu: Optional[int], tile_set: str,
                 execution_context: ExecutionContext, debug_context=()):
        self.graph = graph
        self.name = name
        self.scope = scope
        self.vgraphId = ipu
        self.tileSet = tile_set
        self.executionContext = execution_context
        self.debug_context = tuple(debug_context)

    def __repr__(self) -> str:
        return f"OpSettings(name={self.name!r}, ipu={self.vgraphId}, tiles={self.tileSet})"


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
# popxl op types whose PopART op type name is not the CamelCase of the popxl name
_PB_TYPES = {"add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "matmul": "MatMul", "group_norm": "GroupNormalization",
             "call": "Call", "repeat": "Loop", "conditional": "If", "ipu_copy": "IpuCopy", "host_load": "HostLoad",
             "host_store": "HostStore", "remote_load": "RemoteLoad", "remote_store": "RemoteStore",
             "init": "Init", "replicated_all_reduce": "ReplicatedAllReduce",
             "replicated_all_gather": "ReplicatedAllGather", "replicated_reduce_scatter": "ReplicatedReduceScatter",
             "nll_loss": "Nll", "softmax": "Softmax", "gelu": "Gelu", "scaled_add": "ScaledAdd"}


def pb_op_type(op) -> str:
    t = op.type
    if t in _PB_TYPES:
        return _PB_TYPES[t]
    if op.attrs.get("_custom_op_type"):
        return op.attrs["_custom_op_type"]
    return "".join(p[:1].upper() + p[1:] for p in t.split("_"))


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
    def _ours_in(self, index: int) -> int:
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
        return tensor_view(self._op.inputs[self._ours_in(index)])

    def outTensor(self, index: int) -> Tensor:  # noqa: N802
        if not self.hasOutput(index):
            raise IndexError(f"{self.debugName()} has no output at index {index}")
        return tensor_view(self._op.outputs[index])

    def inId(self, index: int) -> str:  # noqa: N802
        return self.inTensor(index).id

    def outId(self, index: int) -> str:  # noqa: N802
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
    def _tensor_by_id(self, tensor_id: str):
        for t in self._op.graph._tensors.values():
            if t.id == tensor_id:
                return t
        raise KeyError(f"No tensor {tensor_id!r} in graph {self._op.graph.id!r} (connecting {self.debugName()})")

    def connectInTensor(self, index: int, tensorId: str, *args) -> None:  # noqa: N802,N803
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

    def disconnectAllInputs(self) -> None:  # noqa: N802
        op = self._op
        for t in set(op.inputs) - {None}:
            _drop_consumer(t, op)
        op.inputs = ()

    def disconnectAllOutputs(self) -> None:  # noqa: N802
        for t in self._op.outputs:
            if t is not None and t.producer is self._op:
                t._set_producer(None)
        self._op.outputs = ()

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

    def createAndConnectOutTensor(self, index: int, tensorId: str) -> None:  # noqa: N802,N803
        """Create tensor `tensorId` in the op's graph as output `index` (shape and type from the op)."""
        from popxl.tensor import Tensor as XTensor
        op = self._op
        g = op.graph
        shape, dtype, meta = self._out_spec(index)
        tid = tensorId if tensorId not in g.ir._tensor_ids else g.ir._unique_tensor_id(g._scope_prefix + tensorId)
        t = XTensor._create(g, tid, shape, dtype, meta, producer=op, ipu=op.ipu, tile_set=op.tile_set)
        self.connectOutTensor(index, t)

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

    def cloneIntoGraph(self, graph: "Graph") -> "Op":  # noqa: N802
        """A copy of this op (type, attributes, placement, names) in `graph`, with no inputs or
        outputs: connect them, then `setup()`. Its id is new, after every op of the Ir."""
        from popxl.op import Op as XOp
        src = self._op
        g = graph._g if isinstance(graph, Graph) else graph
        attrs = dict(src.attrs)
        if "input_map" in attrs:
            attrs["input_map"] = dict(attrs["input_map"])
        new = XOp(id=g.ir._next_op_id(), type=src.type, graph=g, inputs=(None,) * len(src.inputs), outputs=(),
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

    def addModified(self, index: int, regions) -> None:  # noqa: N802
        """Mark input `index` modified by the op when `regions` are not empty."""
        if any_modified(regions):
            i = self._ours_in(index)
            self._op.modified = tuple(sorted(set(self._op.modified) | {i}))
            self._op.inplace = True

    def removeModified(self, index: int) -> None:  # noqa: N802
        i = self._ours_in(index)
        self._op.modified = tuple(m for m in self._op.modified if m != i)

    def __repr__(self) -> str:
        return f"_ir.{type(self).__name__}({self._op.id}, {self.opType()}, {self._op.name!r})"


# -- graphs -------------------------------------------------------------------------------------
class TopoCons:
    """`_ir.TopoCons` of a graph: the extra ordering constraints (popxl's `Op.after`)."""

    def __init__(self, g):
        self._g = g

    def getAfters(self, op) -> List[Op]:  # noqa: N802
        op = unwrap_op(op)
        return [op_view(o) for o in self._g._ops if op in o.after]

    def getBefores(self, op) -> List[Op]:  # noqa: N802
        return [op_view(o) for o in unwrap_op(op).after]

    def insert(self, before, after, tied: bool = False) -> None:
        before, after = unwrap_op(before), unwrap_op(after)
        if before not in after.after:
            after.after = tuple(after.after) + (before,)

    def contains(self, before, after) -> bool:
        return unwrap_op(before) in unwrap_op(after).after

    def remove(self, before, after) -> None:
        after = unwrap_op(after)
        after.after = tuple(a for a in after.after if a is not unwrap_op(before))

    def transferToSubgraph(self, replacementOp, opRemaps, transferOut: bool = True) -> None:  # noqa: N802,N803
        """Move the constraints of the ops in `opRemaps` (old op -> [new ops in a subgraph]) onto
        their copies; constraints with ops outside the map move to `replacementOp`."""
        rep = unwrap_op(replacementOp)
        remap = {id(unwrap_op(k)): [unwrap_op(n) for n in v] for k, v in opRemaps.items()}
        olds = {id(unwrap_op(k)): unwrap_op(k) for k in opRemaps}
        outside_before = []
        for old in olds.values():
            for b in old.after:
                if id(b) in remap:
                    for new in remap[id(old)]:
                        for nb in remap[id(b)]:
                            if nb not in new.after:
                                new.after = tuple(new.after) + (nb,)
                elif b is not rep and b not in outside_before:
                    outside_before.append(b)
        if outside_before:
            rep.after = tuple(rep.after) + tuple(b for b in outside_before if b not in rep.after)
        if transferOut:
            for o in self._g._ops:
                if id(o) in remap or o is rep:
                    continue
                if any(id(a) in remap for a in o.after):
                    o.after = tuple(a for a in o.after if id(a) not in remap) + ((rep,) if rep not in o.after else ())


class Graph:
    """`_ir.Graph`: a view of a popxl graph."""

    def __init__(self, g):
        self._g = g

    @property
    def id(self) -> GraphId:
        return GraphId(self._g.id)

    def getIr(self) -> "Ir":  # noqa: N802
        return ir_view(self._g.ir)

    def getScope(self) -> str:  # noqa: N802
        return self._g.id

    # ops
    def getOps(self) -> List[Op]:  # noqa: N802
        return [op_view(o) for o in self._g._ops]

    def getOpIds(self) -> List[int]:  # noqa: N802
        return [o.id for o in self._g._ops]

    def getOp(self, opid: int) -> Op:  # noqa: N802
        for o in self._g._ops:
            if o.id == opid:
                return op_view(o)
        raise KeyError(f"No op {opid} in graph {self._g.id!r}")

    def getOpSchedule(self, requireOptimalSchedule: bool = False) -> List[Op]:  # noqa: N802,N803
        """The ops in the order they run (the IR keeps id order a valid schedule)."""
        return [op_view(o) for o in sorted(self._g._ops, key=lambda o: o.id)]

    def eraseOp(self, opid: int) -> None:  # noqa: N802
        """Remove op `opid` from the graph; its inputs lose it as a consumer, its outputs their producer."""
        for k, o in enumerate(self._g._ops):
            if o.id == opid:
                v = op_view(o)
                v.disconnectAllInputs()
                v.disconnectAllOutputs()
                for other in self._g._ops:
                    if o in other.after:
                        other.after = tuple(a for a in other.after if a is not o)
                self._g._remove_op(o)
                return
        raise KeyError(f"eraseOp: no op {opid} in graph {self._g.id!r}")

    def getCalledGraphs(self) -> List["Graph"]:  # noqa: N802
        out, seen = [], set()
        for o in self._g._ops:
            for g in op_view(o).getCalledGraphs():
                if id(g) not in seen:
                    seen.add(id(g))
                    out.append(g)
        return out

    def topoCons(self) -> TopoCons:  # noqa: N802
        return TopoCons(self._g)

    # tensors
    def getTensor(self, tensorId: str) -> Tensor:  # noqa: N802,N803
        return tensor_view(self._g.get_tensor(tensorId))

    def getTensorIds(self) -> List[str]:  # noqa: N802
        return list(self._g._tensors)

    def getTensors(self) -> List[Tensor]:  # noqa: N802
        return [tensor_view(t) for t in self._g._tensors.values()]

    def hasTensor(self, tensorId: str) -> bool:  # noqa: N802,N803
        return tensorId in self._g._tensors

    def removeIsolatedTensors(self, retainUsedIOTensors: bool = False, retainAllIOTensors: bool = False,  # noqa: N802,N803
                              retainVarTensors: bool = False, retainConstTensors: bool = False) -> None:  # noqa: N803
        """Remove tensors no op produces or consumes (graph inputs / outputs, variables and
        constants are kept when the flags say so)."""
        from popxl.tensor import Constant, Variable
        g = self._g
        io = {id(t) for t in g._inputs} | {id(t) for t in g._outputs}
        for tid, t in list(g._tensors.items()):
            if t._producer is not None or t._consumers:
                continue
            if id(t) in io and (retainAllIOTensors or retainUsedIOTensors):
                continue
            if isinstance(t, Variable) and retainVarTensors:
                continue
            if isinstance(t, Constant) and retainConstTensors:
                continue
            g._remove_tensor(t)

    # inputs / outputs
    def getInputIds(self) -> List[str]:  # noqa: N802
        return [t.id for t in self._g._inputs]

    def getOutputIds(self) -> List[str]:  # noqa: N802
        return [t.id for t in self._g._outputs]

    def getInputId(self, index: int) -> str:  # noqa: N802
        return self._g._inputs[index].id

    def getOutputId(self, index: int) -> str:  # noqa: N802
        return self._g._outputs[index].id

    def getInputTensor(self, index: int) -> Tensor:  # noqa: N802
        return tensor_view(self._g._inputs[index])

    def getOutputTensor(self, index: int) -> Tensor:  # noqa: N802
        return tensor_view(self._g._outputs[index])

    def getInputIndex(self, tensorId: str) -> int:  # noqa: N802,N803
        for i, t in enumerate(self._g._inputs):
            if t.id == tensorId:
                return i
        raise ValueError(f"{tensorId!r} is not an input of graph {self._g.id!r}")

    def getOutputIndex(self, tensorId: str) -> int:  # noqa: N802,N803
        for i, t in enumerate(self._g._outputs):
            if t.id == tensorId:
                return i
        raise ValueError(f"{tensorId!r} is not an output of graph {self._g.id!r}")

    def hasInputId(self, tensorId: str) -> bool:  # noqa: N802,N803
        return any(t.id == tensorId for t in self._g._inputs)

    def hasOutputId(self, tensorId: str) -> bool:  # noqa: N802,N803
        return any(t.id == tensorId for t in self._g._outputs)

    def markAsOutput(self, tensorId: str) -> None:  # noqa: N802,N803
        """Make tensor `tensorId` the graph's next output; call ops calling the graph get a new
        output for it (repeat ops carry their outputs, see LoopOp.addLoopOutput)."""
        from popxl.transforms._graph_edit import add_op_output, callers_of
        t = self._g.get_tensor(tensorId)
        self._g._add_output(t)
        for op in callers_of(self._g):
            if op.type == "call":
                add_op_output(op, t.shape, t.dtype, t.name.split("/")[-1], t.meta_shape)

    def removeOutput(self, index: int) -> None:  # noqa: N802
        """Remove output `index`; call ops calling the graph lose the matching output, which must
        be unused.

        An index at or past the end removes the last output, as PopART's
        `graph_outputs.erase(begin() + index)` does with libstdc++: popxl-addons'
        autodiff_with_accumulation removes a trailing block of outputs by increasing index and
        relies on it."""
        from popxl.transforms._graph_edit import callers_of
        g = self._g
        if index < 0 or not g._outputs:
            raise IndexError(f"graph {g.id!r} has no output {index}")
        index = min(int(index), len(g._outputs) - 1)
        sites = []
        for op in callers_of(g):  # check every call site before changing any
            if op.type == "repeat":
                raise RuntimeError(f"removeOutput: graph {g.id!r} is repeated by op {op.name!r}, whose outputs "
                                   "are carried; remove the loop output instead")
            if op.type != "call" or index >= len(op.outputs):
                continue
            t = op.outputs[index]
            if t.consumers:
                raise RuntimeError(f"removeOutput: output {index} of graph {g.id!r} is used at call site "
                                   f"{op.name!r} by {[c.name for c in t.consumers]}")
            sites.append(op)
        for op in sites:
            op.outputs[index]._set_producer(None)
            op.outputs = op.outputs[:index] + op.outputs[index + 1:]
        g._remove_output(index)

    def removeInput(self, index: int) -> None:  # noqa: N802
        g = self._g
        from popxl.transforms._graph_edit import callers_of
        if callers_of(g):
            raise RuntimeError(f"removeInput: graph {g.id!r} is called; remove the input before calling it")
        g._remove_input(index)

    def __eq__(self, other) -> bool:
        return isinstance(other, Graph) and other._g is self._g

    def __hash__(self) -> int:
        return id(self._g)

    def __repr__(self) -> str:
        return f"_ir.Graph({self._g.id!r})"


class Ir:
    """`_ir.Ir`: a view of a popxl Ir, with its session options and patterns."""

    def __init__(self, ir):
        from popxl._session_options import SessionOptions
        from .patterns import Patterns, PatternsLevel
        self._ir = ir
        self._options = SessionOptions()
        self._patterns = Patterns(PatternsLevel.Default)

    def getSessionOptions(self):  # noqa: N802
        return self._options

    def getAllGraphs(self) -> List[Graph]:  # noqa: N802
        return [graph_view(g) for g in self._ir.graphs]

    def getMainGraph(self) -> Graph:  # noqa: N802
        return graph_view(self._ir.main_graph)

    def getGraph(self, graphId) -> Graph:  # noqa: N802,N803
        gid = graphId.str() if isinstance(graphId, GraphId) else str(graphId)
        for g in self._ir.graphs:
            if g.id == gid:
                return graph_view(g)
        raise KeyError(f"No graph {gid!r} in the Ir")

    def hasGraph(self, graphId) -> bool:  # noqa: N802,N803
        try:
            self.getGraph(graphId)
            return True
        except KeyError:
            return False

    def createGraph(self, graphId) -> Graph:  # noqa: N802,N803
        gid = graphId.str() if isinstance(graphId, GraphId) else str(graphId)
        if self.hasGraph(gid):
            raise RuntimeError(f"The Ir already has a graph {gid!r}")
        return graph_view(self._ir._new_graph_with_id(gid))

    def createUniqueSubgraphId(self, base: str) -> str:  # noqa: N802
        n = 0
        while self.hasGraph(f"{base}_{n}"):
            n += 1
        return f"{base}_{n}"

    def getTensor(self, tensorId: str) -> Tensor:  # noqa: N802,N803
        for g in self._ir.graphs:
            if tensorId in g._tensors:
                return tensor_view(g._tensors[tensorId])
        raise KeyError(f"No tensor {tensorId!r} in the Ir")

    def containsTensor(self, tensorId: str) -> bool:  # noqa: N802,N803
        return any(tensorId in g._tensors for g in self._ir.graphs)

    def createIntermediateTensorId(self, base: str) -> str:  # noqa: N802
        return self._ir._unique_tensor_id(base)

    def getReplicationFactor(self) -> int:  # noqa: N802
        return self._ir.replication_factor

    # patterns
    def setPatterns(self, patterns) -> None:  # noqa: N802
        self._patterns = patterns

    def getPatterns(self):  # noqa: N802
        return self._patterns

    def applyPreAliasPatterns(self, graph) -> None:  # noqa: N802
        from .patterns import apply_pre_alias
        apply_pre_alias(self._patterns, graph._g if isinstance(graph, Graph) else graph)

    def applyInplacePattern(self, graph) -> None:  # noqa: N802
        from .patterns import apply_inplace
        apply_inplace(self._patterns, graph._g if isinstance(graph, Graph) else graph)

    def logIr(self) -> None:  # noqa: N802
        for g in self._ir.graphs:
            print(f"graph {g.name or 'main'}: {len(g.ops)} ops")
            for op in g.ops:
                print(f"  {op}")

    def __getattr__(self, name):
        raise AttributeError(
            f"_ir.Ir.{name}: the simulator's view of PopART's internal Ir has getSessionOptions, getAllGraphs, "
            "getMainGraph, getGraph, createGraph, getTensor, setPatterns / applyPreAliasPatterns / "
            "applyInplacePattern and logIr; use the public popxl API for the rest")

    def __eq__(self, other) -> bool:
        return isinstance(other, Ir) and other._ir is self._ir

    def __hash__(self) -> int:
        return id(self._ir)

    def __repr__(self) -> str:
        return f"_ir.Ir({self._ir.id})"
