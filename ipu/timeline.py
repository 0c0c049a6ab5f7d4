"""The program timeline: positions of the leaves in execution order (calls expanded), the first
and last use of every variable, and the loops, which extend the life of what they carry."""
from __future__ import annotations

from .errors import CompileError
from .kinds import kind_of
from .program import Call, If, Program, Repeat, Sequence, Switch
from .tensor import Variable

__all__ = ["Timeline"]


class Timeline:
    def __init__(self):
        self.pos = 0
        self.first: dict[int, int] = {}
        self.last: dict[int, int] = {}
        self.first_is_read: dict[int, bool] = {}
        self.loops: list[tuple[int, int]] = []
        self.vars: dict[int, Variable] = {}
        self.calls_active: set[int] = set()

    def use(self, var: Variable, read: bool, write: bool):
        vid = var.id
        self.vars[vid] = var
        if vid not in self.first:
            self.first[vid] = self.pos
            self.first_is_read[vid] = read and not write
        self.last[vid] = self.pos

    def walk(self, p: Program):
        if isinstance(p, Sequence):
            for q in p.programs:
                self.walk(q)
            return
        if isinstance(p, Repeat):
            a = self.pos
            self.walk(p.body)
            self.loops.append((a, max(a, self.pos - 1)))
            return
        if isinstance(p, If):
            self.use(p.condition.variable, True, False)
            self.pos += 1
            self.walk(p.then_)
            if p.else_ is not None:
                self.walk(p.else_)
            return
        if isinstance(p, Switch):
            self.use(p.control.variable, True, False)
            self.pos += 1
            for q in p.cases.values():
                self.walk(q)
            if p.default is not None:
                self.walk(p.default)
            return
        if isinstance(p, Call):
            key = id(p.function)
            if key in self.calls_active:
                raise CompileError(f"function {p.function.name!r} calls itself; recursion is not supported")
            self.calls_active.add(key)
            self.walk(p.function.program)
            self.calls_active.discard(key)
            return
        for v, read, write in kind_of(p).uses(p):  # a leaf: what its kind touches (ipu/kinds.py)
            self.use(v, read, write)
        self.pos += 1

    def intervals(self):
        first = dict(self.first)
        last = dict(self.last)
        for a, b in sorted(self.loops, key=lambda r: r[1] - r[0]):
            for vid in first:
                f, l = first[vid], last[vid]
                crosses = (f < a <= l) or (f <= b < l)
                carried = a <= f and l <= b and self.first_is_read[vid]
                if crosses or carried:
                    first[vid], last[vid] = min(f, a), max(l, b)
        return first, last


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
