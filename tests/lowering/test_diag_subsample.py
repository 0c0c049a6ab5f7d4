"""Tensor.diag and ops.subsample on the simulated IPU, against NumPy, with their gradients."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops

from helpers import run_popxl


@pytest.mark.parametrize("shape", [(1, 1), (4, 4), (3, 7), (7, 3), (13, 11)])
@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_diag_matches_numpy(shape, dtype):
    x = (np.random.default_rng(sum(shape)).standard_normal(shape) * 10).astype(dtype)
    out, _ = run_popxl(lambda a: a.diag(), [x])
    np.testing.assert_array_equal(out, np.diag(x))


def test_diag_refuses_other_ranks():
    with popxl.Ir().main_graph:
        with pytest.raises(ValueError, match="2-dimensional"):
            popxl.variable(np.zeros(3, np.float32)).diag()


def test_diag_gradient_is_the_identity_pattern():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.arange(12, dtype=np.float32).reshape(3, 4), name="x")
        g = ir.create_graph(lambda t: t.diag(), x)
        info = popxl.transforms.autodiff(g)
        call = ops.call_with_info(g, x)
        (dx,) = ops.call(info.graph, popxl.constant(np.array([1.0, 2.0, 3.0], np.float32)),
                         inputs_dict=info.inputs_dict(call))
        o = popxl.d2h_stream(dx.shape, dx.dtype)
        ops.host_store(o, dx)
    with popxl.Session(ir, "ipu_model") as s:
        got = s.run()[o]
    want = np.zeros((3, 4), np.float32)
    want[[0, 1, 2], [0, 1, 2]] = [1, 2, 3]
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("shape,strides", [((7,), 3), ((7,), [1]), ((5, 6), (2, 4)), ((2, 3, 5), np.array([1, 2, 5])),
                                           ((11, 1), [4, 1])])
def test_subsample_argument_forms_match_numpy(shape, strides):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    out, _ = run_popxl(lambda a: ops.subsample(a, strides), [x])
    steps = [strides] if isinstance(strides, int) else list(strides)
    np.testing.assert_array_equal(out, x[tuple(slice(None, None, int(s)) for s in steps)])
