"""Variable-update ops against NumPy versions of PopART's optimizer formulas."""
import numpy as np
import pytest

import popxl.ops as ops
import popxl.ops.var_updates as vu

from helpers import run_popxl

RNG = np.random.default_rng(5)


def _vals(*shapes):
    return [RNG.normal(size=s).astype(np.float32) for s in shapes]


@pytest.mark.parametrize("kind,ref", [
    ("accumulate_", lambda t, x, f: t + x),
    ("accumulate_f", lambda t, x, f: t + f * x),
    ("accumulate_square_", lambda t, x, f: t + f * x * x),
    ("accumulate_mean_", lambda t, x, f: (f * t + x) / (f + 1)),
    ("accumulate_moving_average_", lambda t, x, f: f * t + (1 - f) * x),
    ("accumulate_moving_average_square_", lambda t, x, f: f * t + (1 - f) * x * x),
    ("accumulator_scale_", lambda t, x, f: t * f),
])
@pytest.mark.parametrize("tensor_factor", [False, True])
def test_accumulators(kind, ref, tensor_factor):
    t, x = _vals((5, 7), (5, 7))
    f = np.float32(0.3)

    def build(tt, xx, ff):
        fac = ff if tensor_factor else float(f)
        if kind == "accumulate_":
            return vu.accumulate_(tt, xx)
        if kind == "accumulate_f":
            return vu.accumulate_(tt, xx, fac)
        if kind == "accumulator_scale_":
            return vu.accumulator_scale_(tt, fac)
        return getattr(vu, kind)(tt, xx, fac)

    out, _ = run_popxl(build, [t, x, np.array(f)])
    np.testing.assert_allclose(out, ref(t, x, f), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kind,ref", [
    ("accumulate_", lambda t, x, f: t + f * x),
    ("accumulate_square_", lambda t, x, f: t + f * x * x),
    ("accumulate_mean_", lambda t, x, f: (f * t + x) / (f + 1)),
    ("accumulate_moving_average_", lambda t, x, f: f * t + (1 - f) * x),
    ("accumulator_scale_", lambda t, x, f: t * f),
])
@pytest.mark.parametrize("x_dtype", [np.float16, np.float32])
def test_float16_accumulator_with_float32_factor_tensor(kind, ref, x_dtype):
    # popxl-addons' autodiff_with_accumulation keeps a float32 `mean_accum_counter` for accumulators of any
    # type; PopART's accumulate ops take a factor tensor of another float type (GPT-3's float16 training)
    t = RNG.normal(size=(3, 11)).astype(np.float16)
    x = RNG.normal(size=(3, 11)).astype(x_dtype)
    f = np.float32(3.0) if kind == "accumulate_mean_" else np.float32(0.25)

    def build(tt, xx, ff):
        if kind == "accumulator_scale_":
            return vu.accumulator_scale_(tt, ff)
        return getattr(vu, kind)(tt, xx, ff)

    out, _ = run_popxl(build, [t, x, np.array(f)])
    assert out.dtype == np.float16
    expect = ref(t.astype(np.float32), x.astype(np.float32), f)
    np.testing.assert_allclose(out.astype(np.float32), expect, rtol=2e-3, atol=2e-3)


def test_accumulator_zero_and_copy():
    t, x = _vals((4,), (4,))
    outs, _ = run_popxl(lambda a, b: (vu.accumulator_zero_(a), vu.copy_var_update_(b, a * 0.0 + 2.0)), [t, x])
    np.testing.assert_array_equal(outs[0], 0)
    np.testing.assert_array_equal(outs[1], 2)


@pytest.mark.parametrize("mode", ["adam", "adam_no_bias", "adamax", "lamb"])
def test_adam_family(mode):
    w, m, v = _vals((6, 3), (6, 3), (6, 3))
    v = np.abs(v)
    step = np.array(2.0, np.float32)
    b1, b2, eps, wd, lr = 0.9, 0.999, 1e-6, 0.01, 0.05

    def build(ww, mm, vv, ts):
        if mode == "adamax":
            upd = vu.adamax_updater(mm, vv, ww, ts, wd, b1, eps)
        elif mode == "adam_no_bias":
            upd = vu.adam_updater(mm, vv, ww, None, wd, b1, b2, eps)
        elif mode == "adam":
            upd = vu.adam_updater(mm, vv, ww, ts, wd, b1, b2, eps)
        else:
            upd = vu.lamb_updater(mm, vv, ww, ts, wd, b1, b2, eps)
        if mode == "lamb":
            r1 = ops.sqrt(vu.lamb_square(ww) if hasattr(vu, "lamb_square") else ops.lamb_square(ww))
            r2 = ops.sqrt(ops.lamb_square(upd))
            return upd, vu.adam_var_update(ww, upd, r1, r2, lr, 10.0), ts
        return upd, vu.adam_var_update(ww, upd, None, None, lr), ts

    (upd, new_w, new_t), _ = run_popxl(build, [w, m, v, step])
    t = step + 1
    if mode == "adamax":
        ref = (m / (1 - b1 ** t)) / (v + eps) + wd * w
    elif mode == "adam_no_bias":
        ref = m / (np.sqrt(v) + eps) + wd * w
    else:
        ref = (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps) + wd * w
    np.testing.assert_allclose(upd, ref, rtol=1e-5, atol=1e-6)
    if mode == "lamb":
        ratio = min(np.linalg.norm(w), 10.0) / np.linalg.norm(ref)
        np.testing.assert_allclose(new_w, w - lr * ratio * ref, rtol=1e-5, atol=1e-6)
    else:
        np.testing.assert_allclose(new_w, w - lr * ref, rtol=1e-5, atol=1e-6)
    if mode != "adam_no_bias":
        assert new_t == t


def test_sparse_accumulate():
    t = _vals((6, 4))[0]
    x = _vals((3, 4))[0]
    idx = np.array([4, 0, 4], np.int32)
    out, _ = run_popxl(lambda a, b, i: vu.sparse_accumulate_(a, b, i, axis=0, f=0.5), [t, x, idx])
    want = t.copy()
    np.add.at(want, idx, 0.5 * x)
    np.testing.assert_allclose(out, want, rtol=1e-6)
