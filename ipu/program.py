"""Control programs: the tree the engine walks.

Leaves do work (run a compute set, copy between tensors, synchronise, move data to or from the
host); inner nodes order, repeat, choose and call. Programs only describe: `ipu.compile` turns the
tree into steps with their tables and cycle counts.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .graph import ComputeSet, Function, HostStream
    from .tensor import Tensor


class Program:
    """Base of all program nodes. `name` is what the profile shows for the step."""

    name: str = ""


@dataclass(eq=False)
class Sequence(Program):
    programs: list = field(default_factory=list)
    name: str = ""

    def __init__(self, *programs: Program, name: str = ""):
        flat = []
        for p in programs:
            if isinstance(p, (list, tuple)):
                flat.extend(p)
            else:
                flat.append(p)
        for p in flat:
            if not isinstance(p, Program):
                raise TypeError(f"Sequence takes programs, got {type(p).__name__}")
        self.programs = flat
        self.name = name

    def add(self, program: Program) -> "Sequence":
        if not isinstance(program, Program):
            raise TypeError(f"Sequence.add takes a program, got {type(program).__name__}")
        self.programs.append(program)
        return self


@dataclass(eq=False)
class Execute(Program):
    """Run every vertex of a compute set (one BSP compute phase)."""

    compute_set: "ComputeSet"
    name: str = ""


@dataclass(eq=False)
class Copy(Program):
    """Copy src to dst element by element. Pieces on other tiles cross the exchange."""

    src: "Tensor"
    dst: "Tensor"
    name: str = ""


@dataclass(eq=False)
class Sync(Program):
    """A barrier across all tiles of all IPUs of a replica."""

    name: str = "sync"


@dataclass(eq=False)
class Repeat(Program):
    count: int
    body: Program
    name: str = ""


@dataclass(eq=False)
class If(Program):
    """Run then_ if the scalar `condition` is non-zero, else else_."""

    condition: "Tensor"
    then_: Program
    else_: Program | None = None
    name: str = ""


@dataclass(eq=False)
class Switch(Program):
    """Run cases[value] for the scalar integer `control`, or default when no case matches."""

    control: "Tensor"
    cases: dict
    default: Program | None = None
    name: str = ""


@dataclass(eq=False)
class Call(Program):
    """Run a shared subprogram (an `ipu.Function`): its steps are compiled once."""

    function: "Function"
    name: str = ""


@dataclass(eq=False)
class HostToDevice(Program):
    """Copy the next element of a host stream into a tensor."""

    stream: "HostStream"
    dst: "Tensor"
    name: str = ""


@dataclass(eq=False)
class DeviceToHost(Program):
    """Copy a tensor into the next element of a host stream."""

    src: "Tensor"
    stream: "HostStream"
    name: str = ""
