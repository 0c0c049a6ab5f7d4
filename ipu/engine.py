"""The engine: runs an Executable on simulated tile memory and counts cycles.

Memory is one flat byte array per replica holding only the bytes the memory plan uses (tile after
tile), so host RAM stays close to the simulated bytes in use. Each compute step calls one compiled
kernel per codelet group over all its vertices; exchanges and host transfers run from the copy
tables built at compile time. Cycles advance by each step's cost (its slowest tile) in program
order, bulk-synchronously, and every executed step is logged with its start cycle.
"""
from __future__ import annotations

from array import array

import numba
import numpy as np

from . import env, interpreted
from .blas import single_threaded_kernel_blas
from .copytables import copy_runs
from .errors import IpuError, StreamError
from .executable import Executable
from .hostmem import zeroed_memory
from .kinds import run_payload
from .native import Plan
from .nodes import Branch, CallRef, Loop, MultiBranch, Segment, Seq, StepRef
from .remote import StreamingMemory
from .step_loop import run_ops
from .tensor import IndexBlocks, Variable

__all__ = ["Engine", "StepLog"]


class StepLog:
    """What ran: how many times each step executed (a table the size of the program, so nothing
    grows with the number of runs) and a trace of the first `limit` executed steps in order (step
    id and start cycle; 16 bytes per entry) for the profile. `limit=None` keeps every entry; a
    Session keeps none unless profiling is on (docs/profile-format.md)."""

    def __init__(self, num_steps: int = 0, limit: int | None = None):
        self.counts = np.zeros(max(int(num_steps), 1), np.int64)
        self.limit = limit
        self.entries = 0  # executed steps, all runs, traced or not
        self.step_ids = array("q")
        self.start_cycles = array("q")

    def add(self, step_id: int, start: int) -> None:
        if step_id >= self.counts.size:
            self.counts = np.concatenate([self.counts, np.zeros(step_id + 1 - self.counts.size, np.int64)])
        self.counts[step_id] += 1
        self.entries += 1
        if self.limit is None or len(self.step_ids) < self.limit:
            self.step_ids.append(step_id)
            self.start_cycles.append(start)

    def add_counted(self, counts: np.ndarray, executed: int, step_ids: np.ndarray, start_cycles: np.ndarray) -> None:
        """Add what a compiled segment ran: per-step counts, the number of steps executed, and the
        trace entries it recorded (at most the room the trace limit left)."""
        if counts.size > self.counts.size:
            self.counts = np.concatenate([self.counts, np.zeros(counts.size - self.counts.size, np.int64)])
        self.counts[:counts.size] += counts
        self.entries += int(executed)
        if step_ids.size:
            self.step_ids.frombytes(np.ascontiguousarray(step_ids, np.int64).tobytes())
            self.start_cycles.frombytes(np.ascontiguousarray(start_cycles, np.int64).tobytes())

    def room(self) -> int | None:
        """Trace entries that may still be recorded (None: no limit)."""
        return None if self.limit is None else max(0, self.limit - len(self.step_ids))

    @property
    def truncated(self) -> bool:
        """True when the trace holds fewer entries than executed."""
        return len(self.step_ids) < self.entries

    def arrays(self):
        """(step ids, start cycles) of the traced entries (the first `limit`)."""
        return np.frombuffer(self.step_ids, np.int64).copy(), np.frombuffer(self.start_cycles, np.int64).copy()

    def __len__(self):
        return self.entries


DEFAULT_TRACE_LIMIT = 1 << 20  # entries an Engine traces unless told otherwise (16 MiB)
# An engine left to choose (compiled=None) walks a run in Python while the compiled step loop
# would first have to be compiled (about 8 s of CPU on a new install) and the run executes at most
# this many steps: the README's MLP executes 60, which take 0.45 s walked where the compiled loop
# takes 0.16 s. The engine's next run compiles the loop.
WALK_BEFORE_COMPILE_STEPS = 5_000


def default_compiled() -> bool:
    """Whether engines use the compiled step loop unless told: yes, unless IPU_SIM_COMPILED=0
    (the Python walk gives Python tracebacks from kernels and is the reference)."""
    return env.compiled()


def default_threads() -> int:
    """Host threads of the compiled step loop: IPU_SIM_THREADS, else the threads Numba has."""
    return env.threads() or max(1, numba.get_num_threads())


class Engine:
    """Runs an Executable. `replicas` copies of the program run in lock step on their own memory."""

    def __init__(self, executable: Executable, replicas: int = 1, log_steps: bool = True,
                 trace_limit: int | None = DEFAULT_TRACE_LIMIT, communicator=None, compiled: bool | None = None,
                 threads: int | None = None, blas_threads: int | None = None, huge_pages: bool | None = None):
        """communicator: which of a run's replicas this engine holds and how collectives reach the
        others (`collectives.Communicator`; default: all `replicas` are here).

        compiled: run the straight-line parts of programs in the compiled step loop
        (ipu/native.py); False walks every step in Python (the reference: memory, cycles and the
        step log are identical); default (None) IPU_SIM_COMPILED (on unless "0"), with a small
        first run walked in Python while the step loop is not compiled yet
        (WALK_BEFORE_COMPILE_STEPS: a short script then never waits for that compile).
        threads: host threads for large compute sets and exchanges in the compiled loop (results
        are identical on any count); default IPU_SIM_THREADS, else Numba's thread count.
        blas_threads: threads of the kernels' BLAS while a run runs (ipu/blas.py; 0 leaves it alone);
        default IPU_SIM_BLAS_THREADS, read at each run.
        huge_pages: tile memory on transparent huge pages where the host has them (ipu/hostmem.py);
        default IPU_SIM_HUGE_PAGES."""
        if replicas < 1:
            raise ValueError("replicas must be >= 1")
        self.exe = executable
        self.target = executable.target
        self.replicas = int(replicas)
        self.communicator = communicator
        self.log_steps = log_steps
        self.compiled = default_compiled() if compiled is None else bool(compiled)
        self._may_walk_first = compiled is None
        self._plan: Plan | None = None  # native.Plan of the executable, once a compiled run needs it
        self.threads = default_threads() if threads is None else int(threads)
        if self.threads < 1:
            raise ValueError(f"threads must be >= 1, not {threads}")
        nbytes = -(-max(executable.total_bytes, 8) // 8) * 8  # whole 8-byte words: views of any type fit
        if blas_threads is not None and blas_threads < 0:
            raise ValueError(f"blas_threads must be >= 0 (0 leaves BLAS alone), not {blas_threads}")
        self.blas_threads = blas_threads
        self.memory = zeroed_memory(self.replicas, nbytes, huge_pages)
        self._views: list[dict] = [dict() for _ in range(self.replicas)]
        self._streams: dict[str, object] = {}
        self._stream_pos: dict[str, int] = {}
        self.cycles = 0
        self.log = StepLog(len(executable.steps), trace_limit)
        self.runs = 0
        # streaming memory (remote buffers) of every replica, in host memory (ipu/remote.py)
        self.streaming = StreamingMemory(executable.remote_buffers, self.replicas)
        for s in executable.streams.values():
            if s.callback is not None:  # host callback streams own a buffer
                self.connect_stream(s.name, np.zeros(s.shape, s.dtype.numpy))
        for v in executable.variables.values():
            if v.initial is not None and v.id in executable.layouts:
                for r in range(self.replicas):
                    self.write_tensor(v, v.initial, replica=r)

    # -- memory views -----------------------------------------------------------------------
    def view(self, r: int, storage: np.dtype):
        """Replica r's memory as an array of `storage` (a type's storage dtype, or a word type)."""
        d = self._views[r]
        v = d.get(storage)
        if v is None:
            v = self.memory[r].view(storage)
            d[storage] = v
        return v

    # -- host access ----------------------------------------------------------------------------
    def _layout(self, var: Variable):
        if not isinstance(var, Variable):
            var = var.variable
        L = self.exe.layouts.get(var.id)
        if L is None:
            if var.numel == 0:
                return var, None
            raise IpuError(f"tensor {var.name!r} is not in this executable (unused temporaries get no memory)")
        return var, L

    def _blocks_in_memory(self, view, replica: int) -> list | None:
        """For a view kept as IndexBlocks, each block's variable elements as a strided NumPy view
        of the replica's tile memory (reads and writes go straight there); None when the view is
        not kept so or a block's elements are not all inside one piece of the layout."""
        blocks = view.blocks
        if blocks is None:
            return None
        var, L = self._layout(view.variable)
        if L is None or blocks.size == 0:
            return None
        k = np.searchsorted(L.starts, blocks.p0, side="right") - 1
        if (k < 0).any() or (blocks.p0 + blocks.extents() > L.stops[np.maximum(k, 0)]).any():
            return None
        dt, isz = var.dtype.numpy, var.dtype.itemsize
        mem = self.memory[replica]
        first = L.addr[k] + (blocks.p0 - L.starts[k]) * isz  # byte address of each block's p0
        extents = blocks.extents()
        out = []
        for b, (_, _, _, ps, box) in enumerate(blocks.blocks()):
            a = int(first[b])
            flat = mem[a:a + int(extents[b]) * isz].view(dt)
            out.append(IndexBlocks.at(flat, 0, ps, box))
        return out

    def read_tensor(self, var, replica: int = 0) -> np.ndarray:
        """A copy of a variable's contents as a NumPy array of its shape; of a view (a variable
        laid out by its consumer: popxl/lowering/creators.py), the view's elements in its shape."""
        if _is_view(var):
            blocks = self._blocks_in_memory(var, replica)
            if blocks is not None:  # block by block from tile memory, with no per-element index
                out = np.empty(var.numel, var.dtype.numpy)
                for (e0, es, _, _, box), mem in zip(var.blocks.blocks(), blocks):
                    IndexBlocks.at(out, e0, es, box)[...] = mem
                return out.reshape(var.shape)
            return self.read_tensor(var.variable, replica).reshape(-1)[var.flat_index()].reshape(var.shape)
        var, L = self._layout(var)
        out = np.empty(var.numel, var.dtype.numpy)
        if L is not None:
            isz = var.dtype.itemsize
            copy_runs(self.memory[replica], out.view(np.uint8), L.addr, L.starts * isz, (L.stops - L.starts) * isz)
        return out.reshape(var.shape)

    def write_tensor(self, var, data, replica: int | None = None) -> None:
        """Write host data (converted to the tensor's type) into a variable on all or one replica;
        into a view, its elements (the rest of the variable keeps its contents)."""
        if _is_view(var):
            arr = np.asarray(data)
            if arr.size != var.numel:
                raise ValueError(f"cannot write data of shape {arr.shape} into {var.name!r} of shape {var.shape}")
            vals = np.ascontiguousarray(arr, dtype=var.dtype.numpy).reshape(-1)
            if var.blocks is not None and self._blocks_in_memory(var, 0) is not None:
                for r in (range(self.replicas) if replica is None else [replica]):  # block by block
                    for (e0, es, _, _, box), mem in zip(var.blocks.blocks(), self._blocks_in_memory(var, r) or []):
                        mem[...] = IndexBlocks.at(vals, e0, es, box)
                return
            if var.numel == var.variable.numel:  # a permutation of the variable (creators.py)
                whole = np.empty(var.numel, var.dtype.numpy)
                whole[var.flat_index()] = vals
                self.write_tensor(var.variable, whole, replica)
                return
            for r in (range(self.replicas) if replica is None else [replica]):
                whole = self.read_tensor(var.variable, r).reshape(-1)
                whole[var.flat_index()] = vals
                self.write_tensor(var.variable, whole, r)
            return
        var, L = self._layout(var)
        arr = np.asarray(data)
        if arr.size != var.numel:
            raise ValueError(
                f"cannot write data of shape {arr.shape} into {var.name!r} of shape {var.shape}"
            )
        arr = np.ascontiguousarray(arr, dtype=var.dtype.numpy).reshape(-1)
        if L is None:
            return
        isz = var.dtype.itemsize
        reps = range(self.replicas) if replica is None else [replica]
        for r in reps:
            copy_runs(arr.view(np.uint8), self.memory[r], L.starts * isz, L.addr, (L.stops - L.starts) * isz)

    def connect_stream(self, name: str, buffer) -> None:
        """Give a host stream its host buffer: an array of the stream's shape (used on every
        transfer) or with one extra leading dimension (one element per transfer, in order).
        With replicas > 1 a further leading replica dimension may come first."""
        if name not in self.exe.streams:
            raise StreamError(f"no stream named {name!r}; streams are {sorted(self.exe.streams)}")
        s = self.exe.streams[name]
        if s.to_device:
            buf = np.asarray(buffer)
        else:
            buf = buffer
            if not isinstance(buf, np.ndarray):
                raise StreamError(f"device-to-host stream {name!r} needs a writable NumPy array")
        if buf.dtype != s.dtype.numpy:
            raise StreamError(f"stream {name!r} carries {s.dtype.name}, the buffer is {buf.dtype}")
        per = s.numel
        if per == 0 and buf.size:
            raise StreamError(f"stream {name!r} moves {s.shape} (no elements) per transfer; its buffer must be "
                              f"empty too, not of shape {buf.shape}")
        if per and buf.size % per:
            raise StreamError(f"stream {name!r} moves {s.shape} per transfer; a buffer of shape {buf.shape} does not "
                              "divide into those")
        self._streams[name] = buf
        self._stream_pos[name] = 0

    def stream_buffer(self, s):
        """(the connected buffer flattened, elements per replica, whether each replica has its
        own part, whether the buffer is C-contiguous) of stream `s`, or None when it is not
        connected. Element k of replica r is flat[(r * per_replica + k) * numel:][:numel], with
        r = 0 when the replicas share the buffer."""
        buf = self._streams.get(s.name)
        if buf is None:
            return None
        flat = buf.reshape(-1)
        if s.numel == 0:  # every element is empty: one shared (empty) element
            return flat, 1, False, bool(buf.flags.c_contiguous)
        total = flat.size // s.numel
        own = (self.replicas > 1 and buf.ndim > len(s.shape) and buf.shape[0] == self.replicas
               and total % self.replicas == 0)
        return flat, total // (self.replicas if own else 1), own, bool(buf.flags.c_contiguous)

    def stream_element(self, s, r: int) -> np.ndarray:
        """The host element the next transfer of stream `s` moves for replica r (a view of the
        connected buffer)."""
        layout = self.stream_buffer(s)
        if layout is None:
            raise StreamError(f"stream {s.name!r} is not connected: call connect_stream({s.name!r}, array) "
                              "before run()")
        flat, per_replica, own, _ = layout
        k = self._stream_pos[s.name] % per_replica
        base = ((r if own else 0) * per_replica + k) * s.numel
        return flat[base:base + s.numel]

    def stream_position(self, s) -> int:
        """Transfers of stream `s` so far in this run."""
        return self._stream_pos.get(s.name, 0)

    def advance_stream(self, s, transfers: int = 1) -> None:
        """Count transfers of stream `s` (the next moves the following element)."""
        self._stream_pos[s.name] = self._stream_pos.get(s.name, 0) + int(transfers)

    # -- running --------------------------------------------------------------------------------
    def run(self, program: int = 0) -> int:
        """Run program `program`; returns the cycles it took."""
        if not 0 <= program < len(self.exe.programs):
            raise IndexError(f"program {program} does not exist; this executable has {len(self.exe.programs)}")
        for k in self._stream_pos:
            self._stream_pos[k] = 0
        start = self.cycles
        if self.compiled and not self._walks_first(program):
            self._plan = Plan.of(self.exe)
            root = self._plan.root(program)
        else:
            root = self.exe.programs[program]
        # the engine's threads, not BLAS's, share the host (ipu/blas.py)
        with single_threaded_kernel_blas.limited(self.blas_threads):
            self.cycles = self.walk(root, list(range(self.replicas)), self.cycles)
        self.runs += 1
        return self.cycles - start

    def _walks_first(self, program: int) -> bool:
        """Whether this run walks in Python rather than compile the step loop (see __init__)."""
        if not self._may_walk_first or self.runs or self.exe.native is not None or interpreted.ready(run_ops):
            return False
        return self._most_steps(self.exe.programs[program], {}) <= WALK_BEFORE_COMPILE_STEPS

    def _most_steps(self, node, functions: dict) -> int:
        """The most steps a run of `node` can execute (loops counted in full, the longest arm of a
        branch)."""
        match node:
            case StepRef():
                return 1
            case Seq(items):
                return sum(self._most_steps(n, functions) for n in items)
            case Loop(count, body):
                return count * self._most_steps(body, functions)
            case CallRef(function):
                if function not in functions:
                    functions[function] = self._most_steps(self.exe.functions[function], functions)
                return functions[function]
            case Branch(_, _, then, otherwise):
                return 1 + max(self._most_steps(then, functions), self._most_steps(otherwise, functions))
            case MultiBranch(_, _, arms, default):
                return 1 + max([self._most_steps(n, functions) for _, n in arms]
                               + [self._most_steps(default, functions)])
        raise IpuError(f"corrupt program node {node!r}")

    def walk(self, node, reps, clock):
        """Run a node tree (ipu.compile's, or a plan's with compiled segments) on replicas `reps`
        from cycle `clock`, step by step in Python; returns the cycle it ends at."""
        match node:
            case StepRef(step):
                return self._run_step(self.exe.steps[step], reps, clock)
            case Segment(index):  # a compiled segment (ipu/native.py)
                return self._plan.run_segment(self, index, reps, clock)
            case Seq(items):
                for n in items:
                    clock = self.walk(n, reps, clock)
                return clock
            case Loop(count, body):
                for _ in range(count):
                    clock = self.walk(body, reps, clock)
                return clock
            case CallRef(function):
                return self.walk(self.exe.functions[function], reps, clock)
            case Branch(step, condition, then, otherwise):
                return self._branch(step, condition, lambda v: then if v else otherwise, reps, clock)
            case MultiBranch(step, condition):
                return self._branch(step, condition, lambda v: node.arm(int(v)), reps, clock)
        raise IpuError(f"corrupt program node {node!r}")

    def _branch(self, step_id, condition, choose, reps, clock):
        """Decide an If / Switch on every replica (the decision costs its step's cycles), then run
        each chosen arm on the replicas that chose it; ends when the slowest arm ends."""
        step = self.exe.steps[step_id]
        if self.log_steps:
            self.log.add(step.id, clock)
        clock += step.cycles
        storage = condition.storage
        values = [self.view(r, storage)[condition.element] for r in reps]
        values = [int(v["bits"]) if storage.names else v for v in values]
        by_arm: dict[int, tuple] = {}
        for r, v in zip(reps, values):
            arm = choose(v)
            by_arm.setdefault(id(arm), (arm, []))[1].append(r)
        end = clock
        for arm, rs in by_arm.values():
            end = max(end, self.walk(arm, rs, clock))
        return end

    def _run_step(self, step, reps, clock):
        if self.log_steps:
            self.log.add(step.id, clock)
        if step.payload is not None:  # what the step's program kind runs (ipu/kinds.py)
            run_payload(self, step.payload, reps)
        return clock + step.cycles

    # -- streaming memory -------------------------------------------------------------------------
    def read_remote(self, buffer, entry: int | None = None, replica: int = 0) -> np.ndarray:
        """Entry `entry` of a remote buffer (by name or ipu.RemoteBuffer), or all its entries."""
        return self.streaming.read(buffer, entry, replica)

    def write_remote(self, buffer, data, entry: int | None = None, replica: int | None = None) -> None:
        """Write one entry (or all entries) of a remote buffer on every replica or one."""
        self.streaming.write(buffer, data, entry, replica)

    # -- results --------------------------------------------------------------------------------
    def executed_steps(self):
        """(step ids, start cycles) of every executed step, in order. Refused when the trace
        kept only the first `log.limit` entries: `step_counts()` covers every run."""
        if self.log.truncated:
            raise IpuError(
                f"the step trace kept {len(self.log.step_ids):,} of {self.log.entries:,} executed steps "
                f"(trace limit {self.log.limit}; a Session traces only with profiling on): use "
                f"engine.step_counts() for how often each step ran, or a larger Engine(trace_limit=...)")
        return self.log.arrays()

    def step_counts(self) -> np.ndarray:
        """How many times each step (by id) has run, over all runs."""
        n = len(self.exe.steps)
        c = self.log.counts
        return c[:n].copy() if c.size >= n else np.concatenate([c, np.zeros(n - c.size, np.int64)])

    def cycles_by_kind(self) -> dict:
        counts = self.step_counts()
        out: dict[str, int] = {}
        for i in np.flatnonzero(counts):
            s = self.exe.steps[i]
            out[s.kind] = out.get(s.kind, 0) + int(counts[i]) * s.cycles
        return out

    def reset_cycles(self) -> None:
        self.cycles = 0
        self.log = StepLog(len(self.exe.steps), self.log.limit)


def _is_view(t) -> bool:
    """True for a view of a variable through an index (not the variable itself, nor a reshape)."""
    return not isinstance(t, Variable) and not t.is_identity
