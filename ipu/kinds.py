"""The registry of program kinds: every kind of leaf program node, with how it compiles, what it
touches in the timeline and how the engine runs its steps (as a codelet has a kernel and a cost).

Control nodes (Sequence, Repeat, If, Switch, Call) belong to the compiler and the engine; every
other node is a leaf of a registered kind:

    compile(compiler, node) -> compiled node   the steps it adds (`Compiler.add_step`), as
                                               ("step", id) or ("seq", [...])
    uses(node) -> [(Variable, read, write)]    the tensors it touches, for liveness
    payload, run(engine, payload, reps)        the type of the Step payloads it produces and how
                                               the engine carries one out on replicas `reps`
                                               (run None: nothing to do but let time pass)

The built-in kinds live beside their subject (compute.py, exchange.py, streams.py, remote.py,
collectives.py); the compiler imports them, which registers them.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .errors import CompileError

__all__ = ["ProgramKind", "kind_of", "kind_of_payload", "register_kind", "registered_kinds", "run_payload"]


@dataclass(frozen=True)
class ProgramKind:
    name: str
    nodes: tuple  # the Program classes of this kind
    compile: Callable
    uses: Callable
    payload: type | None = None
    run: Callable | None = None


_BY_NAME: dict[str, ProgramKind] = {}
_BY_NODE: dict[type, ProgramKind] = {}
_BY_PAYLOAD: dict[type, ProgramKind] = {}


def register_kind(kind: ProgramKind) -> ProgramKind:
    """Register a program kind; a second kind of the same name, node class or payload type is refused."""
    if kind.name in _BY_NAME:
        raise ValueError(f"a program kind named {kind.name!r} is already registered")
    for n in kind.nodes:
        if n in _BY_NODE:
            raise ValueError(f"program node {n.__name__} already belongs to kind {_BY_NODE[n].name!r}")
    if kind.payload is not None and kind.payload in _BY_PAYLOAD:
        raise ValueError(f"payload {kind.payload.__name__} already belongs to kind {_BY_PAYLOAD[kind.payload].name!r}")
    _BY_NAME[kind.name] = kind
    for n in kind.nodes:
        _BY_NODE[n] = kind
    if kind.payload is not None:
        _BY_PAYLOAD[kind.payload] = kind
    return kind


def kind_of(node) -> ProgramKind:
    """The kind of a leaf program node."""
    k = _BY_NODE.get(type(node))
    if k is None:
        for base in type(node).__mro__[1:]:
            k = _BY_NODE.get(base)
            if k is not None:
                break
    if k is None:
        raise CompileError(f"unknown program node {type(node).__name__}")
    return k


def kind_of_payload(payload) -> ProgramKind:
    """The kind whose steps carry payloads of this type."""
    k = _BY_PAYLOAD.get(type(payload))
    if k is None:
        raise CompileError(f"no program kind runs payloads of type {type(payload).__name__}")
    return k


def run_payload(engine, payload, reps) -> None:
    """Carry out a step's payload on replicas `reps` with the run function of its kind."""
    k = kind_of_payload(payload)
    if k.run is not None:
        k.run(engine, payload, reps)


def registered_kinds() -> dict:
    return dict(_BY_NAME)
