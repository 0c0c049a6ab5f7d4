"""The user codelets of examples/custom_op.py (LeakyRelu, LeakyReluGrad), tested as the built-in
codelets are: awkward sizes on several tiles, float32 and float16, kernel == NumPy reference ==
float64 maths, and the cost model against poplibs' estimators of the popops vertices it sits between."""
import importlib
import os
import sys

import numpy as np
import pytest

import ipu
from codelets.elementwise_costs import binary_cycles, unary_cycles

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


@pytest.fixture(scope="module")
def ex():
    """examples/custom_op.py imported as the module `custom_op` (importable, so Numba can cache its kernels)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return vars(importlib.import_module("custom_op"))


def _f64(x, alpha):
    x = x.astype(np.float64)
    return np.where(x >= 0, x, alpha * x)


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_leaky_relu_codelet(ex, dtype, rng, cl):
    x = rng.standard_normal(sum(cl.SIZES)).astype(dtype)
    x[:3] = [0.0, -0.0, -1e-3]
    got, run = cl.elementwise_run("LeakyRelu", {"in": x}, dtype, {"alpha": 0.2})
    ref = ipu.get_codelet("LeakyRelu").reference(x, 0.2)
    cl.assert_close(got, ref, what=f"LeakyRelu {dtype}")
    np.testing.assert_allclose(got.astype(np.float64), _f64(x, 0.2), rtol=1e-3 if dtype == "float16" else 1e-6,
                               atol=1e-6)
    assert run.cycles > 0


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_leaky_relu_grad_codelet(ex, dtype, rng, cl):
    n = sum(cl.SIZES)
    g = rng.standard_normal(n).astype(dtype)
    x = rng.standard_normal(n).astype(dtype)
    got, _ = cl.elementwise_run("LeakyReluGrad", {"grad": g, "in": x}, dtype, {"alpha": 0.3})
    cl.assert_close(got, ipu.get_codelet("LeakyReluGrad").reference(g, x, 0.3), what=f"LeakyReluGrad {dtype}")
    want = np.where(x.astype(np.float64) >= 0, g.astype(np.float64), 0.3 * g.astype(np.float64))
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=1e-3 if dtype == "float16" else 1e-6, atol=1e-6)


def test_leaky_relu_refuses_bad_connections(ex, cl):
    with pytest.raises(TypeError, match="LeakyRelu"):
        cl.elementwise_run("LeakyRelu", {"in": np.ones(7, np.int32)}, "int32", {"alpha": 0.1})


@pytest.mark.parametrize("dtype", [ipu.FLOAT32, ipu.FLOAT16])
def test_cost_model_between_poplibs_relu_and_relu_then_multiply(ex, dtype):
    """poplibs' UnaryOp1D RELU does less per element, RELU followed by a MULTIPLY (BinaryOp1D) more."""
    n = np.array([1, 6, 64, 256, 1000, 4096])
    cyc = ex["leaky_relu_cycles"](n, dtype.itemsize)
    relu = unary_cycles(n, "relu", dtype)
    both = relu + binary_cycles(n, "mul", dtype, np.zeros(n.size, bool))
    assert np.all(relu <= cyc) and np.all(cyc <= both), (relu, cyc, both)
