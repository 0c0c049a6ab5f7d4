"""The device a Session holds (PopXL's attach rules, offline "ipu_hw" devices, a device given to the
constructor, another device set later), PopART's log lines for the events the simulator has, and
np.memmap variable data (the user's memmap is the variable's host buffer)."""
import re

import numpy as np
import pytest

import popart
import popxl
import popxl.ops as ops
from popxl.utils import _to_device_info


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.delenv("POPART_LOG_LEVEL", raising=False)
    yield
    popxl._logging._chosen.clear()  # levels a test chose with popart.getLogger().setLevel


def _ir(replication=1):
    ir = popxl.Ir(replication=replication)
    with ir.main_graph:
        w = popxl.variable(np.ones(4, np.float32), name="w")
        ops.var_updates.accumulate_(w, popxl.constant(np.full(4, 2.0, np.float32)))
        o = popxl.d2h_stream(w.shape, w.dtype)
        ops.host_store(o, w)
    return ir, w, o


def test_ipu_hw_session_acquires_a_device_on_enter_and_gives_it_back():
    ir, w, o = _ir()
    with pytest.warns(UserWarning):
        s = popxl.Session(ir, "ipu_hw")
    offline = s._device
    assert offline.type == popart.DeviceType.OfflineIpu and not s.is_attached
    with s:
        assert s.is_attached and s._device.type == popart.DeviceType.Ipu
        held = s._device
        s.run()
    assert s._device is offline and not held.isAttached and not s.is_attached
    np.testing.assert_array_equal(s.get_tensor_data(w), np.full(4, 3.0))


def test_attached_device_given_to_the_session_gets_the_weights_once(capfd):
    popart.getLogger().setLevel("DEBUG")
    ir, w, o = _ir()
    device = _to_device_info("ipu_model")
    assert device.attach()
    capfd.readouterr()
    with popxl.Session(ir, device) as s:
        assert s.run()[o][0] == 3.0
    err = capfd.readouterr().err
    assert err.count("Writing weights from host, ") == 1
    assert device.isAttached  # the context did not attach it, so leaving it does not detach it (PopXL's rule)
    device.detach()


def test_session_refuses_a_device_its_executable_was_not_compiled_for():
    ir, w, o = _ir(replication=2)
    s = popxl.Session(ir, "ipu_model")
    s._set_device(_to_device_info("ipu_model", 1))
    with pytest.raises(popart.popart_exception, match="compiled for a ipu_model device of 2 IPU"):
        with s:
            pass
    s._set_device(_to_device_info("cpu", 1))
    with pytest.raises(popart.popart_exception, match="cannot be loaded"):
        with s:
            pass
    assert not s.is_attached
    s._set_device(_to_device_info("ipu_model", 2))
    with s:
        s.run()
    attached = _to_device_info("ipu_model", 1)  # checked whether it comes attached or not
    assert attached.attach()
    s._set_device(attached)
    with pytest.raises(popart.popart_exception, match="compiled for a ipu_model device of 2 IPU"):
        with s:
            pass
    attached.detach()


def test_popart_log_level_gates_the_session_lines(monkeypatch, capfd):
    ir, w, o = _ir()
    capfd.readouterr()
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
    assert "popart" not in capfd.readouterr().err  # PopART's default level is OFF
    monkeypatch.setenv("POPART_LOG_LEVEL", "TRACE")  # read when a line is written, as after import
    ir, w, o = _ir()
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
        s.get_tensor_data(w)
        s.get_tensor_data(w)  # in sync: no second WeightsToHost
    err = capfd.readouterr().err
    assert re.search(r"\[popart:session\] \[debug\] Starting compilation", err)
    assert err.count(f"Reusing TensorData for d2hWeightBuffer of tensor {w.id}") == 1
    assert err.count("Writing weights to host complete.") == 2  # get_tensor_data after the run, and the exit
    popart.getLogger().setLevel("OFF")  # an explicit level wins over the environment
    with popxl.Session(_ir()[0], "ipu_model") as s:
        s.run()
    assert capfd.readouterr().err == ""


@pytest.mark.parametrize("kind", ["variable", "remote", "rts"])
def test_memmap_variable_is_written_back_and_flushed(tmp_path, kind):
    path = str(tmp_path / "w.bin")
    data = np.memmap(path, dtype=np.float32, shape=(3, 4), mode="w+")
    data[...] = np.arange(12, dtype=np.float32).reshape(3, 4)
    ir = popxl.Ir(replication=2)
    with ir.main_graph, popxl.in_sequence():
        if kind == "variable":
            var = w = popxl.variable(data, name="w")
        elif kind == "remote":
            rb = popxl.remote_buffer((3, 4), popxl.float32)
            var = popxl.remote_variable(data, rb, 0)
            w = ops.remote_load(rb, 0)
        else:
            var, shard = popxl.replica_sharded_variable(data)
            w = ops.collectives.replicated_all_gather(shard).reshape((3, 4))
        w2 = w * 2.0
        if kind == "variable":
            ops.var_updates.copy_var_update_(var, w2)
        elif kind == "remote":
            ops.remote_store(rb, 0, w2)
        else:
            ops.var_updates.copy_var_update_(shard, ops.collectives.replica_sharded_slice(w2.reshape((12,))))
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
    assert s.get_tensor_data(var) is data  # the user's memmap, not a copy
    want = np.arange(12, dtype=np.float32).reshape(3, 4) * 2
    np.testing.assert_array_equal(data, want)
    np.testing.assert_array_equal(np.fromfile(path, np.float32).reshape(3, 4), want)  # flushed to the file


def test_memmap_data_must_be_what_the_device_holds(tmp_path, capfd):
    ir = popxl.Ir(replication=8)
    f64 = np.memmap(str(tmp_path / "a"), dtype=np.float64, shape=(4,), mode="w+")
    f32 = np.memmap(str(tmp_path / "b"), dtype=np.float32, shape=(4,), mode="w+")
    fortran = np.memmap(str(tmp_path / "c"), dtype=np.float32, shape=(4, 4), mode="w+", order="F")
    with ir.main_graph:
        with pytest.raises(ValueError, match="the dtype None is not supported, as it requires downcasting"):
            popxl.variable(f64)
        with pytest.raises(ValueError, match="the `dtype` parameter"):
            popxl.variable(f32, popxl.float16)
        with pytest.raises(ValueError, match="must already be in C-ordered"):
            popxl.variable(fortran)
        rg = ir.replica_grouping_from_assignments([0, 0, 1, 1, 0, 0, 1, 1])
        capfd.readouterr()
        popxl.variable(np.memmap(str(tmp_path / "d"), dtype=np.float32, shape=(2, 4), mode="w+"), replica_grouping=rg)
        assert "you have passed np.memmap data and the non-const replica grouping" in capfd.readouterr().err
