"""Plans for the compiled step loop: a program's straight-line parts as op tables.

The engine's Python walk over the node tree (`Engine(..., compiled=False)`) is the readable
reference. With `compiled=True` (the default) every maximal part of a program whose steps need
no Python (compute sets, exchanges, syncs, code loads, host streams without callbacks, loops,
calls and If / Switch of those) becomes a *segment*: a table of ops that ipu/step_loop.py's
`run_ops` walks in compiled code, calling the codelet kernels, copying the exchange tables, moving
stream elements and deciding branches without returning to Python. Stream callbacks, streaming
memory and collectives stay in Python between segments. A segment is walked in Python instead
when a stream it moves is not connected (or its device-to-host buffer is not contiguous), so
errors and results are the Python walk's, and when it branches and several replicas run it (they
may take different sides; the Python walk splits them).

A `Plan` (one per executable) holds the segments and the tables they share: kernel groups with
their kernels' addresses, copy tables as merged runs, host transfers and branch conditions.

Copies: an exchange's runs in destination order with neighbours merged (`copytables.merged_runs`), each
copied by `copy_runs`. (Grouping a multicast's destinations behind one read of its source was measured
slower: the source stays in cache either way, and destination order keeps the writes sequential.)
Where a multicast of short runs writes the same sequence of sources into several blocks (a matmul
operand gathered to the ~16 tiles that use it), the first such block is copied run by run and each
repeat in one run from it (`copytables.replicated_blocks`: a second table after the first; the same bytes).
The merged runs of all tables are one flat int32 table (int64 only for a memory of 2 GiB or more),
and each executable's CopyTable is handed its slice (`CopyTable.share`), so the Python walk copies
the same runs and a model's copy tables are held once (BERT-base, 4 layers: 446 MiB, not 447 + 892).

Under the floor (ipu/forwarding.py): where an exchange writes a temporary that only the compute
step right after it (syncs and other exchanges between) reads, its runs that every reading vertex
reads from inside one run are not copied, and those vertices read the run's source instead (a
kernel group with redirected offsets, a table entry without the skipped runs): the same values
from the same bytes, with the walk's cycles, step log and memory plan; only the skipped (dead)
destination bytes differ from the walk's memory (`Plan.skipped_runs`). `FORWARD = False` turns it off.

Threads: the vertices of one kernel group are independent by BSP construction, and the runs of
an exchange write disjoint bytes, so a large group or table is marked to be split into one
contiguous part per thread. Groups whose vertices' memory overlaps (a vertex reading what another
writes) and tables whose destinations overlap are not split.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass

import numpy as np

from . import compile_ahead, forwarding, hostmem
from .codelet import IN, INOUT, OUT
from .copytables import CopyTable, merged_runs, replicated_blocks
from .errors import IpuError
from .kinds import program_kind_of_payload
from .nodes import Branch, CallRef, Loop, MultiBranch, Segment, Seq, StepRef
from .step_loop import (BIG, BOOL, COPY, END, FLOAT, IF, JUMP, KERNEL, LOOP, MAX_DEPTH, MAX_FIELDS, SIGNED, SMALL,
                        SPLIT, STAGED, STEP, STREAM, SWITCH, UNSIGNED, kernel_address, run_ops)

__all__ = ["MAX_FIELDS", "PARALLEL_MIN_BYTES", "PARALLEL_MIN_ELEMENTS", "LoopOps", "Plan", "SegmentTable"]

# split a group / table over the threads only above this much work: below it, waking the other
# threads and waiting for the slowest costs more than it saves. Measured on a shared 2-vCPU host
# (MNIST step, batch 128, median of 64 runs): thresholds of 16 K elements / 128 KiB made two
# threads 1.6x slower than one; at 1 M elements / 4 MiB two threads were as fast as one. Once the
# kernels got cheaper per vertex, the batch 32 step's two 1.1 M-element AMP groups (~0.2 ms each)
# no longer paid for the split (1 thread vs 2, alternating runs in one process: best 1.92 vs
# 2.08 ms, 10th percentile 2.28 vs 2.41), while the batch 128 step's 3 M-element groups still do
# (4.24 vs 4.66 ms): 2 M elements. A 1024^3 matmul (tens of MB per exchange) splits throughout.
PARALLEL_MIN_ELEMENTS = 1 << 21
PARALLEL_MIN_BYTES = 1 << 22
# exchanges into a buffer only the next compute set reads feed it directly (ipu/forwarding.py)
FORWARD = True
FORWARD_PAST = 3  # compute steps an exchange's reader may wait behind (an operand's transposes)


# ------------------------------------------------------------------------------------------------
# plans: segments of a program and the tables they share


def _group_parallel(group) -> bool:
    """True when no vertex of the group reads or writes bytes another vertex writes."""
    nv = group.off.shape[0]
    if nv < 2:
        return False
    fields = group.codelet.fields
    wl: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])  # written: starts, ends, vertex
    rl: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])  # read
    vid = np.arange(nv, dtype=np.int64)
    for j, (f, t) in enumerate(zip(fields, group.types)):
        isz = t.itemsize
        s = group.off[:, j] * isz
        e = s + group.cnt[:, j] * isz
        keep = e > s
        for lists, used in ((wl, f.direction in (OUT, INOUT)), (rl, f.direction in (IN, INOUT))):
            if used:
                for lst, arr in zip(lists, (s, e, vid)):
                    lst.append(arr[keep])
    if not wl[0]:
        return True
    ws, we, wv = (np.concatenate(lst) for lst in wl)
    o = np.argsort(ws, kind="stable")
    ws, we, wv = ws[o], we[o], wv[o]
    if ws.size > 1 and (ws[1:] < we[:-1]).any():
        return False  # two written intervals overlap (even of one vertex: keep it simple)
    if rl[0]:
        rs, re_, rv = (np.concatenate(lst) for lst in rl)
        lo = np.searchsorted(we, rs, side="right")  # first write ending after the read starts
        hi = np.searchsorted(ws, re_, side="left")  # writes starting before the read ends
        hit = hi > lo
        if hit.any():
            if (hi[hit] - lo[hit] > 1).any() or (wv[lo[hit]] != rv[hit]).any():
                return False
    return True


def _condition_reading(storage: np.dtype, two_way: bool):
    """How the compiled loop reads a branch condition of this storage type, or None when only
    the Python walk reads it as it should (a float Switch: Python truncates, and refuses NaN)."""
    if storage.names:  # float16: the Python walk uses its bits
        return UNSIGNED
    if storage.kind == "f":
        return FLOAT if two_way and storage.itemsize == 4 else None
    return {"i": SIGNED, "u": UNSIGNED, "b": BOOL}.get(storage.kind)


def _runs_storage(exe):
    """Room for the merged runs of every copy table of the executable (at most its runs, as merging
    only joins them): int32 offsets, int64 for a memory of 2 GiB or more (a run lies inside the
    memory). np.empty leaves the pages untouched, so the room merging saves costs no host RAM."""
    tables = {id(s.payload): s.payload for s in exe.steps if isinstance(s.payload, CopyTable) and not s.payload.staged}
    runs = sum(t.nbytes.size for t in tables.values())
    dtype = np.int64 if exe.total_bytes >= 2 ** 31 else np.int32
    return tuple(np.empty(runs, dtype) for _ in range(3))


_PLAN_LOCK = threading.RLock()
RELEASE_BYTES = 1 << 26  # tables' runs dropped between trims of the host heap (hostmem.release_freed)


class LoopOps:
    """What a program kind lowers its step payloads into (`ProgramKind.lower`): the compiled step
    loop's fixed op set. Each method returns one op (a row of a segment's table), or None when
    that piece cannot run in compiled code (then the step runs in Python)."""

    def __init__(self, plan: "Plan"):
        self._plan = plan

    def kernel(self, group):
        """Run a kernel group (`compute.KernelGroup`: codelet, field types, per-vertex offsets,
        counts and parameters); None when its kernel cannot be called from compiled code."""
        k = self._plan._group(group)
        return None if k is None else (KERNEL, k, 0)

    def copy(self, table):
        """Copy a table of byte runs (`copytables.CopyTable`: src_off, dst_off, nbytes, staged)
        within each replica's memory; a staged table reads every source before any write."""
        if table.staged:
            return (STAGED, self._plan._staged_table(table), 0)
        k = self._plan._table(table, regroup=False)
        if self._plan._table_parts[k] != 1:
            raise IpuError("internal: a copy table regrouped for an exchange is lowered as one op")
        return (COPY, k, 0)

    def exchange(self, table) -> list:
        """The ops of an exchange's copy table: `copy`, or two tables one after the other when
        its multicast repeats whole blocks (`replicated_blocks`: the runs from the sources, then
        each repeated block copied from the first in one run)."""
        if table.staged:
            return [self.copy(table)]
        k = self._plan._table(table, regroup=True)
        return [(COPY, k + i, 0) for i in range(self._plan._table_parts[k])]

    def stream(self, transfer):
        """Move the next element of a host stream (`streams.HostTransfer`: stream, to_device,
        src_off, dst_off, nbytes) between the connected host buffer and tile memory."""
        return (STREAM, self._plan._host(transfer), 0)


@dataclass(eq=False)
class SegmentTable:
    """A compiled part of a program: its op table, the steps one pass executes, the nodes it
    stands for (walked in Python when a stream it uses is not ready for compiled code, or when it
    branches and several replicas run it) and the indices of the host streams it moves."""

    ops: np.ndarray
    steps: int  # at most this many steps per pass (branches take one side)
    nodes: tuple
    streams: tuple
    branches: bool  # it decides If / Switch: compiled only for one replica (several may split)


class Plan:
    """The segments of one executable's programs and the tables they share. Built once per
    executable (on its first compiled run) and reused by every engine that runs it; engines in
    several threads may share it (building is locked; running only reads)."""

    @staticmethod
    def of(exe) -> "Plan":
        """The executable's plan (`Executable.native`), made on first use."""
        with _PLAN_LOCK:
            if exe.native is None:
                exe.native = Plan(exe)
            return exe.native

    def __init__(self, exe):
        self.exe = exe
        self.segments: list = []
        self.roots: dict = {}  # program index -> node tree with segments
        self._group_index: dict = {}
        self._groups: list = []  # (group, address, parallel)
        self._table_index: dict = {}
        self._tables: list = []  # (first run, end run, parallel): a slice of self._runs
        self._table_objects: list = []  # the CopyTable of each, which shares its slice
        self._table_parts: dict = {}  # first part's index -> parts (2: regrouped by replicated_blocks)
        self._runs = _runs_storage(exe)  # every table's merged runs, one after another
        self._used = 0  # runs of self._runs in use
        self._dropped = 0  # bytes of tables' own runs dropped since the heap was last trimmed
        self._dropped_total = 0  # and in all (small programs never trim: their heap stays as it was)
        self._staged_index: dict = {}
        self._staged: list = []
        self._host_index: dict = {}
        self._hosts: list = []  # (HostTransfer, stream index)
        self._stream_index: dict = {}
        self._streams: list = []  # HostStream
        self._idle_streams = None
        self._conds: list = []  # (byte offset, kind, size) of branch conditions
        self._switches: list = []  # ({case value: pc}, default pc)
        self._capable: dict = {}
        self._transformed: dict = {}
        self._lowered: dict = {}  # step id -> its payload's ops, or None: it runs in Python
        self._loop_ops = LoopOps(self)
        self._arrays = None
        # exchanges feeding the next compute set (ipu/forwarding.py)
        self._chain: list = []  # (step id, its first and end op row, its table) since the last other step, and
        # (compute step id, None, None, what it writes) for a compute step an exchange's reader waits behind
        self._forwarded: dict = {}  # (compute step, chain's steps) -> the rows it rewrites
        self._reduced: dict = {}  # table -> its table without the skipped runs
        self._skipped: list = []  # where the skipped runs are in the run table: (first, end)

    # -- which nodes run compiled
    def _lower(self, step):
        """The ops of a step's payload (after its STEP op), or None when it runs in Python: what
        its program kind's `lower` says; a payload its kind does not run lets time pass only."""
        if step.id in self._lowered:
            return self._lowered[step.id]
        p = step.payload
        ops = ()
        if p is not None:
            kind = program_kind_of_payload(p)
            if kind.run is not None:
                got = kind.lower(self._loop_ops, p) if kind.lower is not None else None
                ops = None if got is None else tuple(got)
        self._lowered[step.id] = ops
        return ops

    def _group(self, g):
        k = self._group_index.get(id(g))
        if k is None:
            if compile_ahead.pending:  # a worker may be compiling the kernel (ipu/compile_ahead.py)
                compile_ahead.claim(g.codelet.kernel(), g.types)
            addr = kernel_address(g)
            if addr is None:
                self._group_index[id(g)] = -1
                return None
            k = self._group_index[id(g)] = len(self._groups)
            big = int(g.cnt.sum()) >= PARALLEL_MIN_ELEMENTS
            self._groups.append((g, addr, (SPLIT if _group_parallel(g) else BIG) if big else SMALL))
        return None if k < 0 else k

    def capable(self, node) -> bool:
        """Whether a node can run in the compiled loop as a whole."""
        key = id(node)
        hit = self._capable.get(key)
        if hit is not None:
            return hit
        match node:
            case StepRef(step):
                ok = self._lower(self.exe.steps[step]) is not None
            case Seq(items):
                ok = all([self.capable(n) for n in items])
            case Loop(_, body):
                ok = self.capable(body)
            case CallRef(function):
                ok = self.capable(self.exe.functions[function])
            case Branch(_, condition, then, otherwise):
                ok = (_condition_reading(condition.storage, True) is not None
                      and all([self.capable(then), self.capable(otherwise)]))
            case MultiBranch(_, condition, arms, default):
                ok = (_condition_reading(condition.storage, False) is not None
                      and all([self.capable(n) for n in [*(a for _, a in arms), default]]))
            case _:
                ok = False
        self._capable[key] = ok
        return ok

    # -- segment tables
    def _emit(self, node, ops, depth):
        """Append the ops of a capable node; returns how many steps one pass executes."""
        match node:
            case StepRef(step_id):
                step = self.exe.steps[step_id]
                ops.append((STEP, step.id, step.cycles))
                at = len(ops)
                ops.extend(self._lower(step))
                self._follow(step, ops, at)
                return 1
            case Seq(items):
                return sum(self._emit(n, ops, depth) for n in items)
        self._chain = []  # control flow: no exchange feeds a compute set across it
        n = self._emit_control(node, ops, depth)
        self._chain = []
        return n

    def _emit_control(self, node, ops, depth):
        match node:
            case Loop(count, body):
                if depth >= MAX_DEPTH:
                    raise IpuError(f"loops nested deeper than {MAX_DEPTH}")
                start = len(ops)
                ops.append([LOOP, count, 0])
                n = self._emit(body, ops, depth + 1)
                ops[start][2] = len(ops)
                ops.append((END, start, 0))
                return n * count
            case CallRef(function):
                return self._emit(self.exe.functions[function], ops, depth)
            case Branch(step_id, condition, then, otherwise):
                step = self.exe.steps[step_id]
                ops.append((STEP, step.id, step.cycles))  # deciding costs its cycles first, as in Engine.walk
                cond = self._condition(condition, True)
                at = len(ops)
                ops.append([IF, cond, 0])
                most = self._emit(then, ops, depth)
                jump = len(ops)
                ops.append([JUMP, 0, 0])
                ops[at][2] = len(ops)
                most = max(most, self._emit(otherwise, ops, depth))
                ops[jump][1] = len(ops)
                return 1 + most
            case MultiBranch(step_id, condition, arms, default):
                step = self.exe.steps[step_id]
                ops.append((STEP, step.id, step.cycles))
                cond = self._condition(condition, False)
                w = len(self._switches)
                ops.append((SWITCH, cond, w))
                cases, jumps, most = {}, [], 0
                for value, arm in arms:
                    cases[int(value)] = len(ops)
                    most = max(most, self._emit(arm, ops, depth))
                    jumps.append(len(ops))
                    ops.append([JUMP, 0, 0])
                self._switches.append((cases, len(ops)))
                most = max(most, self._emit(default, ops, depth))
                for j in jumps:
                    ops[j][1] = len(ops)
                return 1 + most
        raise IpuError(f"internal: node {node!r} cannot run compiled")

    def _condition(self, c, two_way: bool) -> int:
        k = len(self._conds)
        self._conds.append((c.byte_offset, _condition_reading(c.storage, two_way), c.storage.itemsize))
        return k

    def _table(self, t, regroup: bool = False) -> int:
        """The index of table `t`'s first part: one part, or two with `regroup`
        (`replicated_blocks`: the runs from the sources, then the repeated blocks), which
        LoopOps.exchange emits one after the other."""
        k = self._table_index.get(id(t))
        if k is None:
            first = getattr(t, "ordered", 0)
            if first:  # already regrouped (by another plan of this table): keep the order
                s, d, n = t.src_off, t.dst_off, t.nbytes
                disjoint = True
            else:  # (under the plan lock: no share between)
                s, d, n, disjoint = merged_runs(t.src_off, t.dst_off, t.nbytes)
                again = replicated_blocks(s, d, n) if disjoint and regroup else None
                if again is not None:
                    s, d, n, first = again
            a, b = self._used, self._used + n.size
            self._reserve(b)
            for flat, part in zip(self._runs, (s, d, n)):
                flat[a:b] = part
            self._used = b
            k = self._table_index[id(t)] = len(self._tables)
            for lo, hi in ((a, a + first), (a + first, b)) if first else ((a, b),):
                big = int(n[lo - a:hi - a].sum()) >= PARALLEL_MIN_BYTES
                self._tables.append((lo, hi, (SPLIT if disjoint and hi - lo > 1 else BIG) if big else SMALL))
                self._table_objects.append(t)
            self._table_parts[k] = 2 if first else 1
            if isinstance(t, CopyTable):  # it reads its slice from now on (its own runs are dropped): held once
                src, dst, nbytes = (flat[a:b] for flat in self._runs)
                t.share(src, dst, nbytes, first=first)
            self._dropped += sum(x.nbytes for x in (s, d, n))
            self._dropped_total += sum(x.nbytes for x in (s, d, n))
            if self._dropped >= RELEASE_BYTES:  # their pages back to the OS as the slices fill
                hostmem.release_freed()
                self._dropped = 0
        return k

    def _reserve(self, runs: int) -> None:
        """Room for `runs` merged runs: a larger storage when the executable's CopyTables did not
        foretell them (a program kind's own tables), with every CopyTable handed its new slice."""
        have = self._runs[0]
        if runs <= have.size:
            return
        new = tuple(np.empty(max(runs, 2 * have.size), have.dtype) for _ in range(3))
        for flat, old in zip(new, self._runs):
            flat[:self._used] = old[:self._used]
        self._runs = new
        for k, parts in self._table_parts.items():
            t = self._table_objects[k]
            if isinstance(t, CopyTable):
                a, b = self._tables[k][0], self._tables[k + parts - 1][1]
                src, dst, nbytes = (flat[a:b] for flat in new)
                t.share(src, dst, nbytes, first=self._tables[k][1] - a if parts == 2 else 0)

    def _host(self, x) -> int:
        k = self._host_index.get(id(x))
        if k is None:
            si = self._stream_index.get(x.stream.name)
            if si is None:
                si = self._stream_index[x.stream.name] = len(self._streams)
                self._streams.append(x.stream)
            k = self._host_index[id(x)] = len(self._hosts)
            self._hosts.append((x, si))
        return k

    def _staged_table(self, t) -> int:
        k = self._staged_index.get(id(t))
        if k is None:
            k = self._staged_index[id(t)] = len(self._staged)
            self._staged.append(t)
        return k

    # -- exchanges feeding the next compute set (ipu/forwarding.py)
    def _follow(self, step, ops, at):
        """Track the exchanges since the last other step; at a compute step, forward them."""
        if step.kind == "exchange" and all(r[0] == COPY for r in ops[at:]) and len(ops) > at:
            self._chain.append((step.id, at, len(ops), int(ops[at][1])))
            return
        if (step.kind == "compute" and self._chain and FORWARD and self.exe.forwarding is not None
                and len(ops) > at and all(r[0] == KERNEL for r in ops[at:])):
            self._forward(step, ops, at)
            fw = self.exe.forwarding.readers
            passed = {c[0] for c in self._chain if c[1] is None} | {step.id}
            if len(passed) <= FORWARD_PAST and any(c[1] is not None and fw.get(c[0], step.id) not in passed
                                                   for c in self._chain):
                # an exchange read by a later compute step (an operand's transpose runs between):
                # the chain goes on, this step's writes checked against the sources it skips to
                groups = [self._groups[int(r[1])][0] for r in ops[at:]]
                self._chain.append((step.id, None, None, forwarding.written(groups)))
                return
        if step.kind != "sync":
            self._chain = []

    def _forward(self, step, ops, at):
        """Rewrite the last copy row of each exchange of the chain and this compute step's kernel
        rows where `forwarding.forward` skips runs (the same rows: jump targets stay put)."""
        key = (step.id, tuple(c[0] for c in self._chain))
        done = self._forwarded.get(key)
        if done is None:
            done = self._forwarded[key] = self._plan_forward(step, ops[at:])
        for copy, i, row in done:
            ops[self._chain[i][2] - 1 if copy else at + i] = row

    def _plan_forward(self, step, kernel_rows) -> list:
        """The rows a compute step fed by the exchanges of self._chain rewrites: [(a copy row?,
        its exchange's index in the chain or the kernel row's, the new row)]. A table forwarded
        gets its skipped runs moved to its end and a table entry without them (the CopyTable
        keeps all its runs, in that order: the Python walk copies everything)."""
        fw = self.exe.forwarding.readers
        chain: list = []
        where: list = []
        for x, row, _, k in self._chain:
            if row is None:  # a compute step in between: what it writes must not be a skipped run's source
                chain.append((False, np.zeros(0, np.int64), *k, 0))
                where.append(None)
                continue
            parts = self._table_parts[k]
            lo, hi = self._tables[k][0], self._tables[k + parts - 1][1]
            first = self._tables[k][1] - lo if parts == 2 else 0
            ok = fw.get(x) == step.id and k not in self._reduced
            if ok:  # the candidates in destination order (an earlier plan of this table may have moved them)
                order = np.argsort(self._runs[1][lo + first:hi], kind="stable")
                for flat in self._runs:
                    flat[lo + first:hi] = flat[lo + first:hi][order]
            runs = tuple(flat[lo:hi] for flat in self._runs)
            d, n = (np.asarray(r[first:], np.int64) for r in runs[1:])
            ok = ok and bool((d[1:] >= d[:-1] + n[:-1]).all())
            chain.append((ok, *runs, first))
            where.append((k, lo, hi, first))
        groups = [self._groups[int(r[1])][0] for r in kernel_rows]
        got = forwarding.forward(groups, chain, (self.exe.forwarding.unwritten_start,
                                                 self.exe.forwarding.unwritten_end))
        if got is None:
            return []
        skips, new_groups = got
        out: list = []
        for i, (skip, place) in enumerate(zip(skips, where)):
            if skip is None:
                continue
            k, lo, hi, first = place
            a = lo + first
            order = np.argsort(skip, kind="stable")  # kept runs first, then the skipped (destinations disjoint)
            for flat in self._runs:
                flat[a:hi] = flat[a:hi][order]
            kept = a + int(skip.size - skip.sum())
            self._skipped.append((kept, hi))
            self._reduced[k] = len(self._tables)
            big = int(self._runs[2][a:kept].sum()) >= PARALLEL_MIN_BYTES
            self._tables.append((a, kept, (SPLIT if kept - a > 1 else BIG) if big else SMALL))
            self._table_objects.append(None)
            out.append((True, i, (COPY, self._reduced[k], 0)))
        for i, (old, new) in enumerate(zip(groups, new_groups)):
            if new is not old:
                g = self._group(new)
                if g is None:  # (same kernel as the original: not reached)
                    raise IpuError("internal: a forwarded kernel group has no compiled kernel")
                out.append((False, i, (KERNEL, g, 0)))
        return out

    def skipped_runs(self):
        """(destinations, bytes) of the copies the compiled loop skips (their bytes are dead)."""
        parts = [(self._runs[1][a:b], self._runs[2][a:b]) for a, b in self._skipped]
        return tuple(np.concatenate([np.zeros(0, np.int64)] + [p[i].astype(np.int64) for p in parts]) for i in (0, 1))

    def _segment(self, nodes):
        self._chain = []
        ops: list = []
        nlog = sum(self._emit(n, ops, 0) for n in nodes)
        table = np.array(ops, np.int64).reshape(-1, 3)
        streams = tuple(sorted({self._hosts[k][1] for k in table[table[:, 0] == STREAM, 1].tolist()}))
        branches = bool(np.isin(table[:, 0], (IF, SWITCH)).any())
        self.segments.append(SegmentTable(table, nlog, tuple(nodes), streams, branches))
        self._arrays = None
        return Segment(len(self.segments) - 1)

    def transform(self, node):
        """The node tree with every maximal capable part replaced by a segment."""
        key = id(node)
        hit = self._transformed.get(key)
        if hit is not None:
            return hit
        if self.capable(node):
            out = self._segment([node])
        else:
            match node:
                case Seq(items):
                    kids, run = [], []
                    for n in items:
                        if self.capable(n):
                            run.append(n)
                            continue
                        if run:
                            kids.append(self._segment(run))
                            run = []
                        kids.append(self.transform(n))
                    if run:
                        kids.append(self._segment(run))
                    out = Seq(tuple(kids))
                case Loop(count, body):
                    out = Loop(count, self.transform(body))
                case CallRef(function):
                    out = self.transform(self.exe.functions[function])
                case Branch(step, condition, then, otherwise):
                    out = Branch(step, condition, self.transform(then), self.transform(otherwise))
                case MultiBranch(step, condition, arms, default):
                    out = MultiBranch(step, condition, tuple((v, self.transform(a)) for v, a in arms),
                                      self.transform(default))
                case _:  # a step that runs in Python
                    out = node
        self._transformed[key] = out
        return out

    def root(self, program: int):
        """Program `program`'s node tree with its segments (built on first use)."""
        with _PLAN_LOCK:
            r = self.roots.get(program)
            if r is None:
                r = self.roots[program] = self.transform(self.exe.programs[program])
                self.arrays()
            return r

    # -- the shared tables as flat arrays
    def arrays(self):
        """The shared tables as flat arrays (rebuilt after segments are added)."""
        a = self._arrays
        if a is None:
            with _PLAN_LOCK:
                if self._arrays is None:
                    self._arrays = self._flatten()
                    if self._dropped_total >= RELEASE_BYTES:  # a large model's tables were replaced
                        hostmem.release_freed()
                a = self._arrays
        return a

    def _flatten(self):
        G = len(self._groups)
        g_addr = np.zeros(G, np.int64)
        g_nf = np.zeros(G, np.int64)
        g_isz = np.ones((G, MAX_FIELDS), np.int64)
        g_nv, g_off0, g_nfp, g_fp0, g_nip, g_ip0 = (np.zeros(G, np.int64) for _ in range(6))
        g_par = np.zeros(G, np.int64)
        offs, cnts, fps, ips = [], [], [], []
        o = f = i = 0
        for k, (g, addr, par) in enumerate(self._groups):
            nv, nf = g.off.shape
            g_addr[k], g_nf[k], g_nv[k], g_par[k] = addr, nf, nv, par
            g_isz[k, :nf] = [t.storage.itemsize for t in g.types]
            g_off0[k], g_fp0[k], g_ip0[k] = o, f, i
            g_nfp[k], g_nip[k] = g.fp.shape[1], g.ip.shape[1]
            offs.append(g.off.reshape(-1)), cnts.append(g.cnt.reshape(-1))
            fps.append(np.asarray(g.fp, np.float64).reshape(-1)), ips.append(np.asarray(g.ip, np.int64).reshape(-1))
            o += g.off.size
            f += g.fp.size
            i += g.ip.size

        def cat(parts, dt):
            return np.ascontiguousarray(np.concatenate(parts), dt) if parts else np.zeros(0, dt)

        T = len(self._tables)
        t_r0, t_r1, t_par = (np.array([t[i] for t in self._tables], np.int64).reshape(T) for i in range(3))
        copy_src, copy_dst, copy_n = (flat[:self._used] for flat in self._runs)
        S = len(self._staged)
        s_r0, s_r1 = np.zeros(S, np.int64), np.zeros(S, np.int64)
        ss, sd, sn = [], [], []
        r = 0
        for k, t in enumerate(self._staged):
            s_r0[k], s_r1[k] = r, r + t.nbytes.size
            ss.append(t.src_off), sd.append(t.dst_off), sn.append(t.nbytes)
            r += t.nbytes.size
        H = len(self._hosts)
        h_si, h_dir, h_r0, h_r1 = (np.zeros(H, np.int64) for _ in range(4))
        hs, hd, hn = [], [], []
        r = 0
        for k, (x, si) in enumerate(self._hosts):
            h_si[k], h_dir[k], h_r0[k], h_r1[k] = si, x.to_device, r, r + x.nbytes.size
            hs.append(x.src_off), hd.append(x.dst_off), hn.append(x.nbytes)
            r += x.nbytes.size
        C = len(self._conds)
        c_off, c_kind, c_size = (np.array([c[i] for c in self._conds], np.int64).reshape(C) for i in range(3))
        W = len(self._switches)
        w_k0, w_k1, w_default = np.zeros(W, np.int64), np.zeros(W, np.int64), np.zeros(W, np.int64)
        keys, pcs = [], []
        for k, (cases, default) in enumerate(self._switches):
            w_k0[k], w_k1[k], w_default[k] = len(keys), len(keys) + len(cases), default
            keys.extend(cases)
            pcs.extend(cases.values())
        return (h_si, h_dir, h_r0, h_r1, cat(hs, np.int64), cat(hd, np.int64), cat(hn, np.int64),
                c_off, c_kind, c_size, w_k0, w_k1, w_default, np.array(keys, np.int64), np.array(pcs, np.int64),
                g_addr, g_nf, g_isz, g_nv, g_off0, g_nfp, g_fp0, g_nip, g_ip0, g_par,
                cat(offs, np.int64), cat(cnts, np.int64), cat(fps, np.float64), cat(ips, np.int64),
                t_r0, t_r1, t_par, copy_src, copy_dst, copy_n,
                cat(ss, np.int64), cat(sd, np.int64), cat(sn, np.int64), s_r0, s_r1)

    # -- running
    def _stream_args(self, engine, seg: SegmentTable):
        """(buffers, their addresses and byte sizes, bytes per element, elements per replica, own
        part per replica, positions) of every stream, as the compiled loop reads them (by address:
        a typed list of the buffers cost ~0.1 ms a run to build); the caller keeps `buffers` alive
        through the call. None when a stream the segment moves is not connected or its
        device-to-host buffer is not C-contiguous (the Python walk then says so, or copes, exactly
        as without the compiled loop)."""
        n = len(self._streams)
        ints = np.zeros((5, n), np.int64)  # one allocation for the five integer tables
        s_per, s_perrep, s_pos, addr, size = ints
        s_per[:] = 1
        s_perrep[:] = 1
        s_own = np.zeros(n, np.bool_)
        keep = []
        for si in seg.streams:
            s = self._streams[si]
            layout = engine.stream_buffer(s)
            if layout is None:
                return None
            flat, per_replica, own, contiguous = layout
            if s.to_device:
                buf = flat if contiguous else np.ascontiguousarray(flat)
            elif contiguous:
                buf = flat
            else:
                return None
            keep.append(buf)
            addr[si] = buf.__array_interface__["data"][0]
            size[si] = buf.nbytes
            s_per[si] = s.nbytes
            s_perrep[si] = per_replica
            s_own[si] = own
            s_pos[si] = engine.stream_position(s)
        return keep, addr, size, s_per, s_perrep, s_own, s_pos

    def run_segment(self, engine, index: int, reps, clock: int) -> int:
        """Run segment `index` on replicas `reps` from cycle `clock`; returns the cycle it ends at."""
        seg = self.segments[index]
        if seg.branches and len(reps) > 1:  # replicas may take different sides: the Python walk splits them
            for node in seg.nodes:
                clock = engine.walk(node, reps, clock)
            return clock
        if seg.streams:
            streams = self._stream_args(engine, seg)
            if streams is None:
                for node in seg.nodes:
                    clock = engine.walk(node, reps, clock)
                return clock
        else:
            streams = self._no_streams()
        keep, buf_addr, buf_len, s_per, s_perrep, s_own, s_pos = streams
        start = s_pos.copy()
        log_on = bool(engine.log_steps)
        room = engine.log.room() if log_on else 0
        room = seg.steps if room is None else min(room, seg.steps)
        ids = np.empty(room, np.int64)
        starts = np.empty(room, np.int64)
        counts = np.zeros(len(self.exe.steps) if log_on else 1, np.int64)
        status, clock, executed, logged, pc = run_ops(seg.ops, engine.memory, np.asarray(reps, np.int64), clock,
                                                       log_on, counts, room, ids, starts, engine.threads, buf_addr,
                                                       buf_len, s_per, s_perrep, s_own, s_pos, *self.arrays())
        del keep  # the stream buffers the loop read by address, alive until here
        for si in seg.streams:
            engine.advance_stream(self._streams[si], int(s_pos[si] - start[si]))
        if log_on:
            engine.log.add_counted(counts, executed, ids[:logged], starts[:logged])
        if status:
            g = self._groups[int(seg.ops[pc, 1])][0]
            for r in reps:  # the Python path raises the kernel's own error
                g.codelet.kernel()(tuple(engine.view(r, t.storage) for t in g.types), g.off, g.cnt, g.fp, g.ip)
            raise IpuError(f"codelet {g.codelet.name}: its kernel failed in compiled code")
        return clock

    def _no_streams(self):
        """The stream arguments of a segment that moves none (made once per stream count)."""
        n = len(self._streams)
        cached = self._idle_streams
        if cached is None or len(cached[1]) != n:
            cached = self._idle_streams = ([], np.zeros(n, np.int64), np.zeros(n, np.int64), np.ones(n, np.int64),
                                           np.ones(n, np.int64), np.zeros(n, np.bool_), np.zeros(n, np.int64))
        return cached
