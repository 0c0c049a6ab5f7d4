"""PopDist for PopTorch: `popdist.poptorch.Options`, poptorch.Options set from the environment
poprun gives each instance.

In an instance started by poprun the options run this instance's replicas
(`replicationFactor(getNumLocalReplicas())`), know the instance's place among the others
(`Distributed.configureProcessId(getInstanceIndex(), getNumInstances())`, which also makes
poptorch.DataLoader read this instance's share of the data) and its device id; the
replicas of all the instances then form one replicated model whose gradients are reduced over
MPI (popxl's Ir(replication="popdist")). Outside poprun they are plain poptorch.Options.
"""
from __future__ import annotations

from typing import Any, Optional

from . import (PopDistError, getDeviceId, getInstanceIndex, getNumInstances, getNumIpusPerReplica,
               getNumLocalReplicas, isPopdistEnvSet)

try:
    import poptorch
except ImportError as _e:  # pragma: no cover - torch missing
    raise ImportError(f"popdist.poptorch needs PopTorch, which needs PyTorch: {_e}") from _e

__all__ = ["Options"]


class Options(poptorch.Options):
    """poptorch.Options for this PopRun instance (ipus_per_replica defaults to poprun's
    --ipus-per-replica)."""

    def __init__(self, ipus_per_replica: Optional[int] = None, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        if not isPopdistEnvSet():
            return
        k = int(ipus_per_replica) if ipus_per_replica else getNumIpusPerReplica()
        if k != getNumIpusPerReplica():
            raise PopDistError(f"popdist.poptorch.Options(ipus_per_replica={k}): poprun was started with "
                               f"--ipus-per-replica {getNumIpusPerReplica()}")
        self.replicationFactor(getNumLocalReplicas())
        self.Distributed.configureProcessId(getInstanceIndex(), getNumInstances())
        self.useIpuId(getDeviceId(k))
