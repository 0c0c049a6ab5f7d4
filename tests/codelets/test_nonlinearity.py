"""NonLinearityGrad: every activation's gradient at both float types against its NumPy reference
and the derivative; popnn's NonLinearityGrad1D estimate."""
import numpy as np
import pytest

from codelets.nonlinearity import GRAD_OPS, READS_INPUT, nonlinearity_grad_cycles, nonlinearity_grad_reference

import ipu

FORWARD = {
    "relu": (lambda x, a, b: np.maximum(x, 0), None),
    "sigmoid": (lambda x, a, b: 1 / (1 + np.exp(-x)), None),
    "tanh": (lambda x, a, b: np.tanh(x), None),
    "clip": (lambda x, a, b: np.clip(x, a, b), None),
    "hard_sigmoid": (lambda x, a, b: np.clip(a * x + b, 0, 1), None),
    "swish": (lambda x, a, b: x / (1 + np.exp(-x)), None),
    "gelu": (lambda x, a, b: 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))), None),
}
PARAMS = {"clip": (0.0, 6.0), "hard_sigmoid": (1 / 6, 0.5)}


@pytest.mark.parametrize("op", list(GRAD_OPS))
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, 7, 13, 97])
def test_matches_reference_and_derivative(op, dtype, n, rng, cl):
    p0, p1 = PARAMS.get(op, (0.0, 0.0))
    x = rng.uniform(-8, 8, n).astype(np.float64)
    # away from the kinks (relu's 0, clip's 0 and 6, hard sigmoid's -3 and 3)
    for k in (0.0, 6.0, -3.0, 3.0):
        x[np.abs(x - k) < 1e-2] = k + 0.5
    f = FORWARD[op][0]
    t = x if op in READS_INPUT else f(x, p0, p1)
    g = rng.normal(size=n)
    gd, td = g.astype(dtype), t.astype(dtype)
    run = cl.run_vertex("NonLinearityGrad", {"outGrad": gd, "out": td, "inGrad": np.zeros(n, dtype)},
                        {"op": GRAD_OPS[op], "p0": p0, "p1": p1})
    np.testing.assert_array_equal(run.out["inGrad"], nonlinearity_grad_reference(gd, td, op, p0, p1))
    # the derivative, by central differences of the forward function (away from kinks)
    h = 1e-4
    fd = (f(x + h, p0, p1) - f(x - h, p0, p1)) / (2 * h)
    tol = 2e-2 if dtype == "float16" else 2e-4
    np.testing.assert_allclose(run.out["inGrad"].astype(np.float64), g * fd, rtol=tol, atol=tol * 10)


# popnn NonLinearityGrad1D by hand: relu, float, n = 13 (6 vectors, one left over): one vector per
# worker, 9 + 6 x (20 + (4 + 0 + 1) + 2 + 2 + (1 + 1)) = 9 + 6 x 31
def test_estimate_by_hand():
    assert int(nonlinearity_grad_cycles(13, "relu", ipu.FLOAT32)) == 9 + 6 * 31
    assert int(nonlinearity_grad_cycles(0, "relu", ipu.FLOAT32)) == 9 + 6 * (20 + 4)
