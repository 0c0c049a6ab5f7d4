"""`_ir.Graph`, `_ir.TopoCons` and `_ir.Ir`: views of popxl graphs and the Ir."""
from __future__ import annotations

from typing import List

from .values import GraphId
from .views import Op, Tensor, edits, graph_view, ir_view, op_view, tensor_view, unwrap_op

__all__ = ["TopoCons", "Graph", "Ir"]


class TopoCons:
    """`_ir.TopoCons` of a graph: the extra ordering constraints (popxl's `Op.after`)."""

    def __init__(self, g):
        self._g = g

    def getAfters(self, op) -> List[Op]:  # noqa: N802
        op = unwrap_op(op)
        return [op_view(o) for o in self._g._ops if op in o.after]

    def getBefores(self, op) -> List[Op]:  # noqa: N802
        return [op_view(o) for o in unwrap_op(op).after]

    @edits
    def insert(self, before, after, tied: bool = False) -> None:
        before, after = unwrap_op(before), unwrap_op(after)
        if before not in after.after:
            after.after = tuple(after.after) + (before,)

    def contains(self, before, after) -> bool:
        return unwrap_op(before) in unwrap_op(after).after

    @edits
    def remove(self, before, after) -> None:
        after = unwrap_op(after)
        after.after = tuple(a for a in after.after if a is not unwrap_op(before))

    @edits
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

    def setCanBeRecursivelyAutodiffed(self, can: bool) -> None:  # noqa: N802
        """False: autodiff of a graph calling this one takes its gradient from the
        called_graphs_grad_info it is given, never differentiates its ops (popxl-addons 3.4's
        Modules with their own `build_grad`)."""
        self._g._set_recursive_autodiff(can)

    def canBeRecursivelyAutodiffed(self) -> bool:  # noqa: N802
        return self._g._recursive_autodiff

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

    @edits
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

    @edits
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

    @edits
    def markAsOutput(self, tensorId: str) -> None:  # noqa: N802,N803
        """Make tensor `tensorId` the graph's next output; call ops calling the graph get a new
        output for it (repeat ops carry their outputs, see LoopOp.addLoopOutput)."""
        from popxl.transforms._graph_edit import add_op_output, callers_of
        t = self._g.get_tensor(tensorId)
        self._g._add_output(t)
        for op in callers_of(self._g):
            if op.type == "call":
                add_op_output(op, t.shape, t.dtype, t.name.split("/")[-1], t.meta_shape)

    @edits
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

    @edits
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
        """The Ir's graphs and ops at DEBUG in PopART's log (module "ir"), as PopART's logIr."""
        from popxl import _logging
        if not _logging.enabled("ir", "DEBUG"):
            return
        for g in self._ir.graphs:
            _logging.log("ir", "DEBUG", f"graph {g.name or 'main'}: {len(g.ops)} ops")
            for op in g.ops:
                _logging.log("ir", "DEBUG", f"  {op}")

    # what PopART's Session and InferenceSession.fromIr call before compiling
    def setDataFlow(self, dataFlow) -> None:  # noqa: N802,N803
        """The data flow of a session of this Ir: its batchesPerStep is the Ir's num_host_transfers
        (as PopXL's num_host_transfers setter keeps them one)."""
        self._dataflow = dataFlow
        bps = getattr(dataFlow, "batchesPerStep", None)
        if callable(bps):
            self._ir.num_host_transfers = int(bps())

    def getDataFlow(self):  # noqa: N802
        return getattr(self, "_dataflow", None)

    def updateVertices(self) -> None:  # noqa: N802
        """PopART recomputes each op's per-tensor attributes after IR edits; the views read the
        popxl records directly, so there is nothing to update."""

    def removeIsolatedGraphs(self) -> None:  # noqa: N802
        """PopART drops graphs nothing calls before compiling; the lowering compiles only the graphs
        the main graph reaches, so they never reach the executable here either."""

    def finalizeOpDebugInfo(self) -> None:  # noqa: N802
        """PopART completes each op's debug info before compiling; the popxl ops carry theirs."""

    def isPrepared(self) -> bool:  # noqa: N802
        return bool(getattr(self._ir, "_is_prepared", False))

    def __getattr__(self, name):
        raise AttributeError(
            f"_ir.Ir.{name}: the simulator's view of PopART's internal Ir has getSessionOptions, getAllGraphs, "
            "getMainGraph, getGraph, createGraph, getTensor, setPatterns / applyPreAliasPatterns / "
            "applyInplacePattern, setDataFlow, updateVertices and logIr; use the public popxl API for the rest")

    def __eq__(self, other) -> bool:
        return isinstance(other, Ir) and other._ir is self._ir

    def __hash__(self) -> int:
        return id(self._ir)

    def __repr__(self) -> str:
        return f"_ir.Ir({self._ir.id})"
