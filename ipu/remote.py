"""Streaming memory: remote buffers, remote loads and stores, merged transfers, and their costs.

Streaming memory is the DDR behind the IPU-Gateway of an IPU-M2000 (Poplar's remote buffers).
It is not tile memory: the engine keeps it in host memory, one store per replica, and allocates an
entry only when a program or the host first touches it. A remote buffer holds `entries` tensors of
one shape and type; `RemoteLoad` copies an entry into a tensor on the tiles, `RemoteStore` copies a
tensor into an entry. The entry is an int fixed at compile time or a one-element integer tensor
read when the program runs (the transfer tables only depend on the tensor's layout, so the entry
only moves the host side).

Cost of a transfer (BSP: the compiler puts a sync before it):
- every tile receives (or sends) its bytes over the exchange at 4 B/cycle plus the fixed phase
  overhead (poplibs ExchangeEstimator, as for host streams);
- the bytes of each IPU cross that IPU's link to the gateway at `Target.remote_bytes_per_second`
  (PCIe Gen4 x8 = 128 Gbit/s x 0.85, see target.py) after a fixed start-up latency
  (`Target.remote_latency_s`, an assumption of ~1 us);
- the step costs the larger of the two (the exchange streams while the link delivers).
A single transfer larger than `Target.max_transfer_bytes` (128 MiB, Poplar's DataStream limit) is
refused at compile time.

`MultiExchange` merges host and remote transfers into one step (PopART's MultiExchangeOp, which
`popxl.transforms.merge_exchange` produces): one sync, one exchange phase in which every tile
moves all its bytes, host bytes over the host link and remote bytes over the gateway link (they
share the IPU's link, so their times add), and one start-up latency (the longer one).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .copytables import copy_runs
from .errors import CompileError, IpuError
from .graph_objects import RemoteBuffer, transfer_limit_message
from .kinds import ProgramKind, StepKind, Use, register_kind, run_payload
from .nodes import ScalarRef, Seq, StepRef
from .program import CodeLoad, DeviceToHost, HostToDevice, MultiExchange, RemoteLoad, RemoteStore
from .streams import DEVICE_TO_HOST_STEP, HOST_TO_DEVICE_STEP, HostTransfer, check_stream, host_table
from .target import Target
from .tensor import Tensor

__all__ = ["CODE_LOAD_STEP", "CodeLoadInfo", "MultiTransfer", "REMOTE_LOAD_STEP", "REMOTE_STORE_STEP",
           "RemoteTransfer", "StreamingMemory", "code_load_cycles", "exchange_tile_cycles", "remote_link_cycles",
           "remote_transfer_cycles", "transfer_uses"]


@dataclass(eq=False)
class RemoteTransfer:
    """What a remote_load / remote_store step moves: the buffer, the direction and the entry (a
    constant, or where the engine reads the offset tensor in tile memory)."""

    buffer: RemoteBuffer
    load: bool
    entry: int | None
    offset_ref: ScalarRef | None
    name: str  # the step's name, for messages
    src_off: np.ndarray  # byte runs between the entry and tile memory
    dst_off: np.ndarray
    nbytes: np.ndarray


@dataclass(eq=False)
class MultiTransfer:
    """What a merged transfer step (MultiExchange) moves: its parts (HostTransfer / RemoteTransfer),
    carried out in order in one phase."""

    parts: list


@dataclass(eq=False)
class CodeLoadInfo:
    """What a code_load step loads: function names and the code bytes it brings to every tile
    (filled in by ipu/codeload.py once every compute set is known)."""

    functions: tuple  # names
    objects: tuple = ()  # the ipu.Functions
    tile_bytes: np.ndarray | None = None


# ------------------------------------------------------------------------------------------------
# costs


def exchange_tile_cycles(run_tiles, nbytes, target: Target) -> np.ndarray:
    """Per tile: its bytes over the exchange at 4 B/cycle, plus the phase overhead if it moves any
    (poplibs ExchangeEstimator, exchangeBytesPerCycle = 4)."""
    per_tile = np.bincount(np.asarray(run_tiles, np.int64), weights=np.asarray(nbytes, np.float64),
                           minlength=target.num_tiles)
    return (np.ceil(per_tile / target.exchange_bytes_per_cycle)
            + (per_tile > 0) * target.exchange_overhead_cycles).astype(np.int64)


def remote_link_cycles(run_tiles, nbytes, target: Target) -> int:
    """The busiest IPU's bytes over its gateway link, plus the start-up latency."""
    nbytes = np.asarray(nbytes, np.float64)
    if nbytes.sum() == 0:
        return 0
    per_ipu = np.bincount(np.asarray(run_tiles, np.int64) // target.tiles_per_ipu, weights=nbytes,
                          minlength=target.ipus)
    return int(np.ceil(per_ipu.max() / target.remote_bytes_per_cycle())) + target.remote_latency_cycles()


def remote_transfer_cycles(run_tiles, nbytes, target: Target) -> tuple[np.ndarray, int]:
    """(per-tile cycles, step cycles) of one remote load or store."""
    tile_cycles = exchange_tile_cycles(run_tiles, nbytes, target)
    return tile_cycles, max(int(tile_cycles.max(initial=0)), remote_link_cycles(run_tiles, nbytes, target))


def code_load_cycles(tile_bytes: np.ndarray, target: Target, sync: int) -> tuple[np.ndarray, int]:
    """A code load is a remote load of every tile's code bytes: per-tile exchange time, the link
    time of the busiest IPU's bytes, plus the sync before it (counted in the step)."""
    tiles = np.flatnonzero(tile_bytes)
    tile_cycles = exchange_tile_cycles(tiles, tile_bytes[tiles], target)
    link = remote_link_cycles(tiles, tile_bytes[tiles], target)
    return tile_cycles, sync + max(int(tile_cycles.max(initial=0)), link)


# ------------------------------------------------------------------------------------------------
# timeline


def transfer_uses(p):
    """(variable, read, write) of every tensor a transfer node touches (for liveness)."""
    if isinstance(p, RemoteLoad):
        out = [Use(p.dst.variable, False, True)]
        off = p.offset
    elif isinstance(p, RemoteStore):
        out = [Use(p.src.variable, True, False)]
        off = p.offset
    elif isinstance(p, HostToDevice):
        return [Use(p.dst.variable, False, True)]
    elif isinstance(p, DeviceToHost):
        return [Use(p.src.variable, True, False)]
    elif isinstance(p, MultiExchange):
        return [u for q in p.programs for u in transfer_uses(q)]
    else:  # CodeLoad: code is not data
        return []
    if isinstance(off, Tensor):
        out.insert(0, Use(off.variable, True, False))
    return out


# ------------------------------------------------------------------------------------------------
# compile


def _check_size(nbytes: int, what: str, target: Target) -> None:
    if nbytes > target.max_transfer_bytes:
        raise CompileError(transfer_limit_message(nbytes, what, target))


@dataclass
class _Part:
    """One transfer of a merged or single transfer step, before it becomes a step."""

    kind: str
    name: str
    payload: object
    run_tiles: np.ndarray
    nbytes: np.ndarray
    bytes_moved: int


def _remote_part(comp, p) -> _Part:
    load = isinstance(p, RemoteLoad)
    t = p.dst if load else p.src
    rb = p.buffer
    if not isinstance(rb, RemoteBuffer):
        raise CompileError(f"{type(p).__name__} {p.name!r} needs an ipu.RemoteBuffer (Graph.add_remote_buffer)")
    kind = "remote_load" if load else "remote_store"
    if t.numel != rb.numel or t.dtype != rb.dtype:
        raise CompileError(
            f"{kind} {p.name!r}: remote buffer {rb.name!r} holds {rb.dtype.name}{list(rb.shape)} entries but "
            f"tensor {t.name!r} is {t.dtype.name}{list(t.shape)}"
        )
    _check_size(rb.entry_bytes, f"{kind} {p.name or rb.name!r}", comp.target)
    entry, ref = None, None
    if isinstance(p.offset, Tensor):
        if not (p.offset.dtype.name.startswith("int") or p.offset.dtype.name.startswith("uint")):
            raise CompileError(f"{kind} {p.name!r}: the offset tensor {p.offset.name!r} must be an integer, "
                               f"not {p.offset.dtype.name}")
        ref = comp.scalar_ref(p.offset, f"{kind} offset")
        where = f"[{p.offset.name}]"
    else:
        entry = int(p.offset)
        if not 0 <= entry < rb.entries:
            raise CompileError(f"{kind} {p.name!r}: entry {entry} is outside remote buffer {rb.name!r} of "
                               f"{rb.entries} entries")
        where = f"[{entry}]"
    if t.numel:
        src_off, dst_off, nbytes, run_tiles = host_table(comp, t, load, f"{kind} {rb.name!r}")
    else:
        src_off = dst_off = nbytes = run_tiles = np.zeros(0, np.int64)
    name = p.name or f"{kind} {rb.name}{where}"
    payload = RemoteTransfer(rb, load, entry, ref, name, src_off, dst_off, nbytes)
    return _Part(kind, name, payload, run_tiles, nbytes, rb.entry_bytes)


def _host_part(comp, p) -> _Part:
    to_dev = isinstance(p, HostToDevice)
    t = p.dst if to_dev else p.src
    s = p.stream
    check_stream(p)
    _check_size(s.nbytes, f"stream {s.name!r}", comp.target)
    src_off, dst_off, nbytes, run_tiles = host_table(comp, t, to_dev, f"stream {s.name!r}")
    kind = "host_to_device" if to_dev else "device_to_host"
    payload = HostTransfer(s, to_dev, src_off, dst_off, nbytes)
    return _Part(kind, p.name or f"{kind} {s.name}", payload, run_tiles, nbytes, s.nbytes)


def _compile_transfer(comp, p):
    """A RemoteLoad / RemoteStore: a sync, then the transfer (neither when the entry is empty:
    nothing crosses the link, so the step costs nothing)."""
    part = _remote_part(comp, p)
    if part.bytes_moved == 0:
        return StepRef(comp.add_step(part.kind, part.name, 0, payload=part.payload).id)
    sync = comp.sync(p.name or "remote")
    tile_cycles, cycles = remote_transfer_cycles(part.run_tiles, part.nbytes, comp.target)
    step = comp.add_step(part.kind, part.name, cycles, tile_cycles, payload=part.payload,
                         bytes_moved=part.bytes_moved)
    return Seq((sync, StepRef(step.id)))


def _compile_multi(comp, p: MultiExchange):
    """Merged transfers: a sync, then one step whose parts run in order in one phase (neither
    sync nor cycles when every part is empty)."""
    if not p.programs:
        raise CompileError("MultiExchange needs at least one transfer")
    target = comp.target
    parts, host_bytes, remote_tiles, remote_bytes = [], 0, [], []
    for q in p.programs:
        if isinstance(q, (RemoteLoad, RemoteStore)):
            part = _remote_part(comp, q)
            remote_tiles.append(part.run_tiles)
            remote_bytes.append(part.nbytes)
        else:
            part = _host_part(comp, q)
            host_bytes += int(np.sum(part.nbytes))
        parts.append(part)
    names = ", ".join(q.name or parts[i].name for i, q in enumerate(p.programs))
    name = p.name or f"multi_exchange ({names})"
    payload = MultiTransfer([x.payload for x in parts])
    if not any(x.bytes_moved for x in parts):
        return StepRef(comp.add_step(parts[0].kind, name, 0, payload=payload).id)
    sync = comp.sync(p.name or "multi_exchange")
    tiles = np.concatenate([x.run_tiles for x in parts])
    nbytes = np.concatenate([x.nbytes for x in parts])
    tile_cycles = exchange_tile_cycles(tiles, nbytes, target)
    link, latency = 0, 0
    if any(isinstance(q, (HostToDevice, DeviceToHost)) for q in p.programs):
        link += int(np.ceil(host_bytes / target.host_bytes_per_cycle()))
        latency = max(latency, target.host_latency_cycles())
    if remote_tiles:
        rt, rb = np.concatenate(remote_tiles), np.concatenate(remote_bytes)
        if rb.sum():
            per_ipu = np.bincount(rt // target.tiles_per_ipu, weights=rb.astype(np.float64), minlength=target.ipus)
            link += int(np.ceil(per_ipu.max() / target.remote_bytes_per_cycle()))
            latency = max(latency, target.remote_latency_cycles())
    cycles = max(int(tile_cycles.max(initial=0)), link + latency)
    step = comp.add_step(parts[0].kind, name, cycles, tile_cycles, payload=payload,
                         bytes_moved=int(sum(x.bytes_moved for x in parts)))
    return Seq((sync, StepRef(step.id)))


def _compile_code_load(comp, p: CodeLoad):
    """One step whose cycles (its sync included) are set by ipu/codeload.py once the code of
    every function is known."""
    if not p.functions:
        raise CompileError("CodeLoad needs at least one function")
    names = tuple(f.name for f in p.functions)
    step = comp.add_step("code_load", p.name or f"code_load {', '.join(names)}", 0,
                         payload=CodeLoadInfo(names, tuple(p.functions)))
    return StepRef(step.id)


# ------------------------------------------------------------------------------------------------
# engine


class StreamingMemory:
    """The remote buffers of every replica, in host memory. An entry is allocated (zero-filled)
    the first time a program or the host touches it."""

    def __init__(self, buffers: dict, replicas: int):
        self.buffers = dict(buffers)
        self.replicas = int(replicas)
        self._entries: list[dict] = [dict() for _ in range(self.replicas)]

    def _buffer(self, buffer) -> RemoteBuffer:
        if isinstance(buffer, RemoteBuffer):
            return buffer
        try:
            return self.buffers[buffer]
        except KeyError:
            raise IpuError(f"no remote buffer named {buffer!r}; buffers are {sorted(self.buffers)}") from None

    def entry(self, replica: int, buffer, index: int) -> np.ndarray:
        """The bytes of one entry of one replica (allocated on first use)."""
        rb = self._buffer(buffer)
        index = int(index)
        if not 0 <= index < rb.entries:
            raise IpuError(f"entry {index} is outside remote buffer {rb.name!r} of {rb.entries} entries")
        d = self._entries[replica]
        key = (rb.name, index)
        e = d.get(key)
        if e is None:
            e = d[key] = np.zeros(rb.entry_bytes, np.uint8)
        return e

    def read(self, buffer, entry: int | None = None, replica: int = 0) -> np.ndarray:
        """Entry `entry` of a buffer (shape of the buffer's tensors), or all entries stacked."""
        rb = self._buffer(buffer)
        idx = range(rb.entries) if entry is None else [entry]
        out = np.stack([self.entry(replica, rb, i).view(rb.dtype.numpy).reshape(rb.shape).copy() for i in idx])
        return out if entry is None else out[0]

    def write(self, buffer, data, entry: int | None = None, replica: int | None = None) -> None:
        """Write one entry (data of the buffer's tensor shape) or all entries (a leading entries
        axis), on every replica or one."""
        rb = self._buffer(buffer)
        arr = np.asarray(data)
        idx = list(range(rb.entries)) if entry is None else [int(entry)]
        if arr.size != rb.numel * len(idx):
            raise ValueError(f"cannot write data of shape {arr.shape} into {len(idx)} entr"
                             f"{'y' if len(idx) == 1 else 'ies'} of remote buffer {rb.name!r} "
                             f"({rb.dtype.name}{list(rb.shape)})")
        flat = np.ascontiguousarray(arr, dtype=rb.dtype.numpy).reshape(len(idx), -1)
        reps = range(self.replicas) if replica is None else [int(replica)]
        for r in reps:
            for k, i in enumerate(idx):
                self.entry(r, rb, i)[:] = flat[k].view(np.uint8)

    @property
    def bytes_allocated(self) -> int:
        return sum(e.nbytes for d in self._entries for e in d.values())


def _offset_value(engine, r: int, ref: ScalarRef) -> int:
    return int(engine.view(r, ref.storage)[ref.element])


def _run_transfer(engine, x: RemoteTransfer, reps) -> None:
    """Carry out a remote load / store (or a part of a merged transfer) on the replicas `reps`."""
    for r in reps:
        if x.offset_ref is None:
            assert x.entry is not None  # a constant entry when there is no offset tensor (remote_table)
            entry = x.entry
        else:
            entry = _offset_value(engine, r, x.offset_ref)
        if not 0 <= entry < x.buffer.entries:
            raise IpuError(f"{x.name}: offset {entry} is outside remote buffer {x.buffer.name!r} of "
                           f"{x.buffer.entries} entries (replica {r})")
        buf = engine.streaming.entry(r, x.buffer, entry)
        if x.load:
            copy_runs(buf, engine.memory[r], x.src_off, x.dst_off, x.nbytes)
        else:
            copy_runs(engine.memory[r], buf, x.src_off, x.dst_off, x.nbytes)


def _run_multi(engine, x: MultiTransfer, reps) -> None:
    for part in x.parts:
        run_payload(engine, part, reps)


REMOTE_LOAD_STEP = StepKind("remote_load", "streaming")
REMOTE_STORE_STEP = StepKind("remote_store", "streaming")
CODE_LOAD_STEP = StepKind("code_load", "streaming")
# streaming memory and collectives run in Python between compiled segments (no `lower`); a code
# load only lets time pass (no `run`), so the compiled loop counts its cycles
register_kind(ProgramKind("remote_transfer", (RemoteLoad, RemoteStore), _compile_transfer, transfer_uses,
                          RemoteTransfer, _run_transfer, steps=(REMOTE_LOAD_STEP, REMOTE_STORE_STEP)))
register_kind(ProgramKind("multi_exchange", (MultiExchange,), _compile_multi, transfer_uses, MultiTransfer,
                          _run_multi, steps=(REMOTE_LOAD_STEP, REMOTE_STORE_STEP, HOST_TO_DEVICE_STEP,
                                              DEVICE_TO_HOST_STEP)))
register_kind(ProgramKind("code_load", (CodeLoad,), _compile_code_load, transfer_uses, CodeLoadInfo,
                          steps=(CODE_LOAD_STEP,)))
