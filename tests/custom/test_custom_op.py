"""Custom ops written in Python (popxl.custom_op): registration in the one op table, shape
inference and its errors, lowering by a user codelet and by an expansion of popxl ops, gradients
through autodiff, the reference interpreter, and the profile naming the op and its codelet."""
import importlib
import os
import sys

import numpy as np
import pytest

import popxl
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")


@pytest.fixture(scope="module")
def ex():
    """examples/custom_op.py imported as the module `custom_op` (importable, so Numba can cache its kernels)."""
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    return vars(importlib.import_module("custom_op"))


def _run(ir, feeds=None):
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run(feeds or {})
    return out, popxl.reference.run(ir, feeds or {})


def test_registered_in_the_op_table_with_its_rules(ex):
    from popxl.lowering.registry import LOWERING_RULES
    from popxl.op_table import OP_TYPES
    from popxl.reference import REFERENCE_RULES
    from popxl.transforms.grad_rules import GRAD_RULES
    e = OP_TYPES["leaky_relu"]
    assert e.family == "custom" and "alpha" in e.attrs and e.gradient == "rule"
    assert "leaky_relu" in LOWERING_RULES and "leaky_relu" in GRAD_RULES and "leaky_relu" in REFERENCE_RULES
    assert OP_TYPES["leaky_relu_grad"].gradient == "missing"


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 13), (2, 5, 97)])
@pytest.mark.parametrize("dtype", [popxl.float32, popxl.float16])
def test_leaky_relu_matches_numpy(ex, shape, dtype):
    rng = np.random.default_rng(len(shape))
    x = rng.standard_normal(shape).astype(dtype.as_numpy())
    ir = popxl.Ir()
    with ir.main_graph:
        t = popxl.variable(x)
        y = ex["leaky_relu"](t, 0.25)
        assert y.shape == shape and y.dtype == dtype and y.producer.type == "leaky_relu"
        s = popxl.d2h_stream(shape, dtype, "y")
        ops.host_store(s, y)
    got, ref = _run(ir)
    want = np.where(x.astype(np.float64) >= 0, x, 0.25 * x.astype(np.float64))
    tol = 1e-3 if dtype == popxl.float16 else 1e-6
    np.testing.assert_allclose(got[s].astype(np.float64), want, rtol=tol, atol=tol)
    np.testing.assert_allclose(ref[s], got[s], rtol=tol, atol=tol)


def test_shape_inference_errors_are_clear(ex):
    ir = popxl.Ir()
    with ir.main_graph:
        i = popxl.variable(np.ones(3, np.int32))
        with pytest.raises(TypeError, match="leaky_relu: the input must be float32 or float16, not int32"):
            ex["leaky_relu"](i)
        with pytest.raises(TypeError, match="unknown attribute"):
            ex["LeakyReluOp"].create(popxl.variable(np.ones(3, np.float32)), beta=1.0)
        with pytest.raises(TypeError, match="must be a popxl Tensor"):
            ex["LeakyReluOp"].create(np.ones(3), alpha=0.1)


def test_gradient_through_autodiff(ex):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    g = rng.standard_normal((4, 5)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        fwd = ir.create_graph(lambda t: ex["leaky_relu"](t * 2.0, 0.1), popxl.TensorSpec((4, 5), popxl.float32))
        info = popxl.transforms.autodiff(fwd)
        xv, gv = popxl.variable(x), popxl.variable(g)
        call = ops.call_with_info(fwd, xv)
        dx, = ops.call(info.graph, gv, inputs_dict=info.inputs_dict(call))
        s = popxl.d2h_stream((4, 5), popxl.float32, "dx")
        ops.host_store(s, dx)
    assert "leaky_relu_grad" in {op.type for op in info.graph.ops}
    got, ref = _run(ir)
    want = 2.0 * np.where(2.0 * x >= 0, g, 0.1 * g)
    np.testing.assert_allclose(got[s], want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ref[s], want, rtol=1e-6, atol=1e-6)


def test_an_op_by_expansion(monkeypatch):
    """An op written as popxl ops: lowered inline under its own name, its reference from the
    expansion, its gradient from its rule; the expansion graph is shared by equal uses."""

    @register_custom_op
    class SoftSign(CustomOp):
        op_type = "softsign_for_test"
        input_names = ("t",)

        def infer(self, inputs):
            return [inputs[0]]

        def expand(self, t):
            return t / (ops.abs(t) + 1.0)

        def grad(self, ctx, op, grads):
            d = ops.abs(ctx.input(0)) + 1.0
            return [grads[0] / (d * d)]

    try:
        x = np.linspace(-3, 3, 12).astype(np.float32).reshape(3, 4)
        ir = popxl.Ir()
        with ir.main_graph:
            t = popxl.variable(x)
            a, = SoftSign.create(t)
            b, = SoftSign.create(a)
            s = popxl.d2h_stream(x.shape, popxl.float32, "y")
            ops.host_store(s, b)
        assert a.producer.attrs["expansion"] is b.producer.attrs["expansion"]
        got, ref = _run(ir)
        ss = lambda v: v / (np.abs(v) + 1)  # noqa: E731
        np.testing.assert_allclose(got[s], ss(ss(x)), rtol=1e-6)
        np.testing.assert_allclose(ref[s], got[s], rtol=1e-6)
        assert a.producer._pb_op.opType() == "SoftsignForTest"
    finally:
        from popxl.custom_op import _CUSTOM
        from popxl.lowering.registry import LOWERING_RULES
        from popxl.op_table import OP_TYPES
        from popxl.reference import REFERENCE_RULES
        from popxl.transforms.grad_rules import GRAD_RULES
        for reg in (OP_TYPES, LOWERING_RULES, REFERENCE_RULES, GRAD_RULES, _CUSTOM):
            reg.pop("softsign_for_test", None)


def test_an_expansion_that_changes_an_undeclared_input_is_refused():
    @register_custom_op
    class Sneaky(CustomOp):
        op_type = "sneaky_for_test"
        gradient = "none"

        def infer(self, inputs):
            return [inputs[0]]

        def expand(self, t):
            return ops.relu_(t)

    try:
        ir = popxl.Ir()
        with ir.main_graph, pytest.raises(ValueError, match="changes input 0 in place"):
            Sneaky.create(popxl.variable(np.ones(2, np.float32)))
    finally:
        from popxl.custom_op import _CUSTOM
        from popxl.lowering.registry import LOWERING_RULES
        from popxl.op_table import OP_TYPES
        from popxl.reference import REFERENCE_RULES
        from popxl.transforms.grad_rules import NON_DIFFERENTIABLE
        for reg in (OP_TYPES, LOWERING_RULES, REFERENCE_RULES, _CUSTOM):
            reg.pop("sneaky_for_test", None)
        NON_DIFFERENTIABLE.discard("sneaky_for_test")


def test_registration_refuses_clashes_and_incomplete_ops():
    class Add(CustomOp):
        op_type = "add"

        def infer(self, inputs):
            return [inputs[0]]

        def expand(self, t):
            return t

        gradient = "none"

    with pytest.raises(ValueError, match="built-in op type"):
        register_custom_op(Add)

    class NoRunning(CustomOp):
        op_type = "no_running_for_test"

    with pytest.raises(TypeError, match="needs `lower`"):
        register_custom_op(NoRunning)

    class NoGrad(CustomOp):
        op_type = "no_grad_for_test"

        def expand(self, t):
            return t

    with pytest.raises(TypeError, match="no grad"):
        register_custom_op(NoGrad)


def test_profile_shows_the_custom_op_and_its_codelet(ex, tmp_path, monkeypatch):
    import profiler
    from profiler.report import render
    monkeypatch.setenv("POPLAR_ENGINE_OPTIONS", f'{{"autoReport.all": "true", "autoReport.directory": "{tmp_path}"}}')
    x = np.linspace(-1, 1, 256).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        y = ex["leaky_relu"](popxl.variable(x, name="x"), 0.1)
        s = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(s, y)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
    del sess
    import gc
    gc.collect()
    from popxl import _profiling
    _profiling._flush_all()
    report = profiler.open_report(str(tmp_path))
    steps = [st for st in report.execution.steps if "LeakyRelu" in st.program.name]
    assert steps and steps[0].program.op == "leaky_relu" and steps[0].cycles > 0
    import io
    from rich.console import Console
    buf = io.StringIO()
    render(report.doc if hasattr(report, "doc") else report, console=Console(file=buf, width=200))
    text = buf.getvalue()
    assert "leaky_relu" in text and "LeakyRelu" in text
