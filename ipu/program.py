"""Programs: the trees a user builds over a graph.

Leaves do work (run a compute set, copy between tensors, synchronise, move data to or from the
host); inner nodes order, repeat, choose and call. Programs only describe: `ipu.compile` turns
every leaf into steps with their tables and cycle counts (through its program kind, ipu/kinds.py)
and the tree into the typed node tree the engine walks (ipu/nodes.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .graph_objects import ComputeSet, Function, HostStream
from .tensor import Tensor

__all__ = ["Call", "CodeLoad", "Copy", "DeviceToHost", "Execute", "HostToDevice", "If", "MultiExchange",
           "Program", "RemoteLoad", "RemoteStore", "Repeat", "Rerun", "Sequence", "Switch", "Sync"]


class Program:
    """Base of all program nodes. `name` is what the profile shows for the step."""

    name: str = ""


@dataclass(eq=False)
class Sequence(Program):
    programs: list = field(default_factory=list)
    name: str = ""

    def __init__(self, *programs: Program, name: str = ""):
        flat: list = []  # anything the caller passed, checked below
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


class Rerun(Sequence):
    """Programs that already ran earlier, run again to recompute what they wrote (PopART's
    implicit recomputation reruns a forward op's programs in the backward pass). It runs as a
    Sequence. `fresh`: the ids of the variables the programs create (an op's outputs and its
    own temporaries, which it writes before it needs their values); for liveness
    (ipu/timeline.py) the block's first touch of one of them starts it afresh, as the first run
    did, even a write in pieces: its values between the two runs are dead."""

    def __init__(self, *programs: Program, name: str = "", fresh=()):
        super().__init__(*programs, name=name)
        self.fresh = frozenset(fresh)


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


# -- streaming memory and code loading (ipu/remote.py, ipu/codeload.py) ------------------------------


def _as_offset(offset):
    if isinstance(offset, Tensor):
        return offset
    if isinstance(offset, bool) or int(offset) != offset:
        raise TypeError(f"a remote buffer offset is an int or a one-element integer tensor, not {offset!r}")
    if int(offset) < 0:
        raise ValueError(f"a remote buffer offset must be >= 0, not {offset}")
    return int(offset)


@dataclass(eq=False)
class RemoteLoad(Program):
    """Copy entry `offset` of a remote buffer (streaming memory) into `dst`. `offset` is an int, or
    a tensor of one integer element whose value is read when the program runs."""

    buffer: object  # ipu.RemoteBuffer
    offset: object
    dst: "Tensor"
    name: str = ""

    def __post_init__(self):
        self.offset = _as_offset(self.offset)


@dataclass(eq=False)
class RemoteStore(Program):
    """Copy `src` into entry `offset` of a remote buffer (streaming memory)."""

    src: "Tensor"
    buffer: object  # ipu.RemoteBuffer
    offset: object
    name: str = ""

    def __post_init__(self):
        self.offset = _as_offset(self.offset)


@dataclass(eq=False)
class CodeLoad(Program):
    """Load the vertex code of `functions` from streaming memory into executable memory on their
    tiles. A function that is the target of a CodeLoad keeps its code in streaming memory: it
    occupies tile memory only from a load to its last call before the next load."""

    functions: list = field(default_factory=list)
    name: str = ""

    def __init__(self, *functions, name: str = ""):
        flat: list = []  # anything the caller passed, checked below
        for f in functions:
            flat.extend(f if isinstance(f, (list, tuple)) else [f])
        for f in flat:
            if not isinstance(f, Function):
                raise TypeError(f"CodeLoad takes ipu Functions, got {type(f).__name__}")
        self.functions = flat
        self.name = name


@dataclass(eq=False)
class MultiExchange(Program):
    """Host and streaming-memory transfers (HostToDevice, DeviceToHost, RemoteLoad, RemoteStore)
    merged into one: a single sync and a single transfer phase, as PopART's MultiExchangeOp."""

    programs: list = field(default_factory=list)
    name: str = ""

    def __init__(self, *programs, name: str = ""):
        flat: list = []  # anything the caller passed, checked below
        for p in programs:
            flat.extend(p if isinstance(p, (list, tuple)) else [p])
        for p in flat:
            if not isinstance(p, (HostToDevice, DeviceToHost, RemoteLoad, RemoteStore)):
                raise TypeError(f"MultiExchange merges host and remote transfers, not {type(p).__name__}")
        self.programs = flat
        self.name = name

    def add(self, program: Program) -> "MultiExchange":
        if not isinstance(program, (HostToDevice, DeviceToHost, RemoteLoad, RemoteStore)):
            raise TypeError(f"MultiExchange merges host and remote transfers, not {type(program).__name__}")
        self.programs.append(program)
        return self
