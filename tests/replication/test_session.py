"""Session with replication: host data with (num_host_transfers, replication) leading dims both
ways, device acquisition, PopDist settings."""
import logging

import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.mark.parametrize("T, R", [(1, 2), (3, 2), (2, 4), (3, 1)])
def test_streams_carry_transfer_and_replica_dims(T, R):
    ir = popxl.Ir(replication=R)
    ir.num_host_transfers = T
    with ir.main_graph:
        xs = popxl.h2d_stream((2, 3), popxl.float32, "x")
        acc = popxl.variable(np.zeros((2, 3), np.float32), name="acc")

        def body(a):
            x = ops.host_load(xs)
            y = x * 10.0 + a
            st = popxl.d2h_stream(y.shape, y.dtype, "y")
            ops.host_store(st, y)
            return y

        g = ir.create_graph(body, acc)
        (final,) = ops.repeat(g, T, acc)
        ops.var_updates.copy_var_update_(acc, final)
    lead = tuple(d for d in (T, R) if d > 1)
    data = np.arange(int(np.prod(lead)) * 6, dtype=np.float32).reshape(lead + (2, 3))
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({xs: data})
        st = next(iter(out))
        assert out[st].shape == lead + (2, 3) == s.create_host_outputs()[st].shape
        full = data.reshape((T, R, 2, 3))
        want = np.cumsum(full * 10.0, axis=0)  # each replica accumulates its own transfers
        np.testing.assert_allclose(out[st].reshape(T, R, 2, 3), want)
        with pytest.raises(ValueError, match="expected full global batch shape"):
            s.run({xs: np.zeros(lead + (2, 4), np.float32)})
        if R > 1:  # PopXL's text for a replica dimension of the wrong size
            with pytest.raises(ValueError, match=r"is the wrong size.\nIt should be of size replication_factor = "):
                s.run({xs: np.zeros((T, 5, 2, 3) if T > 1 else (5, 2, 3), np.float32)})


def test_device_acquisition_message(monkeypatch, capsys, caplog):
    monkeypatch.setenv("POPART_LOG_LEVEL", "INFO")
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        with popxl.ipu(1):
            popxl.variable(np.zeros(2, np.float32)) + 1.0
    with caplog.at_level(logging.INFO, logger="popxl"):
        s = popxl.Session(ir, "ipu_model")
    msg = capsys.readouterr().err
    assert "8 IPU(s): 4 replica(s) x 2 IPU(s) per replica" in msg
    assert any("8 IPU(s)" in r.message for r in caplog.records)
    assert s.num_ipus == 8 and s.engine.replicas == 4


def test_popdist_settings(monkeypatch):
    monkeypatch.setenv("POPDIST_NUM_TOTAL_REPLICAS", "4")
    monkeypatch.setenv("POPDIST_NUM_LOCAL_REPLICAS", "4")
    monkeypatch.setenv("POPDIST_NUM_IPUS_PER_REPLICA", "1")
    ir = popxl.Ir(replication="popdist")
    assert ir.replication_factor == 4 and ir.instance_replication_factor == 4
    with ir.main_graph:
        v = popxl.variable(np.ones(3, np.float32), name="v")
        ops.collectives.replicated_all_reduce_(v)
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
    np.testing.assert_array_equal(s.get_tensor_data(v), np.full(3, 4.0))
    # instance 1 of 2, but not started by an MPI launcher (poprun): a clear error, MPI not started
    monkeypatch.setenv("POPDIST_NUM_LOCAL_REPLICAS", "2")
    monkeypatch.setenv("POPDIST_REPLICA_INDEX_OFFSET", "2")
    ir2 = popxl.Ir(replication="popdist")
    assert ir2.replication_factor == 4 and ir2.instance_replication_factor == 2
    with ir2.main_graph:
        popxl.variable(np.ones(3, np.float32)) + 1.0
    with pytest.raises(RuntimeError, match="one of 2 PopDist instances but MPI sees 1 process"):
        popxl.Session(ir2, "ipu_model")


def test_popdist_without_poprun_is_one_replica():
    ir = popxl.Ir(replication="popdist")
    assert ir.replication_factor == 1 and ir.instance_replication_factor == 1
    with pytest.raises(ValueError):
        popxl.Ir(replication="pop")
