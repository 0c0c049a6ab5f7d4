"""The lowering context: turns a popxl Ir into an ipu.Graph and its programs.

Every popxl tensor gets an ipu tensor (a variable or a view of one); every op's rule appends
programs to the sequence being built. Called graphs are lowered once into an `ipu.Function` with
variables for their inputs and outputs; call sites copy arguments in and results out, so the code
of a graph called from several places is shared.

Main-graph ops in the weights fragments of the execution context (PopART's WeightsFromHost /
WeightsToHost programs) are lowered into programs of their own, which the Session runs when the
weights go to the device and come back; the tensors such an op reads or writes cross programs,
so they are always live.
"""
from __future__ import annotations

import weakref
from dataclasses import dataclass, field

import numpy as np

import ipu

from popxl.context import ExecutionContext

from .mapping import TileAllocator
from .placement import IpuPlacement, tensor_ipu
from . import creators, index_checks
from .registry import get_rule


@dataclass
class LoweredGraph:
    graph: object
    function: ipu.Function
    inputs: list  # ipu Variables, one per graph input
    outputs: list  # ipu Tensors holding each graph output


@dataclass
class LoweredIr:
    """What a Session needs: the compiled-ready ipu graph, its programs and the tensor maps."""

    # None once released: the Session drops them after compiling, a cached entry has none
    graph: ipu.Graph | None
    main: ipu.Program | None
    variables: dict  # popxl Variable -> ipu Variable
    constants: dict
    h2d: dict  # popxl HostToDeviceStream -> ipu HostStream
    d2h: dict
    op_names: dict = field(default_factory=dict)  # compute set / step name -> popxl op name
    remote_buffers: dict = field(default_factory=dict)  # popxl RemoteBuffer -> ipu.RemoteBuffer
    remote_variables: dict = field(default_factory=dict)  # popxl Variable -> (ipu.RemoteBuffer, entry)
    # execution-context name -> the program of the main graph's ops in that fragment (FRAGMENTS)
    fragments: dict = field(default_factory=dict)


_INLINE: weakref.WeakSet = weakref.WeakSet()  # popxl Graphs to lower inline (lower_inline)


def lower_inline(graph) -> None:
    """Lower the (single) call of `graph` inline, as the caller's ops (see Lowering.inlinable)."""
    _INLINE.add(graph)


# the execution contexts whose ops run as programs of their own, around the main program
FRAGMENTS = (ExecutionContext.WeightsFromHostFragment, ExecutionContext.WeightsToHostFragment)


def _changed_in_place(t) -> bool:
    """Whether an op changes ``t`` (or a view of it) in place."""
    todo, seen = [t], set()
    while todo:
        x = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        for c in x.consumers:
            idx = [j for j, y in enumerate(c.inputs) if y is x]
            if any(j in c.modified for j in idx):
                return True
            todo.extend(c.outputs[o] for o, i in c.aliases.items() if i in idx)
    return False


def _rerunnable(op) -> bool:
    return not any(_changed_in_place(t) for t in list(op.inputs) + list(op.outputs))


class Lowering:
    def __init__(self, ir, target: ipu.Target):
        self.ir = ir
        self.target = target.with_ipus(1) if target.ipus > 1 else target  # rules see one IPU (placement.py)
        self.g = ipu.Graph(target)
        self.placement = IpuPlacement(self.g, target.tiles_per_ipu, target.ipus)
        self.tiles = TileAllocator(self.target)
        self.values: dict = {}
        self.variables: dict = {}
        self.constants: dict = {}
        self.h2d: dict = {}
        self.d2h: dict = {}
        self.graphs: dict = {}
        self.op_names: dict = {}  # program / step name -> popxl op name
        self.remote_buffers: dict = {}  # popxl RemoteBuffer -> ipu.RemoteBuffer (rules/remote.py)
        self.remote_variables: dict = {}  # popxl Variable -> (ipu.RemoteBuffer, entry)
        self._seqs: list[ipu.Sequence] = []
        self._fragments = {c: ipu.Sequence(name=c.name) for c in FRAGMENTS}
        self._lowering_stack: list = []
        self.op = None  # the op being lowered (for names)
        self.check_indices = index_checks.enabled(ir)
        self._graph_uses: dict[int, int] | None = None  # id(graph) -> how many ops name it (inlinable)
        # recomputation: copy op -> forward op (autodiff_recomputing), the forward ops whose programs
        # may run again (none of their inputs or outputs changed in place), and those programs
        self._recompute_of: dict = ir._recompute_of
        self._rerun_sources = {src for src in self._recompute_of.values() if _rerunnable(src)}
        self._op_programs: dict = {}
        self.planned: dict = {}  # op -> the matmul plan a variable it reads was laid out for (creators.py)

    # -- entry point ---------------------------------------------------------------------------
    def lower(self) -> LoweredIr:
        main = self.ir.main_graph
        ipu.compile_progress.phase("lowering ops", sum(len(g.ops) for g in self.ir.graphs))
        from .rules.matmul import precheck_matmuls, reserve_products_code
        precheck_matmuls(self, main)  # a matmul that cannot fit is refused before any tensor is mapped
        reserved = creators.reserved_estimate(self, main)
        for v in main.variables:
            # replica-sharded: its shard op holds it (rules/collectives.py)
            if getattr(v, "_rts_shard", None) is not None:
                continue
            if getattr(v, "_remote_buffer", None) is not None:  # lives in streaming memory
                from .rules.remote import remote_variable
                remote_variable(self, v)
                continue
            # laid out by the op that reads it when that op creates it, else linearly (creators.py)
            created = creators.create_variable(self, v, reserved) if self.placement.ipus == 1 else None
            self.values[v] = self.variables[v] = created if created is not None else self._persistent(v, ipu.VARIABLE)
        reserve_products_code(self)  # every product's code, kept free when each is planned
        seq = self.lower_ops(main)
        for op in main.ops:
            if op.execution_context in self._fragments:
                self._keep_live(op)
        fragments = {c.name: f for c, f in self._fragments.items() if f.programs}
        return LoweredIr(self.g, seq, self.variables, self.constants, self.h2d, self.d2h, self.op_names,
                         remote_buffers=self.remote_buffers, remote_variables=self.remote_variables,
                         fragments=fragments)

    def _keep_live(self, op) -> None:
        """The tensors a fragment op reads or writes hold their values from one program to another."""
        for t in (*op.inputs, *op.outputs):
            value = self.values.get(t)
            var = getattr(value, "variable", value)
            if isinstance(var, ipu.Variable) and var.category == ipu.TEMPORARY:
                var.category = ipu.VARIABLE

    def _persistent(self, t, category):
        et = self.etype(t)
        data = np.asarray(t._data, dtype=et.numpy) if category == ipu.CONSTANT else None
        if category == ipu.CONSTANT:
            v = self.g.add_constant(t.id, data, et, debug=t.id)
        else:
            v = self.g.add_variable(t.id, t.shape, et, category, debug=t.id)
        self.tiles.map(self.g, v)
        self.placement.place(v, tensor_ipu(t))
        return v

    def lower_ops(self, graph) -> ipu.Sequence:
        if graph in self._lowering_stack:
            raise ValueError(f"graph {graph.name!r} calls itself; recursion cannot be lowered")
        self._lowering_stack.append(graph)
        seq = ipu.Sequence(name=graph.name)
        self._seqs.append(seq)
        try:
            for c in graph.constants:
                if c not in self.values:
                    self.values[c] = self.constants[c] = self._persistent(c, ipu.CONSTANT)
            is_main = graph is self.ir.main_graph
            for op in sorted(graph.ops, key=lambda o: o.id):
                if self._rerun(op):
                    continue
                fragment = self._fragments.get(op.execution_context) if is_main else None
                if fragment is not None:  # the op's programs go to its fragment's program
                    self._seqs.append(fragment)
                prev, self.op = self.op, op
                n0, v0 = len(self._seqs[-1].programs), len(self.g.variables)
                mark = self.placement.begin(op, self)
                if self.check_indices:  # the debug.checkIndices engine option (index_checks.py)
                    index_checks.emit(self, op)
                ipu.compile_progress.tick(op.name)
                get_rule(op.type)(self, op)
                self.placement.end(mark, op)  # onto the op's IPU (placement.py)
                if op in self._rerun_sources:
                    self._op_programs[op] = (list(self._seqs[-1].programs[n0:]),
                                             {v.id for v in self.g.variables[v0:]})
                self.op = prev
                if fragment is not None:
                    self._seqs.pop()
        finally:
            self._seqs.pop()
            self._lowering_stack.pop()
        return seq

    def _rerun(self, op) -> bool:
        """A forward op recomputed in the backward pass (popxl/transforms/autodiff.py: the copy the
        gradient graph holds, `Ir._recompute_of`) runs the forward op's own programs a second time,
        writing the same tensors, as PopART's implicit recomputation reruns the op's Poplar program:
        no second set of compute sets and vertex state. The tensors' liveness has a gap between
        the last forward read and the rewrite (ipu/timeline.py). Not when the op's inputs or
        outputs are changed in place afterwards (the rerun would read or overwrite other values)
        or it runs in another program fragment: then the copy is lowered as an op of its own."""
        src = self._recompute_of.get(op)
        if src is None or src not in self._op_programs or op.execution_context != src.execution_context:
            return False
        programs, fresh = self._op_programs[src]
        self._seqs[-1].add(ipu.Rerun(*programs, name=f"recompute {src.name}", fresh=fresh))
        for o, so in zip(op.outputs, src.outputs):
            self.values[o] = self.values[so]
        return True

    def lowered(self, graph) -> LoweredGraph:
        """The ipu Function of a called graph, lowering it on first use."""
        lg = self.graphs.get(graph)
        if lg is not None:
            return lg
        inputs = []
        for t in graph.inputs:
            iv = self.new_var(t.shape, self.etype(t), f"{graph.name}/{t.name}")
            self.placement.place(iv, tensor_ipu(t))  # on the IPU of the graph's ops that use it
            self.values[t] = iv
            inputs.append(iv)
        saved_op = self.op
        seq = self.lower_ops(graph)
        self.op = saved_op
        # outputs are whole variables of their own, so that call sites and loop carries can copy
        # them without reading an input that is being overwritten
        outputs = []
        input_ids = {v.id for v in inputs}
        for t in graph.outputs:
            v = self.value(t)
            if not v.is_identity or v.variable.id in input_ids or v.variable.category != ipu.TEMPORARY:
                nv = self.new_var(t.shape, self.etype(t), f"{graph.name}/{t.name}/out")
                self.placement.place(nv, tensor_ipu(t))
                if v.numel:
                    seq.add(ipu.Copy(v, nv, name=f"{graph.name}/output"))
                v = nv
            outputs.append(v)
        fn = self.g.add_function(seq, graph.name)
        lg = LoweredGraph(graph, fn, inputs, outputs)
        self.graphs[graph] = lg
        return lg

    # -- helpers for rules ----------------------------------------------------------------------
    def etype(self, t) -> ipu.ElementType:
        name = t.dtype.name
        if name in ("float64", "int64", "uint64"):
            raise TypeError(
                f"tensor {getattr(t, 'id', None) or t.tensor_id!r} is {name}: the IPU has no 64-bit types. Create it "
                f"as a 32-bit type (popxl.variable/constant downcast host data by default) or cast it."
            )
        try:
            return ipu.element_type(name)
        except TypeError:
            raise TypeError(f"tensor {getattr(t, 'id', None) or t.tensor_id!r}: dtype {name} is not supported by the "
                            "simulator yet") from None

    def value(self, t) -> ipu.Tensor:
        try:
            return self.values[t]
        except KeyError:
            graph = getattr(t, "graph", None)
            raise ValueError(
                f"tensor {t.id!r} (graph {getattr(graph, 'name', '?')!r}) has no value here: it is used "
                f"outside the graph that produces it; pass it in as a graph input"
            ) from None

    def bind(self, t, value: ipu.Tensor) -> None:
        self.values[t] = value

    def name(self, suffix: str = "") -> str:
        base = self.op.name if self.op is not None else "main"
        return f"{base}/{suffix}" if suffix else base

    def new_var(self, shape, et, name: str, like: ipu.Tensor | None = None, category=ipu.TEMPORARY) -> ipu.Variable:
        v = self.g.add_variable(name, shape, et, category, debug=self.name())
        if like is not None and like.is_identity and like.variable.numel == v.numel:
            v.map_like(like.variable)
        else:
            self.tiles.map(self.g, v)
        return v

    def new_output(self, op, i: int = 0, like: ipu.Tensor | None = None, et=None) -> ipu.Variable:
        t = op.outputs[i]
        v = self.new_var(t.shape, et or self.etype(t), t.id, like=like)
        self.values[t] = v
        return v

    def inlinable(self, graph) -> bool:
        """Whether a call of `graph` may be lowered inline, as the caller's own ops: a frontend
        asked for it (`lower_inline`: PopART's session program, whose forward and backward passes
        are ops of PopART's main graph, not called subgraphs), the graph has one use in the whole
        Ir (that call: no other call, loop, branch or code load names it) and the program runs on
        one IPU. An inlined graph needs no function of its own and no copies of its arguments and
        results (a called graph's are copied in and out, as PopXL's calls are)."""
        if graph not in _INLINE or self.target.ipus > 1 or self.placement.ipus > 1:
            return False
        if self._graph_uses is None:
            uses: dict[int, int] = {}
            for g in self.ir.graphs:
                for o in g.ops:
                    for cg in getattr(o, "called_graphs", ()) or ():
                        uses[id(cg)] = uses.get(id(cg), 0) + 1
                    for key in ("graph", "then_branch", "else_branch"):
                        cg = o.attrs.get(key) if isinstance(o.attrs, dict) else None
                        if (cg is not None and not isinstance(cg, (str, int, float))
                                and cg not in (o.called_graphs or ())):
                            uses[id(cg)] = uses.get(id(cg), 0) + 1
            self._graph_uses = uses
        return self._graph_uses.get(id(graph), 0) == 1 and graph not in self.graphs

    def emit_inline(self, program: ipu.Sequence) -> None:
        """Append the programs of an inlined graph (their steps keep the names of their own ops)."""
        self._seqs[-1].add(program)

    def emit(self, program: ipu.Program) -> None:
        self._seqs[-1].add(program)
        if self.op is not None:
            self._record(program, self.op.name)

    def _record(self, p, op_name: str) -> None:
        """Remember which popxl op each program step came from (for the profile)."""
        if isinstance(p, ipu.Sequence):
            for q in p.programs:
                self._record(q, op_name)
        elif isinstance(p, ipu.Repeat):
            self._record(p.body, op_name)
        elif p.name:
            self.op_names[p.name] = op_name
            if isinstance(p, (ipu.Copy, ipu.HostToDevice, ipu.DeviceToHost)):
                self.op_names[f"sync ({p.name})"] = op_name  # the sync the compiler puts before it

    def compute_set(self, suffix: str = "") -> ipu.ComputeSet:
        return self.g.add_compute_set(self.name(suffix), debug=self.name())

    def copy(self, src: ipu.Tensor, dst: ipu.Tensor, suffix: str = "copy") -> None:
        if src.numel:
            self.emit(ipu.Copy(src, dst, name=self.name(suffix)))

    def like(self, view: ipu.Tensor, ref: ipu.Variable, suffix: str = "rearrange") -> ipu.Variable:
        """A variable laid out exactly like `ref` (same shape order and tiles) holding `view`'s
        data: `view` itself when it already is, else a temporary filled by a Copy."""
        if view.numel != ref.numel:
            view = view.broadcast(ref.shape)
        if view.is_identity and view.variable.same_mapping(ref):
            return view.variable
        v = self.g.add_variable(f"{self.name(suffix)}", ref.shape, view.dtype, ipu.TEMPORARY, debug=self.name())
        v.map_like(ref)
        self.copy(view, v, suffix)
        return v

    def pieces(self, var: ipu.Variable, split_for_workers: bool = False, grain: int = 1):
        """(tiles, starts, counts) of the runs of `var` on tiles; optionally each run split into up
        to 6 parts (one per worker context) in multiples of `grain`."""
        starts, stops, tiles = var.pieces()
        counts = stops - starts
        if not split_for_workers:
            return tiles.astype(np.int64), starts, counts
        w = self.target.worker_contexts
        out_t, out_s, out_c = [], [], []
        for t, s, c in zip(tiles, starts, counts):
            per = -(-int(c) // w)
            per = -(-per // grain) * grain if per else 0
            k = 0
            while k < c:
                n = min(per, int(c) - k)
                out_t.append(t)
                out_s.append(int(s) + k)
                out_c.append(n)
                k += n
        return np.asarray(out_t, np.int64), np.asarray(out_s, np.int64), np.asarray(out_c, np.int64)
