"""PopDist settings for ``popxl.Ir(replication='popdist')``.

PopRun starts one process per instance and describes the run to each in environment variables
(read by the `popdist` package): the global replication factor, this instance's replicas and its
offset among them, IPUs per replica. Without them (the program was not started by PopRun)
PopDist's defaults apply: one replica, one instance. A run of several instances gets a
communicator (MPI, popdist/_backend.py) that the engine's collectives and the Session's weight
transfers use to reach the replicas of the other instances.
"""
from dataclasses import dataclass

__all__ = ["PopDistSettings", "settings", "communicator", "configure_session_options"]


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
        import popdist

        return popdist.isPopdistEnvSet()


def settings() -> PopDistSettings:
    """The PopDist description of this process (checked for consistency)."""
    import popdist

    if not popdist.isPopdistEnvSet():
        return PopDistSettings()
    popdist.check_environment()
    return PopDistSettings(popdist.getNumTotalReplicas(), popdist.getNumLocalReplicas(),
                           popdist.getReplicaIndexOffset(), popdist.getNumIpusPerReplica())


def communicator(s: PopDistSettings):
    """The communicator of this instance's Session, or None when every replica is in this process."""
    if s.local_replicas >= s.total_replicas:
        return None
    from popdist import _backend

    return _backend.communicator(s.replica_offset, s.local_replicas, s.total_replicas,
                                 expected_instances=s.num_instances)


def configure_session_options(opts) -> None:
    """PopDist writes the distributed replication settings into the Ir's session options, as it
    does under the SDK's PopXL (popdist.popart.configureSessionOptions)."""
    import popdist.popart

    popdist.popart.configureSessionOptions(opts)
