"""The program timeline and the liveness of every variable on it.

Leaves get positions in execution order with calls expanded (a function called twice has two
stretches of positions), the arms of a branch one after the other, a loop body once. A variable is
live in *segments*: a segment opens at a write that replaces the whole variable and closes at the
last use before the next such write. A function's temporaries are written afresh in every call, so
each call gives them a segment of their own: within a call they live and die as the call uses
them, and between calls their bytes are free for others (as Poplar's liveness analysis treats the
variables of a called function; see docs/machine.md).

A `Rerun` block (an op's programs that ran before, run again to recompute what they wrote) opens
a new segment at its first touch of each variable the op created (`Rerun.fresh`: its outputs and
temporaries), even a write in pieces or an accumulation that ignores the old value: the op began
that variable so the first time, so its values between the two runs are dead (the lowering reruns
an op's programs only when nothing changes its inputs or outputs in place).

Two things keep the segments safe:

- a whole-variable write closes the previous segment only if it surely runs before every later use
  of the segment it opens: the write is not inside a branch arm (or a loop that may run zero times)
  that a later use is outside of (otherwise the other arm may keep the old value);
- loops (`Repeat`): the body is walked once, so a segment that crosses the loop's start or end, or
  that opens with a read inside the body (a value carried from the previous iteration), is widened
  to the whole loop, innermost loops first.
"""
from __future__ import annotations

from .errors import CompileError
from .kinds import Use, program_kind_of
from .nodes import Branch, CallRef, Loop, MultiBranch, Seq, StepRef
from .program import Call, If, Program, Repeat, Rerun, Sequence, Switch
from .tensor import Variable

__all__ = ["Timeline", "timeline_steps"]


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
        self._uses_of: dict[int, list] = {}  # leaf id -> its Uses (a function's leaves are walked per call)
        # inside a Rerun block: (the variables it creates, those of them it has touched so far)
        self._rerun: tuple[frozenset, set] | None = None
        self._fresh: set = set()  # variables the leaf being walked starts afresh (Rerun)

    # -- recording ---------------------------------------------------------------------------
    def use(self, var: Variable, read: bool, write: bool, whole: bool = False):
        """Record a use at the current position; `whole`: the write replaces every element."""
        self.vars[var.id] = var
        u = self._pending.setdefault(var.id, [False, False])
        if self._rerun is not None and var.id in self._rerun[0] and var.id not in self._rerun[1]:
            self._rerun[1].add(var.id)  # a Rerun block's first touch of a variable it creates
            self._fresh.add(var.id)
            u[1] = True
            return
        u[0] |= bool(read)
        u[1] |= bool(write and whole)

    def _leaf_done(self):
        for vid, (read, whole) in self._pending.items():
            read = read and vid not in self._fresh
            self.uses.setdefault(vid, []).append((self.pos, read, whole and not read, self._ctx))
        self._pending = {}
        self._fresh = set()
        self.pos += 1

    def _arm(self, p: Program | None):
        if p is None:
            return
        saved = self._ctx
        self._arms += 1
        self._ctx = saved + (self._arms,)
        self.walk(p)
        self._ctx = saved

    def _leaf_uses(self, p: Program) -> list:
        key = id(p)
        out = self._uses_of.get(key)
        if out is None:
            out = self._uses_of[key] = [Use(*u) for u in program_kind_of(p).uses(p)]
        return out

    # -- walking -----------------------------------------------------------------------------
    def walk(self, p: Program):
        match p:
            case Rerun(programs=programs) if self._rerun is None:
                self._rerun = (p.fresh, set())
                try:
                    for q in programs:
                        self.walk(q)
                finally:
                    self._rerun = None
            case Sequence(programs=programs):
                for q in programs:
                    self.walk(q)
            case Repeat(count=count, body=body):
                a = self.pos
                if int(count) == 0:  # a body that may not run writes nothing for sure
                    self._arm(body)
                else:
                    self.walk(body)
                self.loops.append((a, max(a, self.pos - 1)))
            case If(condition=condition, then_=then, else_=otherwise):
                self.use(condition.variable, True, False)
                self._leaf_done()
                self._arm(then)
                self._arm(otherwise)
            case Switch(control=control, cases=cases, default=default):
                self.use(control.variable, True, False)
                self._leaf_done()
                for q in cases.values():
                    self._arm(q)
                self._arm(default)
            case Call(function=f):
                key = id(f)
                if key in self.calls_active:
                    raise CompileError(f"function {f.name!r} calls itself; recursion is not supported")
                self.calls_active.add(key)
                self.walk(f.program)
                self.calls_active.discard(key)
            case _:  # a leaf: what its program kind says it touches (ipu/kinds.py)
                for u in self._leaf_uses(p):
                    self.use(u.variable, u.read, u.write, u.whole)
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
                assert common is not None  # set with `end`
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
                    f, last = s[0], s[1]
                    crosses = (f < a <= last) or (f <= b < last)
                    carried = a <= f and last <= b and s[2]
                    if crosses or carried:
                        s[0], s[1] = min(f, a), max(last, b)
                segs = _merge(segs)
            out[vid] = [(s[0], s[1]) for s in segs]
        return out

    def unwritten_first(self, vids) -> set[int]:
        """Those of variables `vids` whose first use is not a write of every element (a read, or a
        write of some elements): they may read what their bytes held before."""
        return {v for v in vids if v in self.uses and not self.uses[v][0][2]}

    def intervals(self):
        """(first, last) position of every variable: the hull of its segments."""
        segs = self.segments()
        return {v: s[0][0] for v, s in segs.items()}, {v: s[-1][1] for v, s in segs.items()}


def _merge(segs: list) -> list:
    segs = sorted(segs, key=lambda s: s[0])
    out: list[list[int]] = []  # [first, last] segments
    for s in segs:
        if out and s[0] <= out[-1][1]:
            if s[1] > out[-1][1]:
                out[-1][1] = s[1]
        else:
            out.append(list(s))
    return out


def timeline_steps(exe) -> list | None:
    """The step at each liveness timeline position (program order, calls expanded, one pass through
    loop bodies and every branch), or None when it cannot be matched with `exe.timeline_length`.

    A leaf program node has one position, which its last step stands for: the steps it adds
    before that one (the sync before a transfer, a collective's earlier hops) are not
    `Step.in_timeline`."""
    steps = exe.steps
    out: list[int] = []
    budget = [max(exe.timeline_length, 1) * 4 + 64]

    def walk(node, stack):
        budget[0] -= 1
        if budget[0] < 0:
            raise RecursionError
        match node:
            case StepRef(step):
                if steps[step].in_timeline:
                    out.append(int(step))
            case Seq(items):
                for n in items:
                    walk(n, stack)
            case Loop(_, body):
                walk(body, stack)
            case CallRef(f):
                if f in stack:
                    raise RecursionError
                walk(exe.functions[f], stack | {f})
            case Branch(step, _, then, otherwise):
                out.append(int(step))
                walk(then, stack)
                walk(otherwise, stack)
            case MultiBranch(step, _, arms, default):
                out.append(int(step))
                for _, n in arms:
                    walk(n, stack)
                walk(default, stack)

    try:
        for p in exe.programs:
            walk(p, frozenset())
    except (RecursionError, IndexError):
        return None
    if len(out) == exe.timeline_length or (exe.timeline_length == 1 and not out):
        return out
    return None
