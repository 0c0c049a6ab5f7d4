"""Scripts written the way PopXL's user guide writes them, run unchanged on the simulator."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")


@pytest.mark.parametrize("dtype", [popxl.int8, popxl.uint8, popxl.int16, popxl.uint16, popxl.int32, popxl.uint32])
def test_integer_variable_plus_constant(dtype):
    ir = popxl.Ir()
    main = ir.main_graph
    with main:
        a = popxl.variable(3, dtype=dtype, name="variable_a")
        b = popxl.constant(1, dtype=dtype, name="constant_b")
        c = a + b
        o_d2h = popxl.d2h_stream(c.shape, c.dtype, name="output_stream")
        ops.host_store(o_d2h, c)
    session = popxl.Session(ir, "ipu_model")
    with session:
        outputs = session.run()
    assert outputs[o_d2h] == 4 and outputs[o_d2h].dtype == dtype.as_numpy()


def test_in_sequence_and_tensor_data():
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence():
        x = popxl.variable(np.array([1.0, 2.0], np.float32), name="x")
        y = popxl.variable(np.array([3.0, 4.0], np.float32), name="y")
        ops.var_updates.copy_var_update_(x, y)
        ops.scaled_add_(y, x, a=2.0, b=1.0)
    session = popxl.Session(ir, "ipu_model")
    with session:
        session.run()
    np.testing.assert_array_equal(session.get_tensor_data(x), [3, 4])
    np.testing.assert_array_equal(session.get_tensor_data(y), [9, 12])
    session.write_variable_data(x, np.array([0.0, 0.0], np.float32))
    with session:
        session.run()
    # x is overwritten by y before it is read, so writing x changes nothing: y = 3 y
    np.testing.assert_array_equal(session.get_tensor_data(y), [27, 36])


def test_called_graph_with_tensor_by_ref_modifies_the_caller():
    ir = popxl.Ir()

    def increment(t: popxl.TensorByRef, v: popxl.Tensor):
        ops.add_(t, v)

    with ir.main_graph:
        acc = popxl.variable(np.zeros(3, np.float32), name="acc")
        v = popxl.constant(np.ones(3, np.float32), name="one")
        g = ir.create_graph(increment, acc, v)
        for _ in range(3):
            ops.call(g, acc, v)
    session = popxl.Session(ir, "ipu_model")
    with session:
        session.run()
    np.testing.assert_array_equal(session.get_tensor_data(acc), [3, 3, 3])


def test_repeat_with_host_load_per_iteration():
    ir = popxl.Ir()
    ir.num_host_transfers = 5
    with ir.main_graph:
        xs = popxl.h2d_stream((2,), popxl.float32, name="x")
        ys = popxl.d2h_stream((2,), popxl.float32, name="y")
        acc = popxl.variable(np.zeros(2, np.float32), name="acc")

        def body(a: popxl.Tensor):
            x = ops.host_load(xs)
            a = a + x
            ops.host_store(ys, a)
            return a

        g = ir.create_graph(body, acc)
        (out,) = ops.repeat(g, 5, acc)
        ops.var_updates.copy_var_update_(acc, out)
    session = popxl.Session(ir, "ipu_model")
    data = np.arange(10, dtype=np.float32).reshape(5, 2)
    with session:
        res = session.run({xs: data})
    np.testing.assert_array_equal(res[ys], np.cumsum(data, 0))
    np.testing.assert_array_equal(session.get_tensor_data(acc), data.sum(0))


def test_conditional_branches():
    ir = popxl.Ir()
    with ir.main_graph:
        cs = popxl.h2d_stream((), popxl.bool, name="cond")
        c = ops.host_load(cs)
        x = popxl.constant(np.array([2.0, 3.0], np.float32))
        then_g = ir.create_graph(lambda t: t * 10.0, x)
        else_g = ir.create_graph(lambda t: t - 1.0, x)
        (y,) = ops.conditional(c, then_g, else_g, [x], [x])
        ys = popxl.d2h_stream(y.shape, y.dtype, name="y")
        ops.host_store(ys, y)
    session = popxl.Session(ir, "ipu_model")
    with session:
        assert session.run({cs: np.array(True)})[ys].tolist() == [20, 30]
        assert session.run({cs: np.array(False)})[ys].tolist() == [1, 2]


def test_name_scopes_and_dot_checkpoint(tmp_path):
    ir = popxl.Ir()
    with ir.main_graph, popxl.name_scope("layer1"):
        a = popxl.variable(np.ones((2, 2), np.float32), name="w")
        b = ops.relu(a @ a)
    assert a.name.startswith("layer1/") or a.id.startswith("layer1/")
    ir.dot_checkpoint("after_build", tmp_path)
    assert any(p.suffix == ".dot" for p in tmp_path.iterdir())
    assert b.shape == (2, 2)


def test_tensor_from_another_graph_is_a_clear_error():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
    g = ir.create_empty_graph("g")
    with g, pytest.raises(ValueError, match="graph"):
        ops.add(x, x)


def test_wrong_input_dtype_is_a_value_error_not_a_numba_traceback():
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((2,), popxl.float32, name="x")
        ops.host_store(popxl.d2h_stream((2,), popxl.float32, name="y"), ops.host_load(s))
    session = popxl.Session(ir, "ipu_model")
    with session, pytest.raises(ValueError, match="float32"):
        session.run({s: np.array(["a", "b"])})


def test_popxl_module_paths_import_as_in_the_sdk():
    from popxl.ops.call import CallSiteInfo
    from popxl.ops.slice import process_args
    from popxl.ops.reshape import reshape_handle_negative_axis
    from popxl.ops.gelu import gelu

    assert CallSiteInfo is ops.CallSiteInfo
    assert callable(process_args) and callable(reshape_handle_negative_axis)
    assert gelu is ops.gelu
    assert callable(ops.sum)  # the module paths do not shadow the functions


def test_session_options_through_the_internal_ir(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the session caches its executable under the relative path
    monkeypatch.setenv("POPART_CACHE_DIR", "PATH_TO_CACHE")
    ir = popxl.Ir()
    opts = ir._pb_ir.getSessionOptions()
    assert opts.enableEngineCaching and opts.cachePath == "PATH_TO_CACHE"
    opts.partialsTypeMatMuls = "half"
    opts.engineOptions["opt.internalExchangeOptimisationTarget"] = "memory"
    opts.numIOTiles = 32
    assert ir._pb_ir.getSessionOptions().numIOTiles == 32
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
        ops.host_store(popxl.d2h_stream((2,), popxl.float32, name="y"), x + 1.0)
    with popxl.Session(ir, "ipu_model") as s:
        assert list(s.run().values())[0].tolist() == [2, 2]
    with pytest.raises(AttributeError, match="getSessionOptions"):
        ir._pb_ir.setOptimizer(None)  # what the view does not offer names what it does
