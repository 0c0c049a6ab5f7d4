"""The program timeline and the liveness of every variable on it.

Leaves get positions in execution order with calls expanded (a function called twice has two
stretches of positions), the arms of a branch one after the other, a loop body once. A variable is
live in *segments*: a segment opens at a write that replaces the whole variable and closes at the
last use before the next such write. A function's temporaries are written afresh in every call, so
each call gives them a segment of their own: within a call they live and die as the call uses
them, and between calls their bytes are free for others (as Poplar's liveness analysis treats the
variables of a called function; see docs/architecture.md).

Two things keep the segments safe:

- a whole-variable write closes the previous segment only if it surely runs before every later use
  of the segment it opens: the write is not inside a branch arm (or a loop that may run zero times)
  that a later use is outside of (otherwise the other arm may keep the old value);
- loops (`Repeat`): the body is walked once, so a segment that crosses the loop's start or end, or
  that opens with a read inside the body (a value carried from the previous iteration), is widened
  to the whole loop, innermost loops first.
"""
from __future__ import annotations

import numpy as np

from .codelet import IN, INOUT, OUT
from .errors import CompileError
from .kinds import kind_of
from .program import Call, Copy, Execute, HostToDevice, If, Program, Repeat, Sequence, Switch
from .tensor import Variable

__all__ = ["Timeline", "timeline_steps"]


def _covers(starts: np.ndarray, counts: np.ndarray, numel: int) -> bool:
    """True if the element ranges [start, start + count) together cover [0, numel)."""
    keep = counts > 0
    if not keep.any():
        return numel == 0
    s = starts[keep]
    e = s + counts[keep]
    order = np.argsort(s, kind="stable")
    s, e = s[order], e[order]
    reach = np.maximum.accumulate(e)
    return bool(s[0] <= 0 and reach[-1] >= numel and np.all(s[1:] <= reach[:-1]))


class Timeline:
    def __init__(self):
        self.pos = 0
        self.uses: dict[int, list] = {}  # variable id -> [(position, read, whole write, context)]
        self.loops: list[tuple[int, int]] = []
        self.vars: dict[int, Variable] = {}
        self.calls_active: set[int] = set()
        self._ctx: tuple = ()  # the branch arms (and maybe-empty loops) around the current position
        self._arms = 0
        self._pending: dict[int, list] = {}  # uses of the leaf being walked: vid -> [read, whole write]
        self._cs_uses: dict[int, list] = {}  # compute set id -> [(variable, read, whole write)]

    # -- recording ---------------------------------------------------------------------------
    def use(self, var: Variable, read: bool, write: bool, whole: bool = False):
        """Record a use at the current position; `whole`: the write replaces every element."""
        self.vars[var.id] = var
        u = self._pending.setdefault(var.id, [False, False])
        u[0] |= bool(read)
        u[1] |= bool(write and whole)

    def _leaf_done(self):
        for vid, (read, whole) in self._pending.items():
            self.uses.setdefault(vid, []).append((self.pos, read, whole and not read, self._ctx))
        self._pending = {}
        self.pos += 1

    def _arm(self, p: Program | None):
        if p is None:
            return
        saved = self._ctx
        self._arms += 1
        self._ctx = saved + (self._arms,)
        self.walk(p)
        self._ctx = saved

    def _compute_set_uses(self, cs) -> list:
        key = id(cs)
        if key not in self._cs_uses:
            reads: dict[int, bool] = {}
            writes: dict[int, list] = {}
            vars_: dict[int, Variable] = {}
            for chunk in cs.chunks:
                for j, (f, v) in enumerate(zip(chunk.codelet.fields, chunk.field_vars)):
                    vars_[v.id] = v
                    reads[v.id] = reads.get(v.id, False) or f.direction in (IN, INOUT)
                    if f.direction in (OUT, INOUT):
                        writes.setdefault(v.id, []).append((chunk.field_start[:, j], chunk.field_count[:, j]))
            out = []
            for vid, v in vars_.items():
                w = writes.get(vid)
                whole = bool(w) and _covers(np.concatenate([a for a, _ in w]), np.concatenate([b for _, b in w]),
                                            v.numel)
                out.append((v, reads[vid], bool(w), whole))
            self._cs_uses[key] = out
        return self._cs_uses[key]

    # -- walking -----------------------------------------------------------------------------
    def walk(self, p: Program):
        if isinstance(p, Sequence):
            for q in p.programs:
                self.walk(q)
            return
        if isinstance(p, Repeat):
            a = self.pos
            if int(p.count) == 0:  # a body that may not run writes nothing for sure
                self._arm(p.body)
            else:
                self.walk(p.body)
            self.loops.append((a, max(a, self.pos - 1)))
            return
        if isinstance(p, If):
            self.use(p.condition.variable, True, False)
            self._leaf_done()
            self._arm(p.then_)
            self._arm(p.else_)
            return
        if isinstance(p, Switch):
            self.use(p.control.variable, True, False)
            self._leaf_done()
            for q in p.cases.values():
                self._arm(q)
            self._arm(p.default)
            return
        if isinstance(p, Call):
            key = id(p.function)
            if key in self.calls_active:
                raise CompileError(f"function {p.function.name!r} calls itself; recursion is not supported")
            self.calls_active.add(key)
            self.walk(p.function.program)
            self.calls_active.discard(key)
            return
        # a leaf: what its kind touches (ipu/kinds.py); whole-variable writes of the common kinds
        if isinstance(p, Execute):
            for v, r, w, whole in self._compute_set_uses(p.compute_set):
                self.use(v, r, w, whole)
        elif isinstance(p, (Copy, HostToDevice)):
            for v, r, w in kind_of(p).uses(p):
                self.use(v, r, w, w and p.dst.variable is v and p.dst.numel == v.numel)
        else:
            for v, r, w in kind_of(p).uses(p):
                self.use(v, r, w)
        self._leaf_done()

    # -- liveness ----------------------------------------------------------------------------
    @staticmethod
    def _split(uses: list) -> list:
        """Segments [(first, last, opens with a read)] of one variable's uses, in order."""
        segs = []
        end = None  # last position of the segment being built (walking backwards)
        common = None  # the context every use of that segment after the current one shares
        for pos, read, whole, ctx in reversed(uses):
            if end is None:
                end, common = pos, ctx
            else:
                n = 0
                while n < len(common) and n < len(ctx) and common[n] == ctx[n]:
                    n += 1
                common = common[:n]
            if whole and len(ctx) <= len(common) and common[:len(ctx)] == ctx:
                segs.append([pos, end, False])  # a sure write of every element opens this segment
                end = common = None
        if end is not None:
            first_pos, first_read = uses[0][0], uses[0][1]
            segs.append([first_pos, end, first_read])
        segs.reverse()
        return segs

    def segments(self) -> dict[int, list[tuple[int, int]]]:
        """Variable id -> its live segments [(first, last)], sorted, disjoint, loops applied."""
        out = {}
        loops = sorted(self.loops, key=lambda r: r[1] - r[0])
        for vid, uses in self.uses.items():
            segs = self._split(uses)
            for a, b in loops:
                for s in segs:
                    f, l = s[0], s[1]
                    crosses = (f < a <= l) or (f <= b < l)
                    carried = a <= f and l <= b and s[2]
                    if crosses or carried:
                        s[0], s[1] = min(f, a), max(l, b)
                segs = _merge(segs)
            out[vid] = [(s[0], s[1]) for s in segs]
        return out

    def intervals(self):
        """(first, last) position of every variable: the hull of its segments."""
        segs = self.segments()
        return {v: s[0][0] for v, s in segs.items()}, {v: s[-1][1] for v, s in segs.items()}


def _merge(segs: list) -> list:
    segs = sorted(segs, key=lambda s: s[0])
    out = []
    for s in segs:
        if out and s[0] <= out[-1][1]:
            if s[1] > out[-1][1]:
                out[-1][1] = s[1]
        else:
            out.append(list(s))
    return out


_TRANSFER_KINDS = ("exchange", "host_to_device", "device_to_host", "remote_load", "remote_store")


def timeline_steps(exe) -> list | None:
    """The step at each liveness timeline position (program order, calls expanded, one pass through
    loop bodies and every branch), or None when it cannot be matched with `exe.timeline_length`.

    The compiler inserts a sync before every exchange and host transfer; those syncs take no
    position of their own (the transfer after them does)."""
    steps = exe.steps
    out: list[int] = []
    budget = [max(exe.timeline_length, 1) * 4 + 64]

    def walk(node, stack):
        budget[0] -= 1
        if budget[0] < 0:
            raise RecursionError
        kind = node[0]
        if kind == "step":
            out.append(int(node[1]))
        elif kind == "seq":
            kids = node[1]
            if (len(kids) == 2 and kids[0][0] == "step" and kids[1][0] == "step"
                    and steps[kids[0][1]].kind == "sync" and steps[kids[1][1]].kind in _TRANSFER_KINDS):
                out.append(int(kids[1][1]))
            else:
                for k in kids:
                    walk(k, stack)
        elif kind == "repeat":
            walk(node[2], stack)
        elif kind == "call":
            f = int(node[1])
            if f in stack:
                raise RecursionError
            walk(exe.functions[f], stack | {f})
        elif kind == "if":
            out.append(int(node[1]))
            walk(node[3], stack)
            walk(node[4], stack)
        elif kind == "switch":
            out.append(int(node[1]))
            for v in node[3].values():
                walk(v, stack)
            walk(node[4], stack)

    try:
        for p in exe.programs:
            walk(p, frozenset())
    except (RecursionError, IndexError):
        return None
    if len(out) == exe.timeline_length or (exe.timeline_length == 1 and not out):
        return out
    return None
