"""The PopDist API (seed 004) on the environment poprun sets, without MPI."""
import sys
import types

import numpy as np
import pytest

import popdist
import popdist.popart
import popxl


def _env(monkeypatch, total, local, offset, ipus=1, uniform=1, local_index=0):
    for k, v in (("POPDIST_NUM_TOTAL_REPLICAS", total), ("POPDIST_NUM_LOCAL_REPLICAS", local),
                 ("POPDIST_REPLICA_INDEX_OFFSET", offset), ("POPDIST_NUM_IPUS_PER_REPLICA", ipus),
                 ("POPDIST_UNIFORM_REPLICAS_PER_INSTANCE", uniform), ("POPDIST_LOCAL_INSTANCE_INDEX", local_index)):
        monkeypatch.setenv(k, str(v))


def test_defaults_without_poprun():
    assert not popdist.isPopdistEnvSet()
    assert (popdist.getNumTotalReplicas(), popdist.getNumLocalReplicas(), popdist.getReplicaIndexOffset(),
            popdist.getNumIpusPerReplica()) == (1, 1, 0, 1)
    assert popdist.getInstanceIndex() == 0 and popdist.getNumInstances() == 1 and popdist.getLocalInstanceIndex() == 0
    assert popdist.isUniformReplicasPerInstance() and popdist.checkNumIpusPerReplica(1)
    assert not popdist.checkNumIpusPerReplica(2)
    assert popdist.getDeviceId() == 0
    assert not popdist.isBackendInitialized()


def test_instance_of_a_run(monkeypatch):
    _env(monkeypatch, 8, 2, 6, ipus=2, local_index=1)
    assert popdist.isPopdistEnvSet()
    assert popdist.getInstanceIndex() == 3 and popdist.getNumInstances() == 4
    assert popdist.getNumLocalReplicas() == 2 and popdist.getReplicaIndexOffset() == 6
    assert popdist.getLocalInstanceIndex() == 1 and popdist.checkNumIpusPerReplica(2)
    # a partition of 16 IPUs: 16 single-IPU devices, 8 of 2, then 4-IPU devices; this instance's
    # 4 IPUs start at IPU 12 -> the fourth device of 4
    assert popdist.getDeviceId() == 16 + 8 + 3
    ir = popxl.Ir(replication="popdist")
    assert ir.replication_factor == 8 and ir.instance_replication_factor == 2
    opts = ir._pb_ir.getSessionOptions()  # PopXL has PopDist configure the session options
    assert opts.enableDistributedReplicatedGraphs and opts.globalReplicationFactor == 8
    assert opts.globalReplicaOffset == 6 and opts.replicatedGraphCount == 2


@pytest.mark.parametrize("env, message", [
    ((4, 3, 0), "do not split into instances of 3"),
    ((6, 2, 3), "do not split"),
    ((4, 2, 4), "are not among the 4 replicas"),
    ((4, 0, 0), "must all be at least 1"),
])
def test_inconsistent_environment(monkeypatch, env, message):
    _env(monkeypatch, *env)
    with pytest.raises(popdist.PopDistError, match=message):
        popdist.getNumInstances()
    with pytest.raises(popdist.PopDistError, match=message):
        popxl.Ir(replication="popdist")


def test_not_an_integer_and_non_uniform(monkeypatch):
    monkeypatch.setenv("POPDIST_NUM_TOTAL_REPLICAS", "four")
    with pytest.raises(popdist.PopDistError, match="'four' is not an integer"):
        popdist.getNumTotalReplicas()
    _env(monkeypatch, 4, 1, 0, uniform=0)
    assert not popdist.isUniformReplicasPerInstance()
    with pytest.raises(popdist.PopDistError, match="uniform number of replicas"):
        popdist.getInstanceIndex()
    with pytest.raises(popdist.PopDistError, match="uniform"):
        popdist.getNumInstances()


def test_popart_session_options_on_any_object(monkeypatch):
    _env(monkeypatch, 8, 2, 4)
    opts = types.SimpleNamespace(enableDistributedReplicatedGraphs=False, globalReplicationFactor=1,
                                 globalReplicaOffset=0, enableReplicatedGraphs=False, replicatedGraphCount=1)
    popdist.popart.configureSessionOptions(opts)
    assert opts.enableDistributedReplicatedGraphs is True
    assert (opts.globalReplicationFactor, opts.globalReplicaOffset, opts.replicatedGraphCount) == (8, 4, 2)
    assert opts.enableReplicatedGraphs is True
    _env(monkeypatch, 2, 2, 0)  # one instance of 2 replicas: nothing distributed
    popdist.popart.configureSessionOptions(opts)
    assert opts.enableDistributedReplicatedGraphs is False and opts.replicatedGraphCount == 2


def test_popart_get_device(monkeypatch):
    """getDevice asks popart.DeviceManager for local replicas x IPUs per replica."""
    asked = []

    class DeviceManager:
        def acquireAvailableDevice(self, numIpus=1, connectionType=None):
            asked.append((numIpus, connectionType))
            return None if numIpus > 8 else f"device of {numIpus}"

    fake = types.SimpleNamespace(DeviceManager=DeviceManager,
                                 DeviceConnectionType=types.SimpleNamespace(Always="Always", OnDemand="OnDemand"))
    monkeypatch.setitem(sys.modules, "popart", fake)
    _env(monkeypatch, 8, 2, 2, ipus=2)
    assert popdist.popart.getDevice() == "device of 4" and asked[-1] == (4, "Always")
    assert popdist.popart.getDevice(2, connectionType="OnDemand") == "device of 4" and asked[-1] == (4, "OnDemand")
    with pytest.raises(popdist.PopDistError, match="started with --ipus-per-replica 2"):
        popdist.popart.getDevice(4)
    _env(monkeypatch, 8, 2, 2, ipus=8)
    with pytest.raises(popdist.PopDistError, match="no device of 16"):
        popdist.popart.getDevice()


def test_tensorflow_is_a_clear_error():
    sys.modules.pop("popdist.tensorflow", None)
    with pytest.raises(ImportError, match="this simulator does not provide"):
        __import__("popdist.tensorflow")


def test_poptorch_options_follow_poprun(monkeypatch):
    """popdist.poptorch.Options: this instance's replicas and its place among the instances."""
    pytest.importorskip("torch")
    import popdist.poptorch
    _env(monkeypatch, 8, 2, 2, ipus=2)
    o = popdist.poptorch.Options()
    assert o.replication_factor == 2
    assert (o.Distributed.processId, o.Distributed.numProcesses) == (1, 4)
    with pytest.raises(popdist.PopDistError, match="--ipus-per-replica 2"):
        popdist.poptorch.Options(ipus_per_replica=1)


def test_single_instance_popdist_run_has_no_mpi(monkeypatch):
    """One instance of 4 replicas: everything local, host data shaped by the local replicas."""
    _env(monkeypatch, 4, 4, 0)
    ir = popxl.Ir(replication="popdist")
    with ir.main_graph:
        s = popxl.h2d_stream((2,), popxl.float32)
        x = popxl.ops.host_load(s)
        o = popxl.d2h_stream((2,), popxl.float32)
        popxl.ops.host_store(o, popxl.ops.collectives.replicated_all_reduce(x))
    with popxl.Session(ir, "cpu") as sess:
        assert sess._comm is None
        out = sess.run({s: np.arange(8, dtype=np.float32).reshape(4, 2)})
    np.testing.assert_array_equal(out[o], np.tile([12.0, 16.0], (4, 1)))
    assert not popdist.isBackendInitialized()


def test_collective_cycles_of_a_session():
    """Session.collective_cycles: the cycles of every executed step of the collectives (syncs, link
    exchanges, reductions), over all runs, with or without profiling."""
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        v = popxl.variable(np.ones(64, np.float32))
        popxl.ops.collectives.replicated_all_reduce_(v)
        w = popxl.variable(np.ones(8, np.float32))
        popxl.ops.var_updates.accumulate_(w, popxl.constant(np.ones(8, np.float32)))
    with popxl.Session(ir, "cpu") as sess:
        sess.run()
        once = sess.collective_cycles()
        sess.run()
    names = [s.name for s in sess.executable.steps if "all_reduce" in s.name or "reduce_scatter" in s.name]
    assert names and 0 < once < sess.total_cycles // 2
    assert sess.collective_cycles() == 2 * once
    assert sess.instance_info() is None  # one process: no instance facts


def test_program_needing_more_ipus_than_poprun_gave(monkeypatch):
    def two_ipu_program():
        ir = popxl.Ir(replication="popdist")
        with ir.main_graph:
            with popxl.ipu(1):
                popxl.variable(np.ones(2, np.float32)) + 1
        return ir

    _env(monkeypatch, 2, 2, 0, ipus=1)
    with pytest.raises(ValueError, match="poprun --ipus-per-replica 2"):
        popxl.Session(two_ipu_program(), "cpu")
    _env(monkeypatch, 2, 2, 0, ipus=2)
    assert popxl.Session(two_ipu_program(), "cpu").ipus_per_replica == 2
