"""The debug.checkIndices engine option: out-of-range indices raise IndexError on the host naming
the op and the bad index; without it the device follows poplibs and stays silent."""
import json

import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.delenv("IPU_SIM_CHECK_INDICES", raising=False)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)


TABLE = np.arange(12, dtype=np.float32).reshape(4, 3)


def _program(kind, check=True, in_subgraph=False):
    ir = popxl.Ir()
    if check:
        ir._pb_ir.getSessionOptions().engineOptions["debug.checkIndices"] = "true"
    with ir.main_graph:
        t = popxl.variable(TABLE, name="table")
        si = popxl.h2d_stream((2,), popxl.int32, name="idx")
        i = ops.host_load(si)

        def body(t, i):
            if kind == "gather":
                return ops.gather(t, i)
            if kind == "dynamic_slice":
                return ops.dynamic_slice(t, ops.cast(ops.slice(i, start=[0], stop=[1]), popxl.uint32),
                                         axes=[0], sizes=[2], no_overlap=True)
            if kind == "dynamic_update":
                upd = popxl.constant(np.full((1, 3), -1, np.float32))
                return ops.dynamic_update(t, ops.cast(ops.slice(i, start=[0], stop=[1]), popxl.uint32), upd,
                                          axes=[0], sizes=[1], no_overlap=True)
            if kind == "nll_loss":
                probs = ops.softmax(ops.slice(t, start=[0], stop=[2]), 1)
                return ops.nll_loss(probs, i, ignore_index=-100, reduction="none")
            raise AssertionError(kind)

        if in_subgraph:
            g = ir.create_graph(body, t, i)
            y = ops.call(g, t, i)[0]
        else:
            y = body(t, i)
        so = popxl.d2h_stream(y.shape, y.dtype, name="out")
        ops.host_store(so, y)
    return ir, si, so


@pytest.mark.parametrize("kind, good, bad, message", [
    ("gather", [0, 3], [1, 4], r"gather '.*': index 4 at position 1 .* axis 0 of '.*' has 4 rows \(0..3\)"),
    ("gather", [0, 3], [-1, 0], r"index -1 at position 0"),
    ("dynamic_slice", [2, 0], [3, 0], r"dynamic_slice '.*': index 3 at position 0 .*starts at 0..2.*wraps"),
    ("dynamic_update", [3, 0], [4, 0], r"dynamic_update '.*': index 4 .*starts at 0..3"),
    ("nll_loss", [2, -100], [1, 3], r"nll_loss '.*': index 3 at position 1 .*classes 0..2 or the ignore_index -100"),
])
@pytest.mark.parametrize("in_subgraph", [False, True])
def test_out_of_range_index_raises_with_op_and_index(kind, good, bad, message, in_subgraph):
    ir, si, so = _program(kind, in_subgraph=in_subgraph)
    with popxl.Session(ir, "ipu_model") as sess:
        ok = sess.run({si: np.array(good, np.int32)})[so]
        with pytest.raises(IndexError, match=message):
            sess.run({si: np.array(bad, np.int32)})
        again = sess.run({si: np.array(good, np.int32)})[so]  # the session still works
    np.testing.assert_array_equal(ok, again)


def test_off_by_default_the_device_follows_poplibs():
    ir, si, so = _program("gather", check=False)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run({si: np.array([1, 4], np.int32)})[so]
    np.testing.assert_array_equal(out, [TABLE[1], np.zeros(3)])  # zero rows out of range
    ir, si, so = _program("dynamic_slice", check=False)
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run({si: np.array([3, 0], np.int32)})[so]
    np.testing.assert_array_equal(out, TABLE[[3, 0]])  # a slice over the end wraps around (poplibs)


def test_checks_leave_results_unchanged():
    for kind in ("gather", "dynamic_slice", "dynamic_update", "nll_loss"):
        outs = []
        for check in (False, True):
            ir, si, so = _program(kind, check=check)
            with popxl.Session(ir, "ipu_model") as sess:
                outs.append(sess.run({si: np.array([1, 2], np.int32)})[so])
        np.testing.assert_array_equal(outs[0], outs[1], err_msg=kind)


@pytest.mark.parametrize("how", ["env", "poplar"])
def test_option_from_the_environment(monkeypatch, how):
    if how == "env":
        monkeypatch.setenv("IPU_SIM_CHECK_INDICES", "1")
    else:
        monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", json.dumps({"debug.checkIndices": "true"}))
    ir, si, so = _program("gather", check=False)
    with popxl.Session(ir, "ipu_model") as sess:
        with pytest.raises(IndexError, match="index 9"):
            sess.run({si: np.array([9, 0], np.int32)})
