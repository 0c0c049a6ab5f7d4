"""Bad inputs to a compiled program: every one gets a clear error of the kind PopXL users catch
(ValueError, TypeError, IndexError) naming the stream, never an internal or Numba traceback, and
the session keeps working afterwards."""
import os

import numpy as np
import pytest
from hypothesis import given, note
from hypothesis import strategies as st

import popxl
import popxl.ops as ops

_SESSIONS = {}


def _session(dtype):
    """One compiled program per dtype: y = x * 2 (its stream named 'x'), reused by every example."""
    if dtype not in _SESSIONS:
        old = os.environ.get("IPU_SIM_TARGET")
        os.environ["IPU_SIM_TARGET"] = "small:4"
        try:
            ir = popxl.Ir()
            with ir.main_graph:
                s = popxl.h2d_stream((3, 4), dtype, name="x")
                x = ops.host_load(s)
                o = popxl.d2h_stream((3, 4), dtype, name="y")
                ops.host_store(o, x + x)
            _SESSIONS[dtype] = (popxl.Session(ir, "ipu_model"), s, o)
        finally:
            if old is None:
                os.environ.pop("IPU_SIM_TARGET", None)
            else:
                os.environ["IPU_SIM_TARGET"] = old
    return _SESSIONS[dtype]


BAD_VALUES = st.one_of(
    st.tuples(st.just("shape"), st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)),
    st.tuples(st.just("dtype"), st.sampled_from(["float64", "float16", "int64", "int8", "uint8", "bool",
                                                 "complex64", "object", "U3", "uint64"])),
    st.tuples(st.just("python"), st.sampled_from([None, 3, 2.5, "abc", [1, 2], [[1.0] * 4] * 3, {"a": 1}])),
    st.tuples(st.just("values"), st.sampled_from([2**40, -2**40, 1e39, -1e39, np.nan])),
)


def _bad_input(kind, what, dtype):
    npd = dtype.as_numpy()
    if kind == "shape":
        return np.zeros(what, npd)
    if kind == "dtype":
        return np.zeros((3, 4), what) if what != "object" else np.full((3, 4), None, object)
    if kind == "python":
        return what
    return np.full((3, 4), what, np.float64 if isinstance(what, float) else np.int64)


@given(st.sampled_from([popxl.float32, popxl.int32, popxl.float16]), BAD_VALUES, st.booleans())
def test_bad_inputs_get_clear_errors(dtype, bad, downcast):
    sess, s, o = _session(dtype)
    kind, what = bad
    data = _bad_input(kind, what, dtype)
    note(f"{kind}: {what!r} -> {type(data).__name__} {getattr(data, 'dtype', '')} {getattr(data, 'shape', '')}")
    with sess:
        try:
            out = sess.run({s: data}, downcast_inputs=downcast)
        except (ValueError, TypeError) as e:
            msg = str(e)
            assert "'x'" in msg, msg  # the message names the stream
        else:
            # accepted: then it was convertible without loss, and the result says so
            arr = np.asarray(data)
            want = (arr.reshape(3, 4).astype(dtype.as_numpy()) * 2).astype(dtype.as_numpy())
            np.testing.assert_array_equal(out[o], want)
        # the session still works
        good = np.arange(12).reshape(3, 4).astype(dtype.as_numpy())
        np.testing.assert_array_equal(sess.run({s: good})[o], good + good)


@given(st.sampled_from(["missing", "extra", "not_a_stream", "output_dtype", "output_shape", "output_kind"]))
def test_bad_stream_maps_get_clear_errors(case):
    sess, s, o = _session(popxl.float32)
    other, other_s, other_o = _session(popxl.int32)
    good = np.ones((3, 4), np.float32)
    with sess:
        with pytest.raises((ValueError, TypeError)) as e:
            if case == "missing":
                sess.run({})
            elif case == "extra":
                sess.run({s: good, other_s: np.ones((3, 4), np.int32)})
            elif case == "not_a_stream":
                sess.run({"x": good})
            elif case == "output_dtype":
                sess.run_with_outputs({s: good}, {o: np.zeros((3, 4), np.float64)})
            elif case == "output_shape":
                sess.run_with_outputs({s: good}, {o: np.zeros((4, 3), np.float32)})
            else:
                sess.run_with_outputs({s: good}, {o: [[0.0] * 4] * 3})
        note(str(e.value))
        assert "Traceback" not in str(e.value)
