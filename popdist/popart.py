"""PopDist for PopART: session options and the device of this instance.

`configureSessionOptions(opts)` works on any object with PopART's SessionOptions attributes
(`popart.SessionOptions`, this project's `popart` package or a stand-in); `getDevice` asks
`popart.DeviceManager` for a device of this instance's local replicas x IPUs per replica.
"""
from __future__ import annotations

from . import (PopDistError, getNumIpusPerReplica, getNumLocalReplicas, getNumTotalReplicas,
               getReplicaIndexOffset, isPopdistEnvSet)

__all__ = ["configureSessionOptions", "getDevice"]


def configureSessionOptions(opts) -> None:
    """Set PopART's distributed replicated graph options from the PopDist environment:
    enableDistributedReplicatedGraphs, globalReplicationFactor, globalReplicaOffset and this
    instance's replicatedGraphCount (enableReplicatedGraphs when it runs more than one)."""
    local = getNumLocalReplicas()
    opts.enableDistributedReplicatedGraphs = isPopdistEnvSet() and getNumTotalReplicas() > local
    opts.globalReplicationFactor = getNumTotalReplicas()
    opts.globalReplicaOffset = getReplicaIndexOffset()
    opts.enableReplicatedGraphs = local > 1
    opts.replicatedGraphCount = local


def getDevice(ipusPerReplica: int = 0, connectionType=None):
    """A PopART device for this instance: its local replicas x IPUs per replica (acquired through
    popart.DeviceManager, connectionType defaulting to popart.DeviceConnectionType.Always)."""
    try:
        import popart
    except ImportError as e:
        raise PopDistError(f"popdist.popart.getDevice needs the popart package ({e})") from None
    k = int(ipusPerReplica) or getNumIpusPerReplica()
    if isPopdistEnvSet() and k != getNumIpusPerReplica():
        raise PopDistError(f"getDevice(ipusPerReplica={k}): poprun was started with --ipus-per-replica "
                           f"{getNumIpusPerReplica()}")
    n = getNumLocalReplicas() * k
    if connectionType is None:
        connectionType = popart.DeviceConnectionType.Always
    dm = popart.DeviceManager()
    device = dm.acquireAvailableDevice(numIpus=n, connectionType=connectionType)
    if device is None:
        raise PopDistError(f"popart.DeviceManager has no device of {n} IPU(s) for this instance "
                           f"({getNumLocalReplicas()} replica(s) x {k} IPU(s))")
    return device
