"""Reductions, softmax, normalisations and losses through Session, against NumPy."""
import numpy as np
import pytest

import popxl.ops as ops

from helpers import run_popxl

RNG = np.random.default_rng(99)

REDUCTIONS = {
    "sum": (ops.sum, lambda x, a, k: x.sum(a, keepdims=k)),
    "mean": (ops.mean, lambda x, a, k: x.mean(a, keepdims=k)),
    "max": (ops.max, lambda x, a, k: x.max(a, keepdims=k)),
    "min": (ops.min, lambda x, a, k: x.min(a, keepdims=k)),
    "prod": (ops.prod, lambda x, a, k: x.prod(a, keepdims=k)),
    "l1": (ops.l1, lambda x, a, k: np.abs(x).sum(a, keepdims=k)),
    "l2": (ops.l2, lambda x, a, k: np.sqrt((x * x).sum(a, keepdims=k))),
    "sumsquare": (ops.sumsquare, lambda x, a, k: (x * x).sum(a, keepdims=k)),
    "logsum": (ops.logsum, lambda x, a, k: np.log(x.sum(a, keepdims=k))),
    "logsumexp": (ops.logsumexp, lambda x, a, k: np.log(np.exp(x).sum(a, keepdims=k))),
}
CASES = [((7,), None, False), ((13, 5), 1, False), ((13, 5), 0, True), ((2, 3, 97), (0, 2), False),
         ((4, 300), None, False), ((1, 1), -1, True)]


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_reductions(name, dtype):
    fn, ref = REDUCTIONS[name]
    for shape, axis, keep in CASES:
        x = RNG.uniform(0.5, 1.5, shape).astype(dtype)
        out, _ = run_popxl(lambda t: fn(t, axis=axis, keepdims=keep), [x])
        a = axis if axis is None or isinstance(axis, tuple) else (axis,)
        want = ref(x.astype(np.float64), a, keep)
        tol = dict(rtol=2e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=3e-3, atol=3e-3)
        np.testing.assert_allclose(out.astype(np.float64), want, **tol, err_msg=f"{name} {shape} {axis}")
        assert out.shape == np.shape(want)


@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_int_reductions(name):
    fn, ref = REDUCTIONS[name]
    x = RNG.integers(-1000, 1000, (6, 11), dtype=np.int32)
    out, _ = run_popxl(lambda t: fn(t, axis=1), [x])
    np.testing.assert_array_equal(out, ref(x, (1,), False))


def test_reduce_of_a_large_tensor_spread_over_tiles():
    x = RNG.uniform(-1, 1, (64, 257)).astype(np.float32)
    out, sess = run_popxl(lambda t: (ops.sum(t), ops.max(t, axis=0)), [x], target="small:16")
    np.testing.assert_allclose(out[0], x.sum(dtype=np.float64), rtol=1e-5)
    np.testing.assert_allclose(out[1], x.max(0))


def test_softmax():
    x = RNG.normal(size=(5, 11)).astype(np.float32) * 10
    out, _ = run_popxl(lambda t: (ops.softmax(t, axis=1), ops.softmax(t, axis=0)), [x])
    for o, ax in zip(out, (1, 0)):
        e = np.exp(x - x.max(ax, keepdims=True))
        np.testing.assert_allclose(o, e / e.sum(ax, keepdims=True), rtol=1e-5, atol=1e-7)


def test_layer_and_group_norm():
    x = RNG.normal(size=(4, 6, 5)).astype(np.float32)
    w = RNG.normal(size=(6,)).astype(np.float32)
    b = RNG.normal(size=(6,)).astype(np.float32)
    out, _ = run_popxl(lambda t, ww, bb: (ops.layer_norm(t, ww, bb), ops.group_norm(t, ww, bb, num_groups=3)),
                       [x, w, b])
    for o, groups in zip(out, (1, 3)):
        g = x.reshape(4, groups, -1)
        norm = ((g - g.mean(2, keepdims=True)) / np.sqrt(g.var(2, keepdims=True) + 1e-5)).reshape(x.shape)
        np.testing.assert_allclose(o, norm * w[None, :, None] + b[None, :, None], rtol=1e-4, atol=1e-5)


def test_batch_norm_inference():
    x = RNG.normal(size=(2, 3, 4, 4)).astype(np.float32)
    s, b, m = (RNG.normal(size=(3,)).astype(np.float32) for _ in range(3))
    v = RNG.uniform(0.5, 2, (3,)).astype(np.float32)
    out, _ = run_popxl(lambda *t: ops.batch_norm_inference(*t, epsilon=1e-3), [x, s, b, m, v])
    c = lambda a: a[None, :, None, None]  # noqa: E731
    np.testing.assert_allclose(out, (x - c(m)) / np.sqrt(c(v) + 1e-3) * c(s) + c(b), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_nll_losses(reduction):
    logits = RNG.normal(size=(8, 5)).astype(np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = RNG.integers(0, 5, (8,), dtype=np.int32)
    outs, _ = run_popxl(lambda p, l: (ops.nll_loss(p, l, reduction=reduction),
                                      *ops.nll_loss_with_softmax_grad(p, l, reduction=reduction)), [probs, labels])
    per = -np.log(probs[np.arange(8), labels])
    want = {"mean": per.mean(), "sum": per.sum(), "none": per}[reduction]
    np.testing.assert_allclose(outs[0], want, rtol=1e-5)
    np.testing.assert_allclose(outs[1], want, rtol=1e-5)
    grad = probs.copy()
    grad[np.arange(8), labels] -= 1
    if reduction == "mean":
        grad /= 8
    np.testing.assert_allclose(outs[2], grad, rtol=1e-5, atol=1e-7)


def test_nll_loss_ignore_index():
    probs = RNG.uniform(0.1, 1, (6, 4)).astype(np.float32)
    labels = np.array([0, 3, -1, 2, -1, 1], np.int32)
    out, _ = run_popxl(lambda p, l: ops.nll_loss(p, l, ignore_index=-1), [probs, labels])
    keep = labels != -1
    np.testing.assert_allclose(out, -np.log(probs[np.arange(6)[keep], labels[keep]]).mean(), rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int16, np.uint16])
@pytest.mark.parametrize("name", ["sum", "max", "min"])
def test_narrow_int_reductions(dtype, name):
    fn, ref = REDUCTIONS[name]
    info = np.iinfo(dtype)
    x = RNG.integers(info.min, info.max, (5, 9), endpoint=True).astype(dtype)
    out, _ = run_popxl(lambda t: fn(t, axis=1), [x])
    want = ref(x.astype(np.int64), (1,), False).astype(dtype)  # sums wrap like the device
    np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("label_dtype", [np.int32, np.uint32, np.int8, np.uint16])
@pytest.mark.parametrize("reduction", ["mean", "none"])
def test_nll_labels_of_another_shape_and_type(label_dtype, reduction):
    """PopART's Nll ops take (N, 1) labels of (N, C) probs (their Opx flattens the labels) and any
    fixed-point label type; the loss of reduction 'none' has the labels' shape."""
    logits = RNG.normal(size=(6, 5)).astype(np.float32)
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    labels = RNG.integers(0, 5, (6, 1)).astype(label_dtype)
    outs, _ = run_popxl(lambda p, l: (ops.nll_loss(p, l, reduction=reduction),
                                      *ops.nll_loss_with_softmax_grad(p, l, reduction=reduction)), [probs, labels])
    per = -np.log(probs[np.arange(6), labels[:, 0].astype(np.int64)])
    want = per.mean() if reduction == "mean" else per.reshape(6, 1)
    for o in outs[:2]:
        assert o.shape == np.shape(want)
        np.testing.assert_allclose(o, want, rtol=1e-5)
    grad = probs.copy()
    grad[np.arange(6), labels[:, 0].astype(np.int64)] -= 1
    np.testing.assert_allclose(outs[2], grad / (6 if reduction == "mean" else 1), rtol=1e-5, atol=1e-7)


def test_nll_with_softmax_grad_float32_loss_grad_of_float16_probs():
    """PopXL's default loss_grad is a float32 constant, also for float16 probs."""
    import popxl

    probs = np.full((4, 3), 1 / 3, np.float16)
    labels = np.array([0, 1, 2, 1], np.int32)
    (loss, dx), _ = run_popxl(lambda p, l: ops.nll_loss_with_softmax_grad(p, l, popxl.constant(2.0, popxl.float32)),
                              [probs, labels])
    assert loss.dtype == dx.dtype == np.float16
    np.testing.assert_allclose(loss, np.log(3), rtol=1e-3)
    want = np.full((4, 3), 1 / 3, np.float32)
    want[np.arange(4), labels] -= 1
    np.testing.assert_allclose(dx.astype(np.float32), want * 2 / 4, rtol=2e-3, atol=1e-3)


@pytest.mark.parametrize("dtype, eps", [(np.float32, 1e-7), (np.float16, 6.104e-05)])
@pytest.mark.parametrize("reduction", ["sum", "none"])
def test_nll_loss_floors_probabilities_before_the_log(dtype, eps, reduction):
    """PopART's NllOpx takes log(max(p, eps)): a probability that underflowed to 0 (or one below
    eps) gives a large finite loss, never inf; eps is larger for float16 (above its underflow)."""
    probs = np.array([[0.0, 1.0, 0.0], [0.25, 0.5, 0.25], [1e-9, 1 - 1e-9, 0.0], [0.5, 0.5, 0.0]], dtype)
    labels = np.array([0, 1, 0, 2], np.int32)
    outs, _ = run_popxl(lambda p, l: (ops.nll_loss(p, l, reduction=reduction),
                                      ops.nll_loss_with_softmax_grad(p, l, reduction=reduction)[0]),
                        [probs, labels])
    picked = probs.astype(np.float64)[np.arange(4), labels]
    per = -np.log(np.maximum(picked, eps))
    want = per.sum() if reduction == "sum" else per
    for o in outs:
        assert np.all(np.isfinite(o))
        np.testing.assert_allclose(o.astype(np.float64), want, rtol=2e-3 if dtype == np.float16 else 1e-5)

