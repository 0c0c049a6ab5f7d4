"""The compiled program: the typed tree of nodes that `ipu.compile` hands the engine.

`ipu.compile` turns every leaf of a program (`ipu.program`) into steps through its program kind
(`ipu.kinds`), so a compiled tree only orders, repeats, calls and chooses steps:

    StepRef(step)                                 run step `step` (an index into Executable.steps)
    Seq(items)                                    run the items in order
    Loop(count, body)                             run `body` `count` times
    CallRef(function)                             run shared function `function` (an index into
                                                  Executable.functions; its steps are compiled once)
    Branch(step, condition, then, otherwise)      an If: step `step` decides (and costs its cycles),
                                                  then `then` runs when the condition is nonzero,
                                                  `otherwise` when it is zero
    MultiBranch(step, condition, arms, default)   a Switch: the arm whose value equals the
                                                  condition, else `default`
    Segment(index)                                a compiled part of a tree (ipu/native.py), run by
                                                  the compiled step loop in one call

Nodes are frozen: walkers (`match` on these classes: the engine's Python walk, the native plan,
the timeline's step positions, the profile's program tree) read them and build new trees, never
edit them. Segments appear only in the trees a native plan derives; `Executable.programs` and
`Executable.functions` hold none.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["Branch", "CallRef", "Loop", "MultiBranch", "Node", "ScalarRef", "Segment", "Seq", "StepRef"]


@dataclass(frozen=True, slots=True)
class ScalarRef:
    """A one-element tensor the engine reads while it runs (a branch condition, a remote buffer
    offset): the storage dtype it is read as and its element index in a replica's memory viewed
    as that dtype."""

    storage: np.dtype
    element: int

    @property
    def byte_offset(self) -> int:
        return self.element * self.storage.itemsize


@dataclass(frozen=True, slots=True)
class StepRef:
    step: int


@dataclass(frozen=True, slots=True)
class Seq:
    items: tuple = ()


@dataclass(frozen=True, slots=True)
class Loop:
    count: int
    body: "Node"


@dataclass(frozen=True, slots=True)
class CallRef:
    function: int


@dataclass(frozen=True, slots=True)
class Branch:
    step: int
    condition: ScalarRef
    then: "Node"
    otherwise: "Node"


@dataclass(frozen=True, slots=True)
class MultiBranch:
    step: int
    condition: ScalarRef
    arms: tuple  # ((value, node), ...) in the order the Switch gave its cases
    default: "Node"

    def arm(self, value: int) -> "Node":
        """The node that runs when the condition is `value`."""
        for v, node in self.arms:
            if v == value:
                return node
        return self.default


@dataclass(frozen=True, slots=True)
class Segment:
    index: int  # into the plan's segments (native.Plan.segments)


Node = StepRef | Seq | Loop | CallRef | Branch | MultiBranch | Segment
