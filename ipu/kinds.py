"""Program kinds and step kinds: the two registries that let a new kind of work join the machine
without edits to the compiler, the engine, the compiled step loop or the profiler.

A *program kind* (`ProgramKind`) is a kind of leaf program node (`Execute`, `Copy`,
`HostToDevice`, ...): how it compiles, what it touches and how the engine runs what it compiled,
as a codelet has a kernel and a cost. Control nodes (Sequence and Rerun, Repeat, If, Switch, Call) belong to
the compiler and the engine; every other node is a leaf of a registered program kind:

    compile(compiler, node) -> ipu.nodes node   the steps it adds (`Compiler.add_step`), as
                                                `StepRef(id)` or `Seq((...))`
    uses(node) -> [(Variable, read, write)]     the tensors it touches, for liveness; a 4th item
                                                (`Use.whole`) says a write replaces every element
    payload, run(engine, payload, reps)         the type of the step payloads it produces and how
                                                the Python walk carries one out on replicas `reps`
                                                (run None: nothing to do but let time pass)
    lower(loop, payload) -> [op, ...] | None    how the compiled step loop runs such a payload: ops
                                                of its fixed op set from `loop` (ipu/native.py's
                                                `LoopOps`: kernel groups, copy tables, host stream
                                                elements), or None when this payload runs in
                                                Python. No `lower`: its steps run in Python.
    steps                                       the step kinds its steps have (below)

A *step kind* (`StepKind`) is what a step is in the profile: `Step.kind` names one
(`compute`, `exchange`, `sync`, `host_to_device`, ...) and it says which profile class its
cycles count towards (compute, exchange, sync, host, streaming, control, or a class of its own).
One program kind may make steps of several step kinds (a collective makes sync, exchange and
compute steps), and several program kinds may share one. The compiler refuses a step of an
unregistered step kind.

The built-in kinds live beside their subject (compute.py, exchange.py, streams.py, remote.py,
collectives.py); the compiler imports them, which registers them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, NamedTuple

from .errors import CompileError

__all__ = ["ProgramKind", "StepKind", "Use", "program_kind_of", "program_kind_of_payload", "register_kind",
           "register_step_kind", "registered_kinds", "registered_step_kinds", "run_payload", "step_kind"]


@dataclass(frozen=True)
class StepKind:
    """A kind of step: its name (`Step.kind`, the profile's step `kind`) and the profile class its
    cycles count towards (the profile's `class`)."""

    name: str
    profile_class: str


@dataclass(frozen=True)
class ProgramKind:
    name: str
    nodes: tuple  # the Program classes of this kind
    compile: Callable
    uses: Callable
    payload: type | None = None
    run: Callable | None = None
    lower: Callable | None = None
    steps: tuple = ()  # the StepKinds of the steps it makes


class Use(NamedTuple):
    """A tensor a leaf touches: `whole` when its write replaces every element of the variable
    (then the value before it is dead: a liveness segment may end there)."""

    variable: object
    read: bool
    write: bool
    whole: bool = False


_BY_NAME: dict[str, ProgramKind] = {}
_BY_NODE: dict[type, ProgramKind] = {}
_BY_PAYLOAD: dict[type, ProgramKind] = {}
_STEP_KINDS: dict[str, StepKind] = {}


def register_step_kind(kind: StepKind) -> StepKind:
    """Register a step kind; the same name again is refused unless it is the same step kind."""
    old = _STEP_KINDS.get(kind.name)
    if old is not None and old != kind:
        raise ValueError(f"step kind {kind.name!r} is already registered with profile class {old.profile_class!r}, "
                         f"not {kind.profile_class!r}")
    _STEP_KINDS[kind.name] = kind
    return kind


def register_kind(kind: ProgramKind) -> ProgramKind:
    """Register a program kind and its step kinds; a second kind of the same name, node class or
    payload type is refused."""
    if kind.name in _BY_NAME:
        raise ValueError(f"a program kind named {kind.name!r} is already registered")
    for n in kind.nodes:
        if n in _BY_NODE:
            raise ValueError(f"program node {n.__name__} already belongs to kind {_BY_NODE[n].name!r}")
    if kind.payload is not None and kind.payload in _BY_PAYLOAD:
        raise ValueError(f"payload {kind.payload.__name__} already belongs to kind {_BY_PAYLOAD[kind.payload].name!r}")
    for s in kind.steps:
        old = _STEP_KINDS.get(s.name)
        if old is not None and old != s:
            raise ValueError(f"program kind {kind.name!r}: step kind {s.name!r} is already registered with profile "
                             f"class {old.profile_class!r}, not {s.profile_class!r}")
    for s in kind.steps:
        register_step_kind(s)
    _BY_NAME[kind.name] = kind
    for n in kind.nodes:
        _BY_NODE[n] = kind
    if kind.payload is not None:
        _BY_PAYLOAD[kind.payload] = kind
    return kind


def program_kind_of(node) -> ProgramKind:
    """The program kind of a leaf program node."""
    k = _BY_NODE.get(type(node))
    if k is None:
        for base in type(node).__mro__[1:]:
            k = _BY_NODE.get(base)
            if k is not None:
                break
    if k is None:
        raise CompileError(f"unknown program node {type(node).__name__}")
    return k


def program_kind_of_payload(payload) -> ProgramKind:
    """The program kind whose steps carry payloads of this type."""
    k = _BY_PAYLOAD.get(type(payload))
    if k is None:
        raise CompileError(f"no program kind runs payloads of type {type(payload).__name__}")
    return k


def step_kind(name: str) -> StepKind:
    """The registered step kind of this name."""
    k = _STEP_KINDS.get(name)
    if k is None:
        raise CompileError(f"unknown step kind {name!r}: a program kind declares the step kinds it makes "
                           f"(ProgramKind(..., steps=(ipu.StepKind({name!r}, profile_class),)))")
    return k


def run_payload(engine, payload, reps) -> None:
    """Carry out a step's payload on replicas `reps` with the run function of its program kind."""
    k = program_kind_of_payload(payload)
    if k.run is not None:
        k.run(engine, payload, reps)


def registered_kinds() -> dict:
    return dict(_BY_NAME)


def registered_step_kinds() -> dict:
    return dict(_STEP_KINDS)
