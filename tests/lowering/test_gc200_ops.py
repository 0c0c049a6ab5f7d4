"""A batch of ops in one program on the full simulated GC200 (1472 tiles), against NumPy: the
mapping policy, exchanges and plans at full size, not only on small test targets."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-5), (np.float16, 3e-3)])
def test_many_ops_on_gc200(monkeypatch, dtype, tol):
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)
    rng = np.random.default_rng(3)
    a = rng.uniform(0.5, 1.5, (37, 1500)).astype(dtype)  # more elements than tiles, prime rows
    b = rng.uniform(0.5, 1.5, (1500, 29)).astype(dtype)
    v = rng.uniform(-1, 1, (1500,)).astype(dtype)
    ir = popxl.Ir()
    with ir.main_graph:
        ins = [popxl.h2d_stream(x.shape, popxl.dtype.as_dtype(x.dtype), name=f"in{i}") for i, x in enumerate((a, b, v))]
        A, Bm, V = (ops.host_load(s) for s in ins)
        results = {
            "add_bcast": A + V,
            "mul_exp": ops.exp(A * 0.5),
            "sum_rows": ops.sum(A, axis=1),
            "max_cols": ops.max(A, axis=0),
            "mean_all": ops.mean(A),
            "softmax": ops.softmax(A, axis=1),
            "matmul": A @ Bm,
            "transpose": A.T + 1.0,
            "gelu": ops.gelu(V),
            "slice_concat": ops.concat([A[:, :7], A[:, -5:]], axis=1),
        }
        outs = {}
        for name, t in results.items():
            s = popxl.d2h_stream(t.shape, t.dtype, name=name)
            ops.host_store(s, t)
            outs[name] = s
    session = popxl.Session(ir, "ipu_model")
    assert session.target.num_tiles == 1472
    with session:
        res = session.run(dict(zip(ins, (a, b, v))))
    x, y, z = a.astype(np.float64), b.astype(np.float64), v.astype(np.float64)
    e = np.exp(x - x.max(1, keepdims=True))
    want = {
        "add_bcast": x + z, "mul_exp": np.exp(x * 0.5), "sum_rows": x.sum(1), "max_cols": x.max(0),
        "mean_all": x.mean(), "softmax": e / e.sum(1, keepdims=True), "matmul": x @ y, "transpose": x.T + 1,
        "gelu": 0.5 * z * (1 + np.tanh(np.sqrt(2 / np.pi) * (z + 0.044715 * z ** 3))),
        "slice_concat": np.concatenate([x[:, :7], x[:, -5:]], 1),
    }
    for name, w in want.items():
        got = res[outs[name]].astype(np.float64)
        np.testing.assert_allclose(got, w, rtol=tol * (30 if name == "matmul" and dtype == np.float16 else 1),
                                   atol=tol * 10, err_msg=name)
    assert session.total_cycles > 0
