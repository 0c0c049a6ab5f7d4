"""PopDist settings for ``popxl.Ir(replication='popdist')``.

PopRun starts one process per instance and describes the run to each in environment variables
(PopDist reads them): POPDIST_NUM_TOTAL_REPLICAS, POPDIST_NUM_LOCAL_REPLICAS,
POPDIST_REPLICA_INDEX_OFFSET, POPDIST_NUM_IPUS_PER_REPLICA. Without them (the program was not
started by PopRun) PopDist's defaults apply: one replica, one instance. When the real `popdist`
package is importable its functions are used instead.
"""
import os
from dataclasses import dataclass

__all__ = ["PopDistSettings", "settings"]


@dataclass(frozen=True)
class PopDistSettings:
    total_replicas: int = 1
    local_replicas: int = 1
    replica_offset: int = 0
    ipus_per_replica: int = 1

    @property
    def num_instances(self) -> int:
        return max(1, self.total_replicas // max(1, self.local_replicas))

    @property
    def instance_index(self) -> int:
        return self.replica_offset // max(1, self.local_replicas)

    @property
    def is_set(self) -> bool:
        return "POPDIST_NUM_TOTAL_REPLICAS" in os.environ


def _env_int(name: str, default: int) -> int:
    v = os.environ.get(name)
    if v is None or v.strip() == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError(f"PopDist environment variable {name}={v!r} is not an integer") from None


def settings() -> PopDistSettings:
    """The PopDist description of this process (popdist package if installed, else environment)."""
    try:  # pragma: no cover - the real package is not part of this simulator
        import popdist  # type: ignore

        return PopDistSettings(int(popdist.getNumTotalReplicas()), int(popdist.getNumLocalReplicas()),
                               int(popdist.getReplicaIndexOffset()), int(popdist.getNumIpusPerReplica()))
    except ImportError:
        pass
    total = _env_int("POPDIST_NUM_TOTAL_REPLICAS", 1)
    local = _env_int("POPDIST_NUM_LOCAL_REPLICAS", total)
    return PopDistSettings(total, local, _env_int("POPDIST_REPLICA_INDEX_OFFSET", 0),
                           _env_int("POPDIST_NUM_IPUS_PER_REPLICA", 1))
