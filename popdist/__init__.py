"""PopDist: the Python side of a multi-instance run started by `poprun`.

PopRun starts one process per instance through MPI and describes the run to each in environment
variables; these functions read them (the SDK's PopDist API, seed 004):

    POPDIST_NUM_TOTAL_REPLICAS       replicas over all instances (global replication factor)
    POPDIST_NUM_LOCAL_REPLICAS       replicas this instance runs
    POPDIST_REPLICA_INDEX_OFFSET     global index of this instance's first replica
    POPDIST_NUM_IPUS_PER_REPLICA     IPUs of one replica
    POPDIST_UNIFORM_REPLICAS_PER_INSTANCE   1 when every instance runs the same number of replicas
    POPDIST_LOCAL_INSTANCE_INDEX     index of this instance among those on its host

Without them (the program was not started by poprun) the defaults describe one instance of one
replica. Collectives between instances go through MPI (`mpi4py`, see popdist/_backend.py); the
simulated IPUs of each instance run in its own process. `popdist.popart` configures PopART
session options; `popdist.tensorflow` and `popdist.poptorch` are not available here.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Optional, Set

__all__ = [
    "isPopdistEnvSet", "getInstanceIndex", "getLocalInstanceIndex", "getNumInstances", "getNumTotalReplicas",
    "getNumLocalReplicas", "getReplicaIndexOffset", "getNumIpusPerReplica", "checkNumIpusPerReplica",
    "isUniformReplicasPerInstance", "getDeviceId", "init", "isBackendInitialized", "registerCommunicator",
    "synchronize", "execute_on_instances", "PopDistError",
]

ENV_VARS = ("POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_LOCAL_REPLICAS", "POPDIST_REPLICA_INDEX_OFFSET",
            "POPDIST_NUM_IPUS_PER_REPLICA", "POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", "POPDIST_LOCAL_INSTANCE_INDEX")


class PopDistError(RuntimeError):
    """The PopDist environment is inconsistent, or a multi-instance operation cannot be done."""


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise PopDistError(f"PopDist environment variable {name}={v!r} is not an integer "
                           f"(poprun sets it; unset it to run as one instance)") from None


def isPopdistEnvSet() -> bool:
    """True when the program was started by poprun (the PopDist environment is set)."""
    return "POPDIST_NUM_TOTAL_REPLICAS" in os.environ


def getNumTotalReplicas() -> int:
    """Replicas over all instances (1 when the environment is not set)."""
    return _env_int("POPDIST_NUM_TOTAL_REPLICAS", 1)


def getNumLocalReplicas() -> int:
    """Replicas of this instance (1 when the environment is not set)."""
    return _env_int("POPDIST_NUM_LOCAL_REPLICAS", 1)


def getReplicaIndexOffset() -> int:
    """Global index of this instance's first replica (0 when the environment is not set)."""
    return _env_int("POPDIST_REPLICA_INDEX_OFFSET", 0)


def getNumIpusPerReplica() -> int:
    """IPUs of one replica (1 when the environment is not set)."""
    return _env_int("POPDIST_NUM_IPUS_PER_REPLICA", 1)


def isUniformReplicasPerInstance() -> bool:
    """True when every instance runs the same number of replicas (or the environment is not set)."""
    return bool(_env_int("POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", 1))


def getLocalInstanceIndex() -> int:
    """Index of this instance among the instances of its host (0 when the environment is not set)."""
    return _env_int("POPDIST_LOCAL_INSTANCE_INDEX", 0)


def _require_uniform(what: str) -> None:
    if not isUniformReplicasPerInstance():
        raise PopDistError(f"popdist.{what} can only be used with a uniform number of replicas per instance")


def check_environment() -> None:
    """Raise PopDistError when the PopDist variables contradict each other."""
    total, local, offset = getNumTotalReplicas(), getNumLocalReplicas(), getReplicaIndexOffset()
    k = getNumIpusPerReplica()
    if total < 1 or local < 1 or k < 1:
        raise PopDistError(f"PopDist environment: POPDIST_NUM_TOTAL_REPLICAS={total}, POPDIST_NUM_LOCAL_REPLICAS="
                           f"{local} and POPDIST_NUM_IPUS_PER_REPLICA={k} must all be at least 1")
    if offset < 0 or offset + local > total:
        raise PopDistError(f"PopDist environment: this instance's replicas {offset}..{offset + local - 1} "
                           f"(POPDIST_REPLICA_INDEX_OFFSET={offset}, POPDIST_NUM_LOCAL_REPLICAS={local}) are not "
                           f"among the {total} replicas of POPDIST_NUM_TOTAL_REPLICAS")
    if isUniformReplicasPerInstance() and (total % local or offset % local):
        raise PopDistError(f"PopDist environment: {total} replicas do not split into instances of {local} "
                           f"(offset {offset}) although POPDIST_UNIFORM_REPLICAS_PER_INSTANCE=1")


def getInstanceIndex() -> int:
    """Index of this instance in [0, getNumInstances()) (uniform replicas per instance only)."""
    _require_uniform("getInstanceIndex")
    check_environment()
    return getReplicaIndexOffset() // getNumLocalReplicas()


def getNumInstances() -> int:
    """Instances of the run (uniform replicas per instance only)."""
    _require_uniform("getNumInstances")
    check_environment()
    return getNumTotalReplicas() // getNumLocalReplicas()


def checkNumIpusPerReplica(ipus: int) -> bool:
    """True when the run's IPUs per replica are `ipus` (1 when the environment is not set)."""
    return getNumIpusPerReplica() == int(ipus)


def getDeviceId(ipusPerReplica: int = 0) -> int:
    """Id of the device this instance acquires: its local replicas x IPUs per replica, numbered as
    Poplar numbers the devices of a partition of all the run's IPUs (the single IPUs 0..P-1 first,
    then the devices of 2, 4, ... IPUs, each size in the order of its first IPU)."""
    k = int(ipusPerReplica) or getNumIpusPerReplica()
    if not checkNumIpusPerReplica(k) and isPopdistEnvSet():
        raise PopDistError(f"getDeviceId({ipusPerReplica}): poprun was told {getNumIpusPerReplica()} IPUs per "
                           f"replica (--ipus-per-replica)")
    check_environment()
    size = getNumLocalReplicas() * k
    first = getReplicaIndexOffset() * k
    partition = getNumTotalReplicas() * k
    if size & (size - 1) or partition & (partition - 1):
        raise PopDistError(f"getDeviceId: devices have a power of two IPUs; this instance needs {size} of {partition}")
    did, s = 0, 1
    while s < size:
        did += partition // s
        s *= 2
    return did + first // size


# -- the MPI backend ------------------------------------------------------------------------------


def init() -> None:
    """Start the MPI backend used for the collectives between instances (mpi4py)."""
    from . import _backend

    _backend.world()


def isBackendInitialized() -> bool:
    """True once the MPI backend has been started (popdist.init or a multi-instance Session)."""
    from . import _backend

    return _backend.initialized()


def registerCommunicator(participants: Set[int], communicator_id: str = "") -> None:
    """Register a communicator over the instances `participants`, used by synchronize() under that id."""
    from . import _backend

    _backend.register(set(int(p) for p in participants), str(communicator_id))


def synchronize(communicator_id: str = "", participants: Set[int] = set()) -> None:  # noqa: B006 (SDK signature)
    """Wait until every instance of the communicator (all instances by default) gets here."""
    from . import _backend

    _backend.synchronize(str(communicator_id), set(int(p) for p in participants))


def execute_on_instances(instances: Set[int], func: Callable, *args: Any, **kwargs: Any) -> Optional[Any]:
    """Run func(*args, **kwargs) on the instances in `instances` only; synchronisation and the
    collectives of Sessions made inside func then involve only those instances. Every instance
    calls it (as in SPMD code); the others return None."""
    from . import _backend

    return _backend.execute_on(set(int(i) for i in instances), func, args, kwargs)
