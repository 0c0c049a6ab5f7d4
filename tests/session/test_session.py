"""Session semantics: attach, weights, streams with leading dimensions, and clear errors."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")


def _double_ir(shape=(3,), transfers=1):
    ir = popxl.Ir()
    ir.num_host_transfers = transfers
    with ir.main_graph:
        w = popxl.variable(np.ones(shape, np.float32), name="w")
        s = popxl.h2d_stream(shape, popxl.float32, name="x")
        x = ops.host_load(s)
        y = x + w
        ops.scaled_add_(w, x, 1.0, 1.0)  # w += x
        o = popxl.d2h_stream(shape, popxl.float32, name="y")
        ops.host_store(o, y)
    return ir, w, s, o


def test_run_updates_weights_and_returns_outputs():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        out = sess.run({s: np.array([1, 2, 3], np.float32)})
        np.testing.assert_array_equal(out[o], [2, 3, 4])
        np.testing.assert_array_equal(sess.get_tensor_data(w), [2, 3, 4])
        out = sess.run({s: np.array([1, 1, 1], np.float32)})
        np.testing.assert_array_equal(out[o], [3, 4, 5])
    # weights_to_host_on_exit: the host copy has the device values
    np.testing.assert_array_equal(sess.get_tensor_data(w), [3, 4, 5])


def test_write_variable_data_and_nested_contexts():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    sess.write_variable_data(w, np.array([10, 20, 30], np.float32))
    with sess:
        with sess:
            assert sess.is_attached
            out = sess.run({s: np.zeros(3, np.float32)})
        assert sess.is_attached
    assert not sess.is_attached
    np.testing.assert_array_equal(out[o], [10, 20, 30])


def test_num_host_transfers_leading_dimension():
    ir = popxl.Ir()
    ir.num_host_transfers = 4
    with ir.main_graph:
        s = popxl.h2d_stream((2,), popxl.float32, name="x")
        o = popxl.d2h_stream((2,), popxl.float32, name="y")

        for _ in range(4):
            ops.host_store(o, ops.host_load(s) * 2.0)
    sess = popxl.Session(ir, "ipu_model")
    data = np.arange(8, dtype=np.float32).reshape(4, 2)
    with sess:
        out = sess.run({s: data})
    np.testing.assert_array_equal(out[o], data * 2)


def test_missing_extra_and_misshaped_inputs_are_value_errors():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        # PopXL's words first (scripts match on them), then ours
        with pytest.raises(ValueError, match=r"Unexpected/Missing input.\n  Unexpected: set\(\)\n  Missing: \{'x'\}"):
            sess.run({})
        with pytest.raises(ValueError, match=r"Shape mismatch for input stream x:\nStream shape = \(3,\), therefore "
                                             r"expected full global batch shape \(3,\). Got array shape = \(4,\)"):
            sess.run({s: np.zeros(4, np.float32)})
        with ir.main_graph:
            other = popxl.h2d_stream((3,), popxl.float32, name="other")
        with pytest.raises(ValueError, match=r"Unexpected/Missing input.\n  Unexpected: [\s\S]*not used"):
            sess.run({s: np.zeros(3, np.float32), other: np.zeros(3, np.float32)})
        with pytest.raises(ValueError, match="int32"):
            sess.run({s: np.zeros(3, np.int32)})


def test_the_leading_dims_hint_and_non_dict_buffers():
    ir, w, s, o = _double_ir(transfers=3)
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        with pytest.raises(ValueError, match=r"the leading dims are \(3,\): num_host_transfers 3, then this "
                                             r"instance's replicas 1, each left out when it is 1"):
            sess.run({s: np.zeros(3, np.float32)})
        with pytest.raises(TypeError, match=r"inputs must be a dict \{popxl.HostToDeviceStream: array\}, got list"):
            sess.run([np.zeros((3, 3), np.float32)])
        with pytest.raises(TypeError, match=r"outputs must be a dict .* got list"):
            sess.run_with_outputs({s: np.zeros((3, 3), np.float32)}, [np.zeros((3, 3), np.float32)])
        with pytest.raises(TypeError, match="pass an array of float32"):
            sess.run_with_outputs({s: np.zeros((3, 3), np.float32)}, {o: np.zeros((3, 3), np.int32)})


def test_64_bit_inputs_are_downcast():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        out = sess.run({s: np.array([1.5, 2, 3], np.float64)})
    np.testing.assert_array_equal(out[o], [2.5, 3, 4])


def test_running_while_detached_is_a_value_error():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with pytest.raises(ValueError, match="Must be attached to device before calling a runtime function"):
        sess.run({s: np.zeros(3, np.float32)})


def test_an_ir_keeps_its_shape_once_a_session_compiled_it():
    # PopXL: the replication factor and host transfers are fixed once a session compiled the Ir;
    # new ops may still be built (the session runs what it compiled, a new one the rest)
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with ir.main_graph:  # PopXL lets the Ir grow after a Session: a new Session compiles the change
        o2 = popxl.d2h_stream((3,), popxl.float32, name="neg")
        ops.host_store(o2, ops.negate(popxl.variable(np.ones(3, np.float32))))
    with pytest.raises(RuntimeError, match="num_host_transfers cannot change"):
        ir.num_host_transfers = 2
    with pytest.raises(RuntimeError, match="replication_factor cannot change"):
        ir.replication_factor = 2
    ir.num_host_transfers = 1  # setting what it is stays allowed
    with sess:  # the session runs the program it compiled, and another Session of it is fine
        out = sess.run({s: np.zeros(3, np.float32)})
        np.testing.assert_array_equal(out[o], [1, 1, 1])
        assert o2 not in out
    with popxl.Session(ir, "cpu") as sess2:
        np.testing.assert_array_equal(sess2.run({s: np.zeros(3, np.float32)})[o2], [-1, -1, -1])


def test_unknown_device_and_expected_inputs():
    ir, w, s, o = _double_ir()
    with pytest.raises(ValueError, match="device_desc"):
        popxl.Session(ir, "tpu")
    sess = popxl.Session(ir, "cpu")
    assert sess.expected_inputs() == [s]
    outs = sess.create_host_outputs()
    assert list(outs) == [o] and outs[o].shape == (3,)


def test_ipu_hw_warns_once_and_runs_simulated(recwarn):
    import popxl.session as ps

    ps._hw_warned = False
    ir, w, s, o = _double_ir()
    popxl.Session(ir, "ipu_hw")
    popxl.Session(ir, "ipu_hw")
    assert sum("No IPU hardware" in str(x.message) for x in recwarn) == 1


def test_same_program_twice_same_cycles():
    cycles = []
    for _ in range(2):
        ir, w, s, o = _double_ir((100,))
        sess = popxl.Session(ir, "ipu_model")
        with sess:
            sess.run({s: np.ones(100, np.float32)})
        cycles.append((sess.total_cycles, sess.executable.total_bytes))
    assert cycles[0] == cycles[1]


def test_write_variable_data_checks_dtype_and_takes_numbers():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with pytest.raises(TypeError, match="float64"):
        sess.write_variable_data(w, np.zeros(3, np.float64))
    with pytest.raises(ValueError, match="shape"):
        sess.write_variable_data(w, np.zeros(4, np.float32))
    ir2 = popxl.Ir()
    with ir2.main_graph:
        scalar = popxl.variable(1.0, popxl.float32, name="scalar")
    sess2 = popxl.Session(ir2, "ipu_model")
    sess2.write_variable_data(scalar, 5)
    assert sess2.get_tensor_data(scalar) == 5


def test_error_inside_context_skips_weights_to_host():
    ir, w, s, o = _double_ir()
    sess = popxl.Session(ir, "ipu_model")
    with pytest.raises(RuntimeError):
        with sess:
            sess.run({s: np.ones(3, np.float32)})
            raise RuntimeError("user error")
    # the device ran, but the failed context did not copy the weights back
    np.testing.assert_array_equal(sess.get_tensor_data(w), [1, 1, 1])


def test_size_one_dimensions_may_be_dropped():
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((1,), popxl.float32, name="x")
        o = popxl.d2h_stream((1,), popxl.float32, name="y")
        ops.host_store(o, ops.host_load(s) * 3.0)
    sess = popxl.Session(ir, "ipu_model")
    with sess:
        assert sess.run({s: np.array(2.0, np.float32)})[o].tolist() == [6.0]
