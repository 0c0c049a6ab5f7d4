"""PopXL code loading from streaming memory (ops.remote_code_load): the user-guide examples run,
the errors are PopXL's, and the memory plan counts the code of loaded graphs only while live."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops


def test_user_guide_minimal_and_multiple_load_examples():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(1, popxl.float32)

    def expensive_id(x: popxl.Tensor) -> popxl.Tensor:
        return x.T.T

    g = ir.create_graph(expensive_id, x.spec)
    with ir.main_graph:
        with popxl.in_sequence():
            ops.remote_code_load(g, destination="executable")
            ops.call(g, x)
            ops.call(g, x)
            ops.call(g, x)
    with ir.main_graph:
        with popxl.in_sequence():
            for _ in range(3):
                ops.remote_code_load(g, destination="executable")
                ops.call(g, x)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
    exe = session.executable
    assert len([s for s in exe.steps if s.kind == "code_load"]) == 4
    assert len(exe.code_liveness.functions[g.id]["intervals"]) == 4


def test_user_guide_nested_examples():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(1, popxl.float32)

    def expensive_id(x: popxl.Tensor) -> popxl.Tensor:
        return x.T.T

    g1 = ir.create_graph(expensive_id, x.spec)

    def load_g1():
        ops.remote_code_load(g1, destination="executable")

    g2 = ir.create_graph(load_g1)
    with ir.main_graph, popxl.in_sequence():
        ops.remote_code_load(g1, destination="executable")
        ops.call(g2)
        ops.call(g1, x)

    def load_graph(g: popxl.Graph):
        ops.remote_code_load(g, destination="executable")

    g3 = ir.create_graph(load_graph, g1)
    g4 = ir.create_graph(load_graph, g2)
    with ir.main_graph, popxl.in_sequence():
        ops.remote_code_load(g3, destination="executable")
        ops.call(g3)
        ops.remote_code_load(g4, destination="executable")
        ops.call(g4)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
    assert set(session.executable.code_liveness.functions) == {g1.id, g2.id, g3.id, g4.id}


def test_errors_are_popxls():
    ir = popxl.Ir()

    def body(x):
        with pytest.raises(ValueError, match="graph it is in"):
            ops.remote_code_load(popxl.gcg(), "executable")
        return x + 1.0

    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
    g = ir.create_graph(body, x.spec)
    with ir.main_graph:
        for where in ("compute_buffer", "io_buffer", "elsewhere"):
            with pytest.raises(NotImplementedError):
                ops.remote_code_load(g, destination=where)
        with pytest.raises(NotImplementedError):
            ops.code_copy(g, "executable", "compute_buffer")
        with pytest.raises(ValueError):
            ops.remote_code_load(ir.main_graph, "executable")
        with pytest.raises(TypeError):
            ops.remote_code_load("g", "executable")


def _layers_ir(load: bool, calls: int = 3):
    """Two graphs with different vertex code (a float32 and a float16 layer), called in turn."""
    ir = popxl.Ir()
    with ir.main_graph:
        w32 = popxl.variable(np.full((16, 16), 0.5, np.float32), name="w32")
        w16 = popxl.variable(np.full((16, 16), 0.5, np.float16), name="w16")

    def layer32(x, w):
        return ops.relu(x @ w) + 1.0

    def layer16(x, w):
        return ops.gelu(ops.cast(x, popxl.float16) @ w)

    g32 = ir.create_graph(layer32, popxl.TensorSpec((4, 16), popxl.float32), w32.spec)
    g16 = ir.create_graph(layer16, popxl.TensorSpec((4, 16), popxl.float32), w16.spec)
    with ir.main_graph, popxl.in_sequence():
        s = popxl.h2d_stream((4, 16), popxl.float32, name="x")
        x = ops.host_load(s)
        for _ in range(calls):
            if load:
                ops.remote_code_load(g32, "executable")
            x, = ops.call(g32, x, w32)
            if load:
                ops.remote_code_load(g16, "executable")
            x = ops.cast(ops.call(g16, x, w16)[0], popxl.float32) * 0.01
        o = popxl.d2h_stream((4, 16), popxl.float32, name="y")
        ops.host_store(o, x)
    return ir, s, o, g32, g16


def test_loading_lowers_peak_code_memory_and_keeps_results():
    results = {}
    for load in (False, True):
        ir, s, o, g32, g16 = _layers_ir(load)
        with popxl.Session(ir, "ipu_model") as sess:
            out = sess.run({s: np.ones((4, 16), np.float32)})
        results[load] = (out[o], sess.executable)
    np.testing.assert_array_equal(results[False][0], results[True][0])
    resident, loaded = results[False][1], results[True][1]
    assert resident.code_liveness is None and "code_loaded" not in resident.plan.categories
    cl = loaded.code_liveness
    cats = loaded.plan.categories
    np.testing.assert_array_equal(cats["code_loaded"], cl.loaded_peak)
    np.testing.assert_array_equal(cats["vertex_code"], cl.resident)
    np.testing.assert_array_equal(cl.all_resident, resident.plan.categories["vertex_code"])
    assert cl.peak_tile_bytes_loaded < cl.peak_tile_bytes_resident
    assert cl.saved.sum() > 0
    assert (cats["vertex_code"] + cats["code_loaded"]).max() < resident.plan.categories["vertex_code"].max()
    loads = [loaded.steps[i] for i in cl.load_steps]
    assert len(loads) == 6 and all(s.cycles > 0 and s.bytes_moved > 0 for s in loads)
    by_step = cl.by_step(loaded)
    assert by_step is not None and max(by_step.values()) == cl.live.max()


def test_a_load_in_one_branch_only_keeps_the_code_live_from_before_the_branch():
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.ones(8, np.float32), name="w")

    def work(x):
        return ops.exp(x)

    def load_it():
        ops.remote_code_load(g, "executable")

    def nothing():
        pass

    g = ir.create_graph(work, w.spec)
    loader = ir.create_graph(load_it)
    skip = ir.create_graph(nothing)
    with ir.main_graph, popxl.in_sequence():
        c = popxl.variable(True, popxl.bool, name="c")
        ops.conditional(c, loader, skip)
        y, = ops.call(g, w)
        o = popxl.d2h_stream((8,), popxl.float32)
        ops.host_store(o, y)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()
    np.testing.assert_allclose(out[o], np.exp(np.ones(8)), rtol=1e-6)
    (a, _), = sess.executable.code_liveness.functions[g.id]["intervals"]
    assert a == 0  # not loaded in every branch: live from the start of the program
