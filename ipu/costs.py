"""Cycle models of the machine's own steps: worker scheduling, exchange, sync, host transfers.

Codelets carry their own cost models; this module prices everything between them. Every formula
names its source.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import interpreted
from .links import link_phase_cycles
from .target import Target

__all__ = ["branch_cycles", "compute_set_tile_cycles", "distinct_runs", "exchange_costs", "exchange_tile_cycles",
           "host_transfer_tile_cycles", "sync_cycles"]


@njit(cache=True)
def _schedule(tiles, cycles, supervisor, further, num_tiles, workers, launch):
    """Tile cycles of a compute set.

    Worker vertices go, in the order they were added, to the least loaded of the tile's worker
    contexts (a further region of a multi-region vertex, `further`, to its vertex's context); the
    contexts share the tile's issue slots round robin, so a context advances one instruction every
    `workers` tile cycles and the tile is busy for workers x (the most loaded context's thread
    cycles). Supervisor vertices occupy the whole tile one after another and their
    cycles are already tile cycles. Source: Poplar Vertex programming guide (barrel scheduling of
    6 worker contexts); poplibs estimators return worker cycles for worker vertices and
    supervisor + 6 x max(worker) for supervisor vertices.
    """
    load = np.zeros((num_tiles, workers), np.int64)
    sup = np.zeros(num_tiles, np.int64)
    last = np.zeros(num_tiles, np.int64)  # each tile's context of its latest worker vertex
    for v in range(tiles.shape[0]):
        t = tiles[v]
        if supervisor[v]:
            sup[t] += cycles[v]
        elif further[v]:
            load[t, last[t]] += cycles[v]
        else:
            w = 0
            for k in range(1, workers):
                if load[t, k] < load[t, w]:
                    w = k
            load[t, w] += cycles[v]
            last[t] = w
    out = np.zeros(num_tiles, np.int64)
    for t in range(num_tiles):
        m = 0
        for k in range(workers):
            if load[t, k] > m:
                m = load[t, k]
        out[t] = sup[t] + workers * m
    used = np.zeros(num_tiles, np.bool_)
    for v in range(tiles.shape[0]):
        used[tiles[v]] = True
    for t in range(num_tiles):
        if used[t]:
            out[t] += launch
    return out


interpreted.register(_schedule, np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.bool_),
                     np.zeros(0, np.bool_), 1, 6, 1)


def compute_set_tile_cycles(tiles, cycles, supervisor, target: Target, further=None) -> np.ndarray:
    """Tile cycles of a compute set: its vertices scheduled as `_schedule` says, plus the fixed
    cost of starting the compute set on every tile that runs a vertex
    (Target.compute_set_launch_cycles, measured on hardware: see its source). `further` marks the
    rows that continue a multi-region vertex (VertexChunk.region > 0)."""
    tiles = np.asarray(tiles, np.int64)
    further = np.zeros(tiles.shape[0], np.bool_) if further is None else np.asarray(further, np.bool_)
    return interpreted.call(_schedule, tiles.size + target.num_tiles, tiles, np.asarray(cycles, np.int64),
                            np.asarray(supervisor, np.bool_), further, target.num_tiles, target.worker_contexts,
                            target.compute_set_launch_cycles)


def distinct_runs(src_off, nbytes) -> np.ndarray:
    """Indices of the first occurrence of every distinct (source offset, size) run: a run that
    several tiles receive is sent once (the exchange multicasts)."""
    src_off = np.asarray(src_off, np.int64)
    nbytes = np.asarray(nbytes, np.int64)
    if src_off.size == 0:
        return np.zeros(0, np.int64)
    span = int(nbytes.max()) + 1
    if int(src_off.max()) < (2 ** 62) // span:  # one int64 key per run: a 1-D unique is a plain sort
        _, first = np.unique(src_off * span + nbytes, return_index=True)
    else:
        _, first = np.unique(np.stack([src_off, nbytes], 1), axis=0, return_index=True)
    return first


def distinct_run_ids(src_off, nbytes) -> np.ndarray:
    """A number per run, equal for runs with the same (source offset, size)."""
    src_off = np.asarray(src_off, np.int64)
    nbytes = np.asarray(nbytes, np.int64)
    if src_off.size == 0:
        return np.zeros(0, np.int64)
    span = int(nbytes.max()) + 1
    if int(src_off.max()) < (2 ** 62) // span:
        _, inv = np.unique(src_off * span + nbytes, return_inverse=True)
    else:
        _, inv = np.unique(np.stack([src_off, nbytes], 1), axis=0, return_inverse=True)
    return inv.ravel().astype(np.int64)


# Exchange code: the per-tile instructions of one exchange phase, counted from the phase's actual
# messages. The exchange is scheduled by the compiler: a sender executes a `send` per message
# (with the source address set up first), a receiver points its incoming multiplexer at the
# sending tile and its incoming address at the destination, and data then lands at consecutive
# addresses with no further instruction (Graphcore IPU Programmer's Guide, "Exchange"; Jia et al.
# 2019, "Dissecting the Graphcore IPU architecture via microbenchmarking", section 3). Tile
# instructions are 32 bits, so (assumption: one instruction per register set-up):
EXCHANGE_CODE_SEND = 8  # address set-up + send, per distinct run sent (a multicast run is sent once)
EXCHANGE_CODE_RECEIVE = 4  # one put, whenever the sending tile changes or the destination jumps
EXCHANGE_CODE_PHASE = 16  # entering and leaving the phase, on every tile that takes part


def exchange_code_bytes(src_tile, dst_tile, src_off, dst_off, nbytes, num_tiles: int, distinct=None) -> np.ndarray:
    """Bytes of exchange code every tile needs for one exchange phase, from its runs (in the
    order the copy lists them, which is the order each receiver takes them in).

    sends: EXCHANGE_CODE_SEND per distinct (source offset, size) run leaving a tile; receives:
    EXCHANGE_CODE_RECEIVE per *receive region*, a stretch of runs from one sending tile landing
    at consecutive addresses (a new region starts when the sender changes or the destination is
    not contiguous with the previous run); plus EXCHANGE_CODE_PHASE per tile taking part. Runs
    within one tile are on-tile copies and need no exchange code. `distinct`: distinct_runs of the
    runs between tiles, when the caller has it (exchange_tile_cycles needs the same).
    """
    src_tile = np.asarray(src_tile, np.int64)
    dst_tile = np.asarray(dst_tile, np.int64)
    remote = src_tile != dst_tile
    out = np.zeros(num_tiles, np.int64)
    if not remote.any():
        return out
    st, dt = src_tile[remote], dst_tile[remote]
    so, do, nb = (np.asarray(x, np.int64)[remote] for x in (src_off, dst_off, nbytes))
    first = distinct_runs(so, nb) if distinct is None else distinct
    out += np.bincount(st[first], minlength=num_tiles) * EXCHANGE_CODE_SEND
    order = np.argsort(dt, kind="stable")
    st, dt, do, nb = st[order], dt[order], do[order], nb[order]
    new = np.ones(dt.size, bool)
    new[1:] = (dt[1:] != dt[:-1]) | (st[1:] != st[:-1]) | (do[1:] != do[:-1] + nb[:-1])
    out += np.bincount(dt[new], minlength=num_tiles) * EXCHANGE_CODE_RECEIVE
    busy = (np.bincount(st, minlength=num_tiles) + np.bincount(dt, minlength=num_tiles)) > 0
    out += busy * EXCHANGE_CODE_PHASE
    return out


def _bus_keys(src_off, nbytes, dst_tile):
    """One int64 per run, (source run, receiving tile) = ((src_off * span + nbytes) * tiles + dst_tile),
    with the `span` and `tiles` that decode it; None when the keys would not fit in int64."""
    span = int(nbytes.max()) + 1
    tiles = int(dst_tile.max()) + 2  # dst_tile ^ 1 fits below it
    if int(src_off.max()) >= (2 ** 62) // (span * tiles):
        return None
    return (src_off * span + nbytes) * tiles + dst_tile, span, tiles


def _partner_received(keys: np.ndarray, tiles: int) -> np.ndarray:
    """For sorted (source run, receiving tile) keys (_bus_keys): whether the same run also lands
    on the other tile of the receiver's bus pair (the key with the tile's lowest bit flipped,
    the next or previous distinct key). Found from neighbours in the sorted keys: no search."""
    first = np.ones(keys.size, bool)
    first[1:] = keys[1:] != keys[:-1]
    u = keys[first]  # the distinct keys, ascending
    group = np.cumsum(first) - 1  # each key's place in u
    up = np.zeros(u.size, bool)  # u[i] + 1 is a key too
    up[:-1] = u[1:] == u[:-1] + 1
    down = np.zeros(u.size, bool)  # u[i] - 1 is a key too
    down[1:] = up[:-1]
    odd = (u % tiles) & 1
    return np.where(odd == 1, down, up)[group]


def shared_bus_weights(src_off, nbytes, dst_tile, target: Target) -> np.ndarray:
    """Per run: 1.0, or 0.5 when the same source run also lands on the other tile of the
    receiver's exchange bus pair (tiles 2j and 2j + 1 on the Mk2): the pair then takes the data
    over its shared 64-bit bus, each tile receiving at twice the single-tile rate. Source: poplibs
    ExchangeEstimator (popops/lib/popops/ExchangeEstimator.cpp, getCycles: the speed-up by
    sharing the exchange bus when consecutive tiles receive the same data) with
    Target::getTilesPerSharedExchangeBus = 2 (Target.tiles_per_shared_exchange_bus)."""
    src_off = np.asarray(src_off, np.int64)
    weights = np.ones(src_off.size, np.float64)
    share = int(target.tiles_per_shared_exchange_bus)
    if share != 2 or src_off.size < 2:
        return weights
    nbytes = np.asarray(nbytes, np.int64)
    dst_tile = np.asarray(dst_tile, np.int64)
    packed = _bus_keys(src_off, nbytes, dst_tile)
    if packed is None:  # runs numbered by distinct_run_ids instead of their offsets
        packed = _bus_keys(distinct_run_ids(src_off, nbytes), np.zeros_like(nbytes), dst_tile)
        assert packed is not None  # run ids < runs: always fit
    keys, _, tiles = packed
    order = np.argsort(keys, kind="stable")
    weights[order[_partner_received(keys[order], tiles)]] = 0.5
    return weights


def _received_bytes(src_off, nbytes, dst_tile, target: Target, n: int) -> np.ndarray:
    """Bytes each tile receives in one exchange phase (float64), a run that both tiles of a bus
    pair receive counting half (shared_bus_weights). The sum is the same in any order (whole
    and half bytes, exact in float64), so the runs are taken in the order of their sorted keys,
    with their sizes and tiles decoded from them: one sort and no gather."""
    if int(target.tiles_per_shared_exchange_bus) == 2 and src_off.size >= 2:
        packed = _bus_keys(src_off, nbytes, dst_tile)
        if packed is not None:
            keys, span, tiles = packed
            keys = np.sort(keys)
            tile = keys % tiles
            size = (keys // tiles) % span
            w = np.where(_partner_received(keys, tiles), 0.5, 1.0)
            return np.bincount(tile, weights=size * w, minlength=n)
    w = shared_bus_weights(src_off, nbytes, dst_tile, target)
    return np.bincount(dst_tile, weights=nbytes * w, minlength=n)


def exchange_tile_cycles(src_tile, dst_tile, src_off, nbytes, target: Target, distinct=None) -> tuple[np.ndarray, int]:
    """Per-tile cycles of one exchange phase, and the extra cycles of crossing IPUs.

    On-IPU: a tile sends and receives 4 bytes per cycle in each direction (poplibs
    ExchangeEstimator, exchangeBytesPerCycle = 4), and a run sent to several tiles is sent once
    (the exchange multicasts). A tile's phase costs the fixed exchange overhead plus
    max(bytes sent, bytes received) / 4, a run that both tiles of an exchange bus pair receive
    counting half for each (shared_bus_weights). Copies within one tile go through the load/store path at
    8 bytes written per cycle (Jia et al. 2019). Between IPUs: the runs cross the IPU-Links wired
    between their IPUs (ipu/links.py: the IPU-M2000 ladder shares an IPU's 10 links over its three
    neighbours; 128 Gbit/s x 0.85 per link, poplibs test util), which stream the words as the
    tiles send them, so the phase takes the slower of the tiles and the busiest link bundle, and
    adds an inter-IPU sync (poplibs test IPU model). Returns per-tile cycles and the cycles the
    step takes beyond its slowest tile. `distinct`: as for exchange_code_bytes.
    """
    n = target.num_tiles
    src_tile = np.asarray(src_tile, np.int64)
    dst_tile = np.asarray(dst_tile, np.int64)
    nbytes = np.asarray(nbytes, np.int64)
    remote = src_tile != dst_tile
    local = ~remote
    # multicast: a source run goes out once however many tiles receive it
    sent: np.ndarray  # float64 bytes (a weighted bincount)
    recv: np.ndarray
    if remote.any():
        first = distinct_runs(src_off[remote], nbytes[remote]) if distinct is None else distinct
        s_tiles = src_tile[remote][first]
        s_bytes = nbytes[remote][first]
        sent = np.bincount(s_tiles, weights=s_bytes, minlength=n)
        recv = _received_bytes(np.asarray(src_off, np.int64)[remote], nbytes[remote], dst_tile[remote], target, n)
    else:
        sent = recv = np.zeros(n)
    copied = np.bincount(src_tile[local], weights=nbytes[local], minlength=n) if local.any() else np.zeros(n)
    busy = (sent > 0) | (recv > 0) | (copied > 0)
    cycles = (np.ceil(np.maximum(sent, recv) / target.exchange_bytes_per_cycle)
              + np.ceil(copied / target.memory_write_bytes_per_cycle)
              + busy * target.exchange_overhead_cycles).astype(np.int64)
    return cycles, _inter_ipu_extra(src_tile, dst_tile, nbytes, cycles, target)


def _inter_ipu_extra(src_tile, dst_tile, nbytes, cycles, target: Target) -> int:
    """The cycles an exchange phase takes beyond its slowest tile when runs cross IPUs: the busiest
    link bundle's time when slower than the tiles, plus an inter-IPU sync (exchange_tile_cycles)."""
    if target.ipus <= 1:
        return 0
    src_ipu = src_tile // target.tiles_per_ipu
    dst_ipu = dst_tile // target.tiles_per_ipu
    cross = src_ipu != dst_ipu
    if not cross.any():
        return 0
    link = link_phase_cycles(src_ipu[cross], dst_ipu[cross], nbytes[cross], target)
    link += target.exchange_overhead_cycles  # the phase's start, as on a tile
    return max(0, link - int(cycles.max(initial=0))) + target.inter_ipu_sync_cycles()


@njit(cache=True)
def _slot(table, v, mask):
    """The slot of key v in an open-addressing table (linear probing): where it is, or the empty
    slot (-1) where it would go."""
    h = (((v ^ (v >> 29)) & 0x7FFFFFF) * 2654435761 >> 13) & mask
    while table[h] != -1 and table[h] != v:
        h = (h + 1) & mask
    return h


@njit(cache=True)
def _empty_table(table, runs):
    """Clear the head of `table` for a bucket of `runs` keys (a power of two, at most half full);
    its mask."""
    size = 16
    while size < 2 * runs:
        size *= 2
    table[:size] = -1
    return size - 1


@njit(cache=True)
def _exchange_kernel(src_tile, dst_tile, src_off, dst_off, nbytes, num_tiles, span, bus_pairs):
    """One pass of bucketing over an exchange's runs, then a small hash table per tile's bucket:
    per tile the bytes sent (each distinct (source offset, size) run once), received (a run both
    tiles of a bus pair receive counting half when `bus_pairs`), copied within the tile, the
    distinct runs sent, the receive regions and whether it takes part: what
    exchange_tile_cycles and exchange_code_bytes compute with global sorts, in time linear in
    the runs (a source offset lies on one tile, so distinct runs are distinct within their
    sending tile's bucket, and bus partners meet in their pair's bucket: keys v and v ^ 1). The
    tables replace a sort of each bucket (BERT-base: buckets of thousands of runs, a third of
    the pass); every sum is over distinct keys, so the order keys are met in does not matter.
    Keys are (src_off * span + nbytes) * 2 + (receiving tile & 1); the caller checks they fit in int64."""
    m = src_tile.shape[0]
    n = num_tiles
    sent = np.zeros(n, np.int64)
    recv2 = np.zeros(n, np.int64)
    copied = np.zeros(n, np.int64)
    sends = np.zeros(n, np.int64)
    regions = np.zeros(n, np.int64)
    part = np.zeros(n, np.bool_)
    last_st = np.full(n, -1, np.int64)
    last_end = np.zeros(n, np.int64)
    pairs = (n + 1) // 2
    s_ptr = np.zeros(n + 1, np.int64)
    d_ptr = np.zeros(pairs + 1, np.int64)
    for i in range(m):
        s = src_tile[i]
        d = dst_tile[i]
        if s == d:
            copied[s] += nbytes[i]
            continue
        part[s] = True
        part[d] = True
        if last_st[d] != s or dst_off[i] != last_end[d]:
            regions[d] += 1
        last_st[d] = s
        last_end[d] = dst_off[i] + nbytes[i]
        s_ptr[s + 1] += 1
        d_ptr[(d >> 1) + 1] += 1
    most = 0
    for t in range(n):
        most = max(most, s_ptr[t + 1])
        s_ptr[t + 1] += s_ptr[t]
    for p in range(pairs):
        most = max(most, d_ptr[p + 1])
        d_ptr[p + 1] += d_ptr[p]
    r = s_ptr[n]
    s_keys = np.empty(r, np.int64)
    d_keys = np.empty(r, np.int64)
    s_fill = s_ptr[:n].copy()
    d_fill = d_ptr[:pairs].copy()
    for i in range(m):
        s = src_tile[i]
        d = dst_tile[i]
        if s == d:
            continue
        key = src_off[i] * span + nbytes[i]
        s_keys[s_fill[s]] = key
        s_fill[s] += 1
        d_keys[d_fill[d >> 1]] = key * 2 + (d & 1)
        d_fill[d >> 1] += 1
    cap = 16  # the largest bucket's table: at most half full
    while cap < 2 * most:
        cap *= 2
    table = np.empty(cap, np.int64)  # keys (-1: an empty slot)
    count = np.empty(cap, np.int64)  # how many runs of each key a pair's bucket holds
    for t in range(n):  # distinct runs sent: each once, however many tiles receive it
        a = s_ptr[t]
        b = s_ptr[t + 1]
        if b == a:
            continue
        mask = _empty_table(table, b - a)
        for j in range(a, b):
            v = s_keys[j]
            h = _slot(table, v, mask)
            if table[h] == -1:
                table[h] = v
                sends[t] += 1
                sent[t] += v % span
    for p in range(pairs):  # received: a run landing on both tiles of a bus pair counts half on each
        a = d_ptr[p]
        b = d_ptr[p + 1]
        if b == a:
            continue
        mask = _empty_table(table, b - a)
        for j in range(a, b):
            v = d_keys[j]
            h = _slot(table, v, mask)
            if table[h] == -1:
                table[h] = v
                count[h] = 1
            else:
                count[h] += 1
        for h in range(mask + 1):
            v = table[h]
            if v == -1:
                continue
            shared = False
            if bus_pairs:
                shared = table[_slot(table, v ^ 1, mask)] != -1
            recv2[2 * p + (v & 1)] += count[h] * ((v >> 1) % span) * (1 if shared else 2)
    return sent, recv2, copied, sends, regions, part


def exchange_costs(src_tile, dst_tile, src_off, dst_off, nbytes, target: Target) -> tuple[np.ndarray, int, np.ndarray]:
    """An exchange phase's per-tile cycles, its extra cycles and its per-tile exchange code bytes:
    exchange_tile_cycles and exchange_code_bytes of the same runs (the same numbers, which
    tests/machine/test_cycles.py checks), from one linear pass when the compiled kernel is
    ready and the runs' keys fit in int64, else from those two."""
    src_tile, dst_tile, src_off, dst_off, nbytes = (np.ascontiguousarray(x, np.int64)
                                                     for x in (src_tile, dst_tile, src_off, dst_off, nbytes))
    n = target.num_tiles
    span = int(nbytes.max(initial=0)) + 1
    fits = src_off.size == 0 or (int(src_off.min()) >= 0 and int(src_off.max()) < (2 ** 61) // span)
    if not (fits and interpreted.ready(_exchange_kernel)):
        remote = src_tile != dst_tile
        distinct = distinct_runs(src_off[remote], nbytes[remote])
        cycles, extra = exchange_tile_cycles(src_tile, dst_tile, src_off, nbytes, target, distinct)
        return cycles, extra, exchange_code_bytes(src_tile, dst_tile, src_off, dst_off, nbytes, n, distinct)
    bus_pairs = int(target.tiles_per_shared_exchange_bus) == 2 and int(np.count_nonzero(src_tile != dst_tile)) >= 2
    sent, recv2, copied, sends, regions, part = _exchange_kernel(src_tile, dst_tile, src_off, dst_off, nbytes, n,
                                                                 span, bus_pairs)
    recv = recv2 / 2.0
    busy = (sent > 0) | (recv > 0) | (copied > 0)
    cycles = (np.ceil(np.maximum(sent, recv) / target.exchange_bytes_per_cycle)
              + np.ceil(copied / target.memory_write_bytes_per_cycle)
              + busy * target.exchange_overhead_cycles).astype(np.int64)
    extra = _inter_ipu_extra(src_tile, dst_tile, nbytes, cycles, target)
    code = sends * EXCHANGE_CODE_SEND + regions * EXCHANGE_CODE_RECEIVE + part * EXCHANGE_CODE_PHASE
    return cycles, extra, code


def sync_cycles(target: Target) -> int:
    """A barrier across the tiles of one IPU (poplibs CTC planner, ~90 cycles), or across several
    IPUs (poplibs test IPU model formula)."""
    if target.ipus > 1:
        return target.inter_ipu_sync_cycles()
    return target.sync_cycles


def host_transfer_tile_cycles(tiles, nbytes, target: Target) -> tuple[np.ndarray, int]:
    """A host stream copy: each tile receives (or sends) its bytes over the exchange at 4 B/cycle,
    and the whole transfer is limited by the host link (IPU-M2000: 2 x 100 Gbit/s shared by 4
    IPUs) plus its start-up latency. Returns per-tile cycles and the step's cycles."""
    n = target.num_tiles
    per_tile = np.bincount(np.asarray(tiles, np.int64), weights=np.asarray(nbytes, np.float64), minlength=n)
    tile_cycles = (np.ceil(per_tile / target.exchange_bytes_per_cycle)
                   + (per_tile > 0) * target.exchange_overhead_cycles).astype(np.int64)
    total = float(np.sum(nbytes))
    link = int(np.ceil(total / target.host_bytes_per_cycle())) + target.host_latency_cycles()
    return tile_cycles, max(int(tile_cycles.max(initial=0)), link)


def branch_cycles(target: Target) -> int:
    """Deciding an If/Switch: a sync, then the condition's word broadcast over the exchange to
    every tile (one exchange phase carrying 4 bytes)."""
    return sync_cycles(target) + target.exchange_overhead_cycles + 1


_Z = np.zeros(0, np.int64)
interpreted.register(_exchange_kernel, _Z, _Z, _Z, _Z, _Z, 1, 1, True)
