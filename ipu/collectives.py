"""Collectives between replicas: the `CrossReplica` program node, the cost of the algorithm it
stands for, and how the engine carries it out over the memories of the replicas.

A replica is one copy of the program on its own IPUs (`Engine(executable, replicas=N)` keeps one
memory per replica). A `CrossReplica` node reads `src` on every replica of a group and writes
`dst` on every replica of that group:

    all_reduce      dst[r] = op over the group of src            (same numel)
    all_gather      dst[r] = concat over the group of src        (dst numel = n x src numel)
    reduce_scatter  dst[r] = chunk rank(r) of (op over the group of src)  (src padded with zeros
                    to n x dst numel)
    slice           dst[r] = chunk rank(r) of src[r]             (no communication; RTS slicing)

`groups` lists the members of every group, in rank order (a replica's rank is its position in
its group); every group has the same size and the groups cover every replica once.

Cost model (GCL's syncful ring collectives, one step per ring hop)
-----------------------------------------------------------------
A group of n replicas forms a ring. The tensor of B bytes is cut into n chunks of B / n bytes.

- all_reduce = reduce-scatter then all-gather: 2 (n - 1) link steps; each replica sends
  2 (n - 1) / n x B bytes over its links (the bandwidth-optimal ring all-reduce, Patarasuk &
  Yuan 2009; GCL user guide, "Collective methods").
- reduce_scatter: n - 1 link steps, (n - 1) / n x B bytes sent per replica, and a reduction after
  each step.
- all_gather: n - 1 link steps, (n - 1) / n x B bytes sent per replica (B the gathered size).

Every step is: a sync across all IPUs of the group (the poplibs test IPU model formula
ceil(15 ns x f x (1 + nIPUs / 4) x 2) with nIPUs = n x IPUs per replica: GCL's default
"syncful" collectives synchronise before every step), then an exchange phase whose cycles are
the fixed exchange overhead plus the slower of (a) the chunk over the links and (b) the busiest
tile's share of the chunk through its exchange port at 4 B/cycle, then, for the reducing steps,
a compute phase in which every tile adds the chunk it received into its own data.

Link time: the same IPU-Link model as every cross-IPU copy (ipu/links.py). The replicas of a run
sit on the IPUs of one system, replica r on IPUs r x k .. (r + 1) x k - 1 (k IPUs per replica),
wired as the target says (IPU-M2000 ladder, C600 ring), neighbours joined by 2 IPU-Links at 128
Gbit/s x 0.85. A group's ring follows the wiring's neighbour ring (links.ring_order: the periphery
of the ladder, the ring GCL's collectives use), and GCL's default "bi-directional ring pair"
method (GCL user guide, "Collective methods") sends half of every chunk clockwise and half
anticlockwise, so each ring edge carries half a chunk each way. Every IPU holding part of the
tensor drives its own ring with its part. A hop takes as long as the busiest directed link bundle
of all the rings of all the groups at once (links.link_phase_cycles: traffic between IPUs that are
not neighbours is routed over the wiring and shares the bundles it crosses). For one IPU per
replica in a full ladder that is a chunk at 4 links' bandwidth (RING_LINKS, the two link
bundles of a replica's two ring neighbours); the earlier model priced every hop at 2 links
whatever the wiring.

Groups that span IPU-POD64 racks (GW-Links): the replicas of a run are numbered as their IPUs sit
in the system, replica r on IPUs r x k .. (r + 1) x k - 1 (k IPUs per replica), 64 IPUs per
IPU-POD64 logical rack. Racks are joined by GW-Links through the IPU-Gateway of each IPU-M2000:
two GW-Link ports ('east' and 'west') of 100 Gbit/s per IPU-M2000 of 4 IPUs (Graphcore,
"Switched GW-Links in large scale Pod systems" and the IPU-POD128 datasheet: IPU-POD64 racks
joined by GW-Link cables). A ring edge between replicas of different racks goes through the
sender's gateway: its clockwise half-chunk over the east port, the anticlockwise half over the
west port, at 100 Gbit/s x 0.85 (the IPU-Link efficiency, assumed for GW-Links too). All the rings
crossing at one IPU-M2000 share its ports, so a hop takes the slower of the IPU-Link time and the
busiest GW-Link port's bytes over its bandwidth. Which instance (host process) holds a replica
does not change the cost: the same collective costs the same on one IPU-POD whether one or many
PopDist instances drive it.

Reduction compute: poplibs' BinaryOp1D estimate (popopsCycleEstimators.cpp), the same model the
BinaryOp codelet uses: 11 + 6 x (29 + 2 + loops) tile cycles for float / half add-like operators,
one cycle per 64-bit vector (2 float, 4 half) per worker; integers run one element per 7 cycles;
min / max 4 cycles per vector (popops binaryOpPerfInfo).
"""
from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field

import numpy as np

from .compute import COMPUTE_STEP
from .copytables import copy_runs, runs
from .errors import CompileError, IpuError
from .exchange import EXCHANGE_STEP, SYNC_STEP
from .kinds import ProgramKind, Use, register_kind
from . import links
from .nodes import Seq, StepRef
from .program import Program
from .target import Target
from .tensor import Tensor

__all__ = ["CollectiveStep", "CrossReplica", "KINDS", "OPS", "Payload", "RING_LINKS", "cross_replica_sync_cycles",
           "groups_from_assignment", "link_bytes", "model_cycles", "plan", "reduce_tile_cycles", "replica_groups",
           "ring_bytes_per_cycle", "ring_link_cycles", "run", "Communicator", "gw_link_bytes_per_cycle", "gw_port_load",
           "spans_racks", "IPUS_PER_RACK", "IPUS_PER_M2000", "GW_LINK_GBPS"]

KINDS = ("all_reduce", "all_gather", "reduce_scatter", "slice")
OPS = ("add", "mean", "mul", "min", "max", "and", "or", "square_add", "local")

# Links a replica drives at once in a ring step between neighbours: half the chunk to each of its
# two ring neighbours, each over the 2 links joining them (see above; Target.ipu_links_per_cable)
RING_LINKS = 4
# IPU-POD systems (see the module docstring for the sources)
IPUS_PER_RACK = 64  # an IPU-POD64 logical rack
IPUS_PER_M2000 = 4
GW_LINK_GBPS = 100.0  # one GW-Link port; two ports (east, west) per IPU-M2000


# ------------------------------------------------------------------------------------------------
# groups


def replica_groups(replicas: int, stride: int = 1, group_size: int | None = None) -> list:
    """The groups of a (stride, group size) grouping of `replicas` replicas, members in rank order:
    group size g, members `stride` apart (PopXL's ReplicaGrouping). Default: one group of all."""
    replicas = int(replicas)
    if group_size is None:
        group_size = replicas // stride
    if stride < 1 or group_size < 1 or replicas % (stride * group_size):
        raise ValueError(f"stride {stride} and group size {group_size} do not partition {replicas} replicas")
    block = stride * group_size
    groups = []
    for b in range(0, replicas, block):
        for s in range(stride):
            groups.append([b + s + k * stride for k in range(group_size)])
    return groups


def groups_from_assignment(assignment) -> list:
    """Groups (members in ascending replica order) from the group index of every replica."""
    groups: dict[int, list] = {}
    for r, g in enumerate(assignment):
        groups.setdefault(int(g), []).append(r)
    return [groups[g] for g in sorted(groups)]


def _normalise_groups(groups) -> tuple:
    if groups is None:
        raise CompileError("CrossReplica needs its replica groups (ipu.replica_groups(replicas, ...))")
    out = tuple(tuple(int(r) for r in g) for g in groups)
    if not out or not out[0]:
        raise CompileError("CrossReplica: a collective needs at least one group of at least one replica")
    n = len(out[0])
    if any(len(g) != n for g in out):
        raise CompileError(f"CrossReplica: every replica group must have the same size, got {[len(g) for g in out]}")
    members = sorted(r for g in out for r in g)
    if members != list(range(len(members))):
        raise CompileError(f"CrossReplica: the groups {[list(g) for g in out]} must cover replicas 0..R-1 once each")
    return out


# ------------------------------------------------------------------------------------------------
# the program node


@dataclass(eq=False)
class CrossReplica(Program):
    """A collective between replicas (see the module docstring for the kinds and their costs)."""

    kind: str
    src: "Tensor"
    dst: "Tensor"
    groups: tuple  # any sequence of groups of replicas; a tuple of tuples after __post_init__
    op: str = "add"
    name: str = ""

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"CrossReplica kind must be one of {KINDS}, not {self.kind!r}")
        if self.op not in OPS:
            raise ValueError(f"CrossReplica op must be one of {OPS}, not {self.op!r}")
        self.groups = _normalise_groups(self.groups)

    @property
    def group_size(self) -> int:
        return len(self.groups[0])

    @property
    def replicas(self) -> int:
        return sum(len(g) for g in self.groups)


# ------------------------------------------------------------------------------------------------
# cost model


def cross_replica_sync_cycles(target: "Target", group_size: int) -> int:
    """A sync across every IPU of a group of replicas: ceil(15 ns x f x (1 + nIPUs / 4) x 2) with
    nIPUs = group size x IPUs per replica (poplibs test IPU model)."""
    n_ipus = max(1, int(group_size)) * target.ipus
    return int(math.ceil(target.inter_ipu_sync_ns * 1e-9 * target.clock_hz * (1 + n_ipus / 4) * 2))


def ring_bytes_per_cycle(target: "Target", group_size: int | None = None) -> float:
    """Bytes per cycle a replica moves in one ring step between neighbours: half the chunk over
    each neighbour's link bundle (2 x ipu_links_per_cable links; RING_LINKS on every shipped
    target). A ring of two has one neighbour: both halves share its bundle."""
    bundles = 1 if group_size == 2 else 2
    return bundles * target.ipu_links_per_cable * target.ipu_link_bytes_per_cycle()


def ring_link_cycles(target: "Target", groups, ipu_bytes) -> int:
    """Cycles of one ring hop on the IPU-Links: every group's ring in the wiring's neighbour-ring
    order, every IPU i of a replica sending half of its part ipu_bytes[i] of the chunk to the
    same IPU of the next replica and half to the previous one, all at once
    (links.link_phase_cycles over the whole system's wiring)."""
    k = max(1, int(target.ipus))
    replicas = sum(len(g) for g in groups)
    # the IPU-Links of an IPU-POD64 rack form one wiring; ring edges between racks take GW-Links
    # (priced apart, gw_port_load), never a path through the rest of the ladder
    rack_ipus = min(replicas * k, IPUS_PER_RACK)
    system = target.with_ipus(rack_ipus)
    pos = {ipu: i for i, ipu in enumerate(links.ring_order(system))}
    src, dst, nbytes = [], [], []
    for g in groups:
        n = len(g)
        if n < 2:
            continue
        ring = sorted(g, key=lambda r: (int(r) * k // IPUS_PER_RACK, pos[int(r) * k % IPUS_PER_RACK]))
        for j in range(n):
            a, b = int(ring[j]), int(ring[(j + 1) % n])
            if rack_of_ipu(a * k) != rack_of_ipu(b * k):
                continue
            for i in range(k):  # (a ring of two: both of a replica's halves go to its one neighbour)
                half = float(ipu_bytes[i]) / 2
                if half <= 0:
                    continue
                rack = rack_of_ipu(a * k + i) * IPUS_PER_RACK
                src += [a * k + i - rack, b * k + i - rack]
                dst += [b * k + i - rack, a * k + i - rack]
                nbytes += [half, half]
    if not src:
        return 0
    return links.link_phase_cycles(np.array(src), np.array(dst), np.array(nbytes), system)


def gw_link_bytes_per_cycle(target: "Target") -> float:
    """Bytes per cycle over one GW-Link port: 100 Gbit/s x the link efficiency / clock."""
    return GW_LINK_GBPS * 1e9 / 8 * target.ipu_link_efficiency / target.clock_hz


def rack_of_ipu(ipu: int) -> int:
    return int(ipu) // IPUS_PER_RACK


def gw_port_load(groups, ipus_per_replica: int, ipu_bytes) -> float:
    """Bytes the busiest GW-Link port carries in one ring hop: every ring edge between replicas in
    different IPU-POD64 racks sends half its chunk through the east port of the sender's IPU-M2000
    and half (the anticlockwise ring) through the west port of the receiver's. ipu_bytes[i]: the
    chunk bytes on IPU i of a replica. 0 when no group leaves its rack."""
    k = max(1, int(ipus_per_replica))
    east: dict[int, float] = {}
    west: dict[int, float] = {}
    for g in groups or ():
        n = len(g)
        if n < 2:
            continue
        for j in range(n):
            a, b = int(g[j]), int(g[(j + 1) % n])
            if n == 2 and j == 1:
                break  # a ring of two has one edge (both directions)
            for i in range(k):
                ia, ib = a * k + i, b * k + i
                if rack_of_ipu(ia) == rack_of_ipu(ib):
                    continue
                half = float(ipu_bytes[i]) / 2
                ma, mb = ia // IPUS_PER_M2000, ib // IPUS_PER_M2000
                east[ma] = east.get(ma, 0.0) + half
                west[mb] = west.get(mb, 0.0) + half
    return max([0.0, *east.values(), *west.values()])


def spans_racks(groups, ipus_per_replica: int) -> bool:
    k = max(1, int(ipus_per_replica))
    return any(len({rack_of_ipu(int(r) * k) for r in g}) > 1 for g in groups or ())


def link_bytes(kind: str, group_size: int, full_bytes: int) -> int:
    """Bytes each replica sends over its links: 2 (n-1)/n x B for all_reduce, (n-1)/n x B for
    reduce_scatter and all_gather (B the whole, unsharded tensor), 0 for slice."""
    n = int(group_size)
    if n <= 1 or kind == "slice":
        return 0
    chunk = -(-int(full_bytes) // n)
    steps = 2 * (n - 1) if kind == "all_reduce" else n - 1
    return steps * chunk


# per-op reduction cost: (cycles per loop, elements per loop for float, for half); ints one element
# per 7 cycles (popops binaryOpPerfInfo: ADD/MULTIPLY float, half (1, vector); MAX/MIN (4, vector)).
_REDUCE_LOOP = {"add": 1, "mean": 1, "mul": 1, "square_add": 2, "min": 4, "max": 4, "and": 1, "or": 1, "local": 0}


def reduce_tile_cycles(elements, itemsize: int, is_float: bool, op: str, workers: int = 6) -> np.ndarray:
    """Tile cycles of reducing `elements` received elements into a tile's own (poplibs BinaryOp1D
    estimate: 11 + workers x (29 + 2 + loops), loops = per-worker vectors x cycles per loop)."""
    e = np.asarray(elements, np.int64)
    per_worker = -(-e // workers)
    loop = _REDUCE_LOOP.get(op, 1)
    if is_float:
        width = max(1, 8 // itemsize)
        loops = -(-per_worker // width) * loop
    else:
        loops = per_worker * 7
    cyc = 11 + workers * (29 + 2 + loops)
    return np.where(e > 0, cyc, 0).astype(np.int64)


@dataclass
class CollectiveStep:
    """One step of a collective as the profile shows it."""

    kind: str  # sync | exchange | compute
    name: str
    cycles: int
    tile_cycles: np.ndarray | None = None
    bytes_moved: int = 0


def plan(kind: str, op: str, group_size: int, src_tile_bytes: np.ndarray, dst_tile_bytes: np.ndarray,
         src_bytes: int, dst_bytes: int, itemsize: int, is_float: bool, target: "Target",
         name: str = "", groups=None) -> list:
    """The steps of a collective and their cycles (see the module docstring).

    src_tile_bytes / dst_tile_bytes: bytes of src / dst on every tile of a replica. groups: the
    global replicas of every group, in ring order (for the GW-Links of groups that leave their
    IPU-POD64 rack; None: every group within one rack).
    """
    n = int(group_size)
    base = name or kind
    ovh = target.exchange_overhead_cycles
    bpc = target.exchange_bytes_per_cycle
    steps: list[CollectiveStep] = []
    if kind == "slice" or n == 1:
        # no communication: every tile copies its share (at most its dst bytes) through the
        # exchange (a local Copy of the rank's chunk)
        tb = np.asarray(dst_tile_bytes, np.int64)
        tc = np.where(tb > 0, ovh + -(-tb // bpc), 0).astype(np.int64)
        steps.append(CollectiveStep("exchange", f"{base} (local)", int(tc.max(initial=0)), tc, int(dst_bytes)))
        return steps
    if kind == "all_gather":
        full = n * int(src_bytes)
        share = np.asarray(src_tile_bytes, np.int64)  # every step forwards one whole shard
        red_share = None
    else:
        full = int(src_bytes) if kind == "all_reduce" else n * int(dst_bytes)
        share = -(-np.asarray(src_tile_bytes, np.int64) // n)
        red_share = -(-(np.asarray(src_tile_bytes, np.int64) // max(1, itemsize)) // n)  # elements
    chunk = -(-full // n)
    # a replica of several IPUs drives the rings of every IPU holding part of the tensor: the IPU
    # with the largest part sets the pace (one IPU per replica: the whole chunk)
    ipu_share = np.bincount(np.arange(len(share)) // target.tiles_per_ipu, weights=share,
                            minlength=target.ipus) if target.ipus > 1 else np.array([chunk])
    ipu_bytes = np.minimum(ipu_share, chunk)
    ring_groups = groups if groups is not None else [list(range(n))]
    link = ring_link_cycles(target, ring_groups, ipu_bytes)
    via = "IPU-Links"
    if groups is not None and spans_racks(groups, target.ipus):
        per_ipu = ipu_share if target.ipus > 1 else np.array([chunk])
        gw = int(math.ceil(gw_port_load(groups, target.ipus, per_ipu) / gw_link_bytes_per_cycle(target)))
        link = max(link, gw)
        via = "IPU-Links + GW-Links"
    sync = cross_replica_sync_cycles(target, n)
    tile_x = np.where(share > 0, ovh + -(-share // bpc), 0).astype(np.int64)
    x_cycles = max(ovh + link, int(tile_x.max(initial=0)))
    if red_share is not None and op != "local":
        tile_r = reduce_tile_cycles(red_share, itemsize, is_float, op, target.worker_contexts)
        r_cycles = int(tile_r.max(initial=0))
    else:
        tile_r, r_cycles = None, 0

    def hop(phase, i, reduce):
        steps.append(CollectiveStep("sync", f"{base}/{phase} {i}/{n - 1} sync ({n * target.ipus} IPUs)", sync))
        steps.append(CollectiveStep("exchange", f"{base}/{phase} {i}/{n - 1} (ring, {via})", x_cycles,
                                    tile_x, chunk))
        if reduce and r_cycles:
            steps.append(CollectiveStep("compute", f"{base}/{phase} {i}/{n - 1} reduce ({op})", r_cycles, tile_r))

    if kind in ("all_reduce", "reduce_scatter"):
        for i in range(1, n):
            hop("reduce_scatter", i, True)
    if kind in ("all_reduce", "all_gather"):
        for i in range(1, n):
            hop("all_gather", i, False)
    return steps


def model_cycles(kind: str, op: str, group_size: int, src_tile_bytes, dst_tile_bytes, src_bytes: int,
                 dst_bytes: int, itemsize: int, is_float: bool, target: "Target") -> int:
    """Total cycles of a collective (the sum of its planned steps)."""
    return sum(s.cycles for s in plan(kind, op, group_size, src_tile_bytes, dst_tile_bytes, src_bytes, dst_bytes,
                                      itemsize, is_float, target))


# ------------------------------------------------------------------------------------------------
# execution


@dataclass
class Payload:
    """What the engine needs to carry a collective out: the runs that gather src of one replica into
    a host array and scatter a host array into dst of one replica."""

    kind: str
    op: str
    groups: tuple
    dtype: np.dtype  # host dtype
    src_numel: int
    dst_numel: int
    src_runs: tuple  # (memory offsets, host byte offsets, byte counts)
    dst_runs: tuple  # (host byte offsets, memory offsets, byte counts)
    tag: int = 0  # the step carrying it: instances check they are at the same collective
    step_ids: tuple = ()  # every step of the collective (syncs, link exchanges, reductions)
    _spans: dict = field(default_factory=dict, repr=False)  # id(communicator) -> (its weakref, spanning members)


def _reduce(op: str, data: np.ndarray) -> np.ndarray:
    """Reduce (n, numel) over the group axis, adding in rank order. Integer results are exact
    whatever the order (they wrap as int32 does); float16 accumulates in float32 and is rounded
    once (the ring adds in its own order, so float sums may differ from hardware in the last bits)."""
    dt = data.dtype
    acc = data.astype(np.float32) if dt == np.float16 else data
    if op in ("add", "mean"):
        out = np.sum(acc, axis=0, dtype=acc.dtype)
        if op == "mean":
            out = out / np.asarray(data.shape[0], acc.dtype)
    elif op == "square_add":
        out = np.sum(acc * acc, axis=0, dtype=acc.dtype)
    elif op == "mul":
        out = np.prod(acc, axis=0, dtype=acc.dtype)
    elif op == "min":
        out = np.min(acc, axis=0)
    elif op == "max":
        out = np.max(acc, axis=0)
    elif op == "and":
        out = np.all(acc != 0, axis=0)
    elif op == "or":
        out = np.any(acc != 0, axis=0)
    else:  # local: no reduction (callers take each replica's own data)
        raise IpuError("internal: 'local' has no reduction")
    return np.asarray(out).astype(dt, copy=False)


class Communicator:
    """The replicas an engine holds among all replicas of a run, and how it reaches the others.

    The default (one process, every replica local) never communicates. A multi-instance run
    (PopDist, `popdist._backend.InstanceCommunicator`) holds replicas
    replica_offset .. replica_offset + local_replicas - 1 of total_replicas, and its `exchange`
    gives every instance the rows of the replicas it asks for (MPI, in rank order)."""

    replica_offset = 0
    local_replicas: int
    total_replicas: int

    def __init__(self, replicas: int):
        self.local_replicas = self.total_replicas = int(replicas)

    def instance_of(self, replica: int):
        return 0

    def exchange(self, tag: int, wanted, rows: dict, row_bytes: int) -> dict:  # pragma: no cover - never spans
        raise IpuError("internal: a single-process engine has no other instance to exchange with")


def _spanning(payload: Payload, comm) -> tuple:
    """Members of the groups whose replicas live in several instances (cached per communicator)."""
    # keyed by id, checked by identity: a freed communicator's id is reused by a new one (the one a
    # run without a communicator makes), and a stale entry would drop the rows the new one needs
    key = id(comm)
    entry = payload._spans.get(key)
    if entry is None or entry[0]() is not comm:
        spans = tuple(r for g in payload.groups if len({comm.instance_of(r) for r in g}) > 1 for r in g)
        try:
            entry = (weakref.ref(comm), spans)
        except TypeError:  # not weakly referable: worked out on every run
            return spans
        payload._spans[key] = entry
    return entry[1]


def run(payload: Payload, memory: np.ndarray, reps, copy_runs, comm: Communicator | None = None) -> None:
    """Carry out a collective on the replicas `reps` (those running this step in lock step).

    memory: the engine's (local replicas, bytes) array; row i is global replica
    comm.replica_offset + i. copy_runs(src, dst, src_off, dst_off, nbytes) copies byte runs (the
    engine's compiled copier). A group whose replicas live in several instances gets the other
    instances' source data through comm.exchange; every instance then reduces the same rows in
    the same rank order, so the result is bitwise what one instance holding all replicas computes."""
    if comm is None:
        comm = Communicator(memory.shape[0])
    off = comm.replica_offset
    local = range(off, off + memory.shape[0])
    present = set(off + int(r) for r in reps)
    covered = sum(len(g) for g in payload.groups)
    if covered != comm.total_replicas or memory.shape[0] != comm.local_replicas:
        raise IpuError(
            f"collective {payload.kind}: its replica groups cover {covered} replicas but the engine runs "
            f"{memory.shape[0]} of {comm.total_replicas}; compile for the replication the engine uses")
    dt = payload.dtype
    m_src, m_dst = payload.src_numel, payload.dst_numel
    s_mem, s_host, s_n = payload.src_runs
    d_host, d_mem, d_n = payload.dst_runs
    row_bytes = m_src * np.dtype(dt).itemsize

    def read_src(r):
        row = np.zeros(m_src, dt)
        copy_runs(memory[r - off], row.view(np.uint8), s_mem, s_host, s_n)
        return row

    for group in payload.groups:  # replicas of a group split by a branch: the hardware would hang
        mine = [r for r in group if r in local]
        if mine and any(r in present for r in mine) and not all(r in present for r in mine):
            raise IpuError(
                f"collective {payload.kind}: replicas {[r for r in mine if r not in present]} of group "
                f"{list(group)} took another branch; on an IPU the collective would never complete")
    remote = {}
    wanted = _spanning(payload, comm)
    if wanted:
        rows = {r: read_src(r).view(np.uint8) for r in wanted if r in local}
        remote = comm.exchange(payload.tag, wanted, rows, row_bytes)
    for group in payload.groups:
        if not any(r in present for r in group):
            continue
        n = len(group)
        width = max(m_src, m_dst * n if payload.kind in ("reduce_scatter", "slice") else m_src)
        data = np.zeros((n, width), dt)
        for j, r in enumerate(group):
            if r in local:
                copy_runs(memory[r - off], data[j].view(np.uint8), s_mem, s_host, s_n)
            else:
                data[j, :m_src] = remote[r].view(dt)
        kind, op = payload.kind, payload.op
        if kind == "all_gather":
            same = np.ascontiguousarray(data[:, :m_src]).reshape(-1)  # every replica gets all of it
        elif kind == "all_reduce" and op != "local":
            same = np.ascontiguousarray(_reduce(op, data[:, :m_src]), dt)
        else:
            same = None
            full = data if (op == "local" or kind == "all_reduce") else _reduce(op, data)
        for j, r in enumerate(group):
            if r not in local:
                continue
            if same is not None:
                row = same
            elif kind == "all_reduce":  # 'local': each keeps its own
                row = data[j, :m_src]
            elif full.ndim == 1:  # reduce_scatter: the rank's chunk of the reduced tensor
                row = full[j * m_dst:(j + 1) * m_dst]
            else:  # slice (or a 'local' reduce_scatter): the rank's chunk of its own data
                row = full[j, j * m_dst:(j + 1) * m_dst]
            row = np.ascontiguousarray(row, dt)
            copy_runs(row.view(np.uint8), memory[r - off], d_host, d_mem, d_n)


# ------------------------------------------------------------------------------------------------
# compiling


def _compile(compiler, p: CrossReplica):
    """The program node of a CrossReplica: its planned steps in order, the last one carrying the
    payload the engine runs (replicas run in lock step, so nothing observes the steps between)."""
    src, dst = p.src, p.dst
    if src.dtype != dst.dtype:
        raise CompileError(f"CrossReplica {p.name!r}: {src.name!r} is {src.dtype.name} but {dst.name!r} is "
                           f"{dst.dtype.name}")
    n = p.group_size
    ms, md = src.numel, dst.numel
    want = {"all_reduce": ms == md, "all_gather": md == n * ms,
            "reduce_scatter": ms <= n * md, "slice": ms <= n * md}[p.kind]
    if not want:
        raise CompileError(
            f"CrossReplica {p.kind} {p.name!r} over groups of {n}: src has {ms} elements and dst {md}; "
            f"all_reduce needs equal sizes, all_gather dst = n x src, reduce_scatter / slice src <= n x dst")
    if p.op == "mean" and not src.dtype.is_float:
        raise CompileError(f"CrossReplica {p.name!r}: op 'mean' needs a floating point type, not {src.dtype.name}")
    et = src.dtype
    isz = et.itemsize
    T = compiler.target.num_tiles
    if ms:
        sa, st = compiler.addresses(src, "CrossReplica source")
        host = np.arange(ms, dtype=np.int64) * isz
        s_mem, s_host, s_n, s_tile, _ = runs(sa, host, st, np.zeros_like(st), isz)
        src_tile_bytes = np.bincount(s_tile, weights=s_n, minlength=T).astype(np.int64)
    else:
        s_mem = s_host = s_n = np.zeros(0, np.int64)
        src_tile_bytes = np.zeros(T, np.int64)
    if md:
        da, dtl = compiler.addresses(dst, "CrossReplica destination")
        host = np.arange(md, dtype=np.int64) * isz
        d_host, d_mem, d_n, _, d_tile = runs(host, da, np.zeros_like(dtl), dtl, isz)
        dst_tile_bytes = np.bincount(d_tile, weights=d_n, minlength=T).astype(np.int64)
    else:
        d_host = d_mem = d_n = np.zeros(0, np.int64)
        dst_tile_bytes = np.zeros(T, np.int64)
    base = p.name or f"{p.kind} ({p.op})"
    steps = plan(p.kind, p.op, n, src_tile_bytes, dst_tile_bytes, ms * isz, md * isz, isz, et.is_float,
                 compiler.target, base, groups=p.groups)
    payload = Payload(p.kind, p.op, p.groups, et.numpy, ms, md, (s_mem, s_host, s_n), (d_host, d_mem, d_n))
    nodes = []
    for i, s in enumerate(steps):
        last = i == len(steps) - 1
        st = compiler.add_step(s.kind, s.name, int(s.cycles), s.tile_cycles, payload=payload if last else None,
                               bytes_moved=int(s.bytes_moved), debug=p.name)
        if last:
            payload.tag = st.id
        nodes.append(StepRef(st.id))
    payload.step_ids = tuple(n.step for n in nodes)
    return Seq(tuple(nodes))


def _uses(p: CrossReplica):
    return [Use(p.src.variable, True, False), Use(p.dst.variable, False, True)]


def _run(engine, payload: Payload, reps) -> None:
    run(payload, engine.memory, reps, copy_runs, engine.communicator)


# runs in Python between compiled segments (no `lower`): it may reach other processes
register_kind(ProgramKind("cross_replica", (CrossReplica,), _compile, _uses, Payload, _run,
                          steps=(SYNC_STEP, EXCHANGE_STEP, COMPUTE_STEP)))
