"""The objects a Graph hands out besides tensors: compute sets (of vertex chunks), host streams,
functions and remote buffers.

Plain data, in a module that imports nothing of the machine, so the programs that refer to them
(`ipu.program`), the graph that makes them (`ipu.graph`) and the kinds that compile them import
them without cycles.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # pragma: no cover
    from .codelet import Codelet
    from .program import Program
    from .target import Target
    from .types import ElementType

__all__ = ["ComputeSet", "Function", "HostStream", "RemoteBuffer", "VertexChunk", "transfer_limit_message"]


@dataclass(eq=False)
class VertexChunk:
    """Vertices added together: one codelet, arrays over vertices for every field and parameter."""

    codelet: Codelet
    tiles: np.ndarray  # int64[n]
    field_vars: tuple  # one Variable per field (all n vertices read that variable)
    field_start: np.ndarray  # int64[n, F] first element (flat index in the variable)
    field_count: np.ndarray  # int64[n, F]
    fp: np.ndarray  # float64[n, P]
    ip: np.ndarray  # int64[n, Q]
    # multi-region vertices (Codelet.multi_region): each row's place among the regions of its
    # vertex (0 starts a vertex; k > 0 is the k-th further region of the vertex started by the
    # nearest row above with 0); None: every row is a vertex of its own
    region: np.ndarray | None = None

    @property
    def types(self) -> tuple:
        return tuple(v.dtype for v in self.field_vars)


@dataclass(eq=False)
class ComputeSet:
    name: str
    chunks: list = field(default_factory=list)
    debug: str = ""  # e.g. the popxl op that made it

    @property
    def num_vertices(self) -> int:
        return sum(len(c.tiles) if c.region is None else int(np.count_nonzero(c.region == 0)) for c in self.chunks)


@dataclass(eq=False)
class HostStream:
    name: str
    shape: tuple
    dtype: ElementType
    to_device: bool
    # device-to-host only: a host callback, called as callback(array, replica) after every
    # transfer (Poplar's stream callbacks; PrintTensor is one). The engine gives such a stream a
    # buffer of its own, so it needs no connect_stream.
    callback: Callable[[np.ndarray, int], object] | None = None

    @functools.cached_property
    def numel(self) -> int:  # read several times per run; a stream's shape is fixed when it is made
        return math.prod(int(d) for d in self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * self.dtype.itemsize


@dataclass(eq=False)
class Function:
    """A subprogram compiled once and run by every `Call` of it."""

    program: Program
    name: str = ""
    # True: the function's vertex code lives in streaming memory and is loaded by CodeLoad (every
    # function that is the target of a CodeLoad is treated so). See ipu/codeload.py.
    code_in_streaming_memory: bool = False


@dataclass(eq=False)
class RemoteBuffer:
    """`entries` tensors of `shape` and `dtype` in streaming memory (see Graph.add_remote_buffer)."""

    name: str
    shape: tuple
    dtype: ElementType
    entries: int = 1

    def __post_init__(self):
        if self.entries < 1:
            raise ValueError(f"remote buffer {self.name!r}: entries must be >= 1, not {self.entries}")
        if any(s < 0 for s in self.shape):
            raise ValueError(f"remote buffer {self.name!r}: shape {self.shape} has a negative dimension")

    @property
    def numel(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    @property
    def entry_bytes(self) -> int:
        return self.numel * self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.entry_bytes * self.entries


def transfer_limit_message(nbytes: int, what: str, target: Target) -> str:
    limit = target.max_transfer_bytes
    return (f"{what} moves {nbytes:,} bytes in one transfer; the limit is {limit:,} bytes ({limit / 2**20:g} MiB, "
            f"the largest stream or remote-buffer copy Poplar makes): split the tensor over several entries or "
            f"remote buffers")
