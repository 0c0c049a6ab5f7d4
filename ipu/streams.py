"""The host stream kinds: `HostToDevice(stream, dst)` and `DeviceToHost(src, stream)`.

Each moves one element of a host stream (the next one of the connected buffer) between the host
and a tensor's tile memory, after a sync. Cost: `costs.host_transfer_tile_cycles` (every tile's
bytes over the exchange, the whole over the host link plus its latency).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from . import costs
from .copytables import copy_runs, runs
from .errors import CompileError, StreamError
from .kinds import ProgramKind, StepKind, Use, register_kind
from .nodes import Seq, StepRef
from .program import DeviceToHost, HostToDevice

if TYPE_CHECKING:
    from .graph_objects import HostStream

__all__ = ["DEVICE_TO_HOST_STEP", "HOST_TO_DEVICE_STEP", "HostTransfer", "host_table"]


@dataclass(eq=False)
class HostTransfer:
    """The payload of a host stream step: byte runs between the host element (row-major) and
    tile memory, and the stream."""

    stream: HostStream
    to_device: bool
    src_off: np.ndarray
    dst_off: np.ndarray
    nbytes: np.ndarray


def host_table(comp, t, to_device: bool, what: str):
    """Copy runs between the host-side image of `t` (row-major bytes) and its tile memory:
    (src_off, dst_off, nbytes, run_tiles)."""
    isz = t.dtype.itemsize
    addr, tiles = comp.addresses(t, what)
    host = np.arange(t.numel, dtype=np.int64) * isz
    zeros = np.zeros_like(tiles)
    if to_device:
        src_off, dst_off, nbytes, _, run_tiles = runs(host, addr, zeros, tiles, isz)
    else:
        src_off, dst_off, nbytes, run_tiles, _ = runs(addr, host, tiles, zeros, isz)
    return src_off, dst_off, nbytes, run_tiles


def check_stream(p) -> None:
    """Refuse a stream node whose stream goes the other way or does not match its tensor."""
    to_dev = isinstance(p, HostToDevice)
    t = p.dst if to_dev else p.src
    s = p.stream
    if s.to_device != to_dev:
        raise CompileError(f"stream {s.name!r} goes the other way")
    if t.numel != s.numel or t.dtype != s.dtype:
        raise CompileError(
            f"stream {s.name!r} carries {s.dtype.name}{list(s.shape)} but tensor {t.name!r} is "
            f"{t.dtype.name}{list(t.shape)}"
        )


def _compile(comp, p):
    to_dev = isinstance(p, HostToDevice)
    t = p.dst if to_dev else p.src
    s = p.stream
    check_stream(p)
    kind = "host_to_device" if to_dev else "device_to_host"
    if t.numel == 0:  # moves nothing: no tile waits for the link, so no sync and no cycles; the
        # step stays so the stream still counts the transfer (and calls its callback) on the host
        none = np.zeros(0, np.int64)
        return StepRef(comp.add_step(kind, p.name or f"{kind} {s.name}", 0,
                                     payload=HostTransfer(s, to_dev, none, none, none)).id)
    sync = comp.sync(p.name or "stream")
    src_off, dst_off, nbytes, run_tiles = host_table(comp, t, to_dev, f"stream {s.name!r}")
    tile_cycles, cycles = costs.host_transfer_tile_cycles(run_tiles, nbytes, comp.target)
    if s.nbytes > comp.target.max_transfer_bytes:
        raise CompileError(
            f"stream {s.name!r} moves {s.nbytes:,} bytes in one transfer; the limit is "
            f"{comp.target.max_transfer_bytes:,} (128 MiB): split it into smaller tensors"
        )
    step = comp.add_step(kind, p.name or f"{kind} {s.name}", cycles, tile_cycles,
                         payload=HostTransfer(s, to_dev, src_off, dst_off, nbytes), bytes_moved=s.nbytes)
    return Seq((sync, StepRef(step.id)))


def _uses(p):
    if isinstance(p, HostToDevice):
        v = p.dst.variable
        return [Use(v, False, True, p.dst.numel == v.numel)]
    return [Use(p.src.variable, True, False)]


def _run(engine, x: HostTransfer, reps) -> None:
    s = x.stream
    if x.to_device:
        for r in reps:
            elem = np.ascontiguousarray(engine.stream_element(s, r)).view(np.uint8)
            copy_runs(elem, engine.memory[r], x.src_off, x.dst_off, x.nbytes)
    else:
        for r in reps:
            elem = engine.stream_element(s, r)
            if not elem.flags.c_contiguous:
                raise StreamError(f"stream {s.name!r}: the host buffer must be C-contiguous")
            copy_runs(engine.memory[r], elem.view(np.uint8), x.src_off, x.dst_off, x.nbytes)
            if s.callback is not None:
                s.callback(elem.reshape(s.shape).copy(), r)
    engine.advance_stream(s)


def _lower(loop, x: HostTransfer):
    """The stream's next element moves in the compiled loop, unless a host callback must see it."""
    return None if x.stream.callback is not None else [loop.stream(x)]


HOST_TO_DEVICE_STEP = StepKind("host_to_device", "host")
DEVICE_TO_HOST_STEP = StepKind("device_to_host", "host")
register_kind(ProgramKind("host_stream", (HostToDevice, DeviceToHost), _compile, _uses, HostTransfer, _run, _lower,
                          (HOST_TO_DEVICE_STEP, DEVICE_TO_HOST_STEP)))
