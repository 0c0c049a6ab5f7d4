"""Each optimizer, two training steps on the simulated IPU against NumPy doing seed 002's formulas
(loss 0.5 * sum((x @ w)^2), so the gradient is x^T (x @ w))."""
from __future__ import annotations

import numpy as np
import pytest

import popart

from popart_helpers import device

X = np.random.default_rng(7).normal(size=(4, 5)).astype(np.float32)
W0 = np.random.default_rng(8).normal(size=(5, 3)).astype(np.float32)
B0 = np.random.default_rng(9).normal(size=(3,)).astype(np.float32)


def _model():
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [4, 5]), "x")
    w = b.addInitializedInputTensor(W0, "w")
    bias = b.addInitializedInputTensor(B0, "bias")
    y = b.aiOnnx.add([b.aiOnnx.matmul([x, w]), bias])
    sq = b.aiOnnx.reducesum([b.aiOnnx.mul([y, y])], keepdims=0)
    loss = b.aiGraphcore.identityloss([b.aiGraphcore.scale([sq], 0.5)])
    return b.getModelProto(), x, loss


def _grads(w, bias):
    y = X @ w + bias
    return {"w": X.T @ y, "bias": y.sum(0)}


def _train(optimizer, steps=2, options=None):
    proto, x, loss = _model()
    return _train_model(proto, loss, {x: X}, {"w": W0, "bias": B0}, optimizer, steps, device(), options)


def _train_model(proto, loss, feeds, initial, optimizer, steps, dev, options=None):
    """`steps` runs of a TrainingSession on the same feeds: the weights read back (named as in
    `initial`, shaped like its arrays) and the session."""
    s = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("Final")}), loss, optimizer,
                               dev, userOptions=options)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    for _ in range(steps):
        s.run(popart.PyStepIO(feeds, out))
    s.weightsToHost()
    got = {name: np.zeros_like(v) for name, v in initial.items()}
    s.readWeights(popart.PyWeightsIO(got))
    return got, s


def _numpy(update, steps=2):
    p = {"w": W0.astype(np.float64), "bias": B0.astype(np.float64)}
    state = {}
    for t in range(1, steps + 1):
        g = _grads(p["w"], p["bias"])
        for k in p:
            p[k] = update(k, p[k], g[k], state.setdefault(k, {}), t)
    return p


def _check(got, want, rtol=2e-4, atol=1e-5):
    for k in want:
        np.testing.assert_allclose(got[k], want[k], rtol=rtol, atol=atol, err_msg=k)


@pytest.mark.parametrize("lr,mm,dm,wd,vs,ls,nesterov", [
    (0.01, 0.0, 0.0, 0.0, 1.0, 1.0, False),
    (0.01, 0.9, 0.0, 0.0, 1.0, 1.0, False),
    (0.02, 0.8, 0.3, 0.05, 1.0, 1.0, False),
    (0.01, 0.9, 0.1, 0.01, 4.0, 16.0, False),
    (0.01, 0.7, 0.0, 0.02, 1.0, 1.0, True),
])
def test_sgd(lr, mm, dm, wd, vs, ls, nesterov):
    opt = popart.SGD({"defaultLearningRate": (lr, True), "defaultMomentum": (mm, True),
                      "defaultDampening": (dm, True), "defaultWeightDecay": (wd, True),
                      "defaultVelocityScaling": (vs, True), "lossScaling": (ls, True), "nesterov": nesterov})

    def update(k, w, g, st, t):
        v = st.get("v", np.zeros_like(w))
        v = mm * v + (1 - dm) * (g + wd * w)
        st["v"] = v
        return w - lr * ((g + wd * w + mm * v) if nesterov else v)
    got, _ = _train(opt)
    _check(got, _numpy(update))


def test_sgd_per_tensor_settings_and_const_sgd():
    opt = popart.SGD({"defaultLearningRate": (0.01, True)})
    opt.insertSpecific("bias", {"learningRate": (0.1, True), "weightDecay": (0.5, True)})
    got, _ = _train(opt)
    want = _numpy(lambda k, w, g, st, t: w - (0.1 * (g + 0.5 * w) if k == "bias" else 0.01 * g))
    _check(got, want)
    got, _ = _train(popart.ConstSGD(0.01, weight_decay=0.1))
    _check(got, _numpy(lambda k, w, g, st, t: w - 0.01 * (g + 0.1 * w)))


def _train_then_update(optimizer, updated):
    """One step with `optimizer`, updateOptimizerFromHost(updated), a second step: the weights
    and the session."""
    proto, x, loss = _model()
    s = popart.TrainingSession(proto, popart.DataFlow(1, [loss]), loss, optimizer, device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: X}, out))
    s.updateOptimizerFromHost(updated)
    s.run(popart.PyStepIO({x: X}, out))
    s.weightsToHost()
    got = {"w": np.zeros_like(W0), "bias": np.zeros_like(B0)}
    s.readWeights(popart.PyWeightsIO(got))
    return got, s


def test_sgd_non_const_learning_rate_updated_from_host():
    got, s = _train_then_update(popart.SGD({"defaultLearningRate": (0.01, False)}),
                                popart.SGD({"defaultLearningRate": (0.002, False)}))
    _check(got, _numpy(lambda k, w, g, st, t: w - (0.01 if t == 1 else 0.002) * g))
    with pytest.raises(popart.popart_exception, match="must match"):
        s.updateOptimizerFromHost(popart.SGD({"defaultLearningRate": (0.002, True)}))


@pytest.mark.parametrize("mode,wdmode,wd", [
    (popart.AdamMode.Adam, popart.WeightDecayMode.Decay, 0.0),
    (popart.AdamMode.Adam, popart.WeightDecayMode.Decay, 0.1),           # AdamW
    (popart.AdamMode.Adam, popart.WeightDecayMode.L2Regularization, 0.1),
    (popart.AdamMode.AdamNoBias, popart.WeightDecayMode.Decay, 0.0),
    (popart.AdamMode.Lamb, popart.WeightDecayMode.Decay, 0.05),
    (popart.AdamMode.LambNoBias, popart.WeightDecayMode.Decay, 0.0),
    (popart.AdamMode.AdaMax, popart.WeightDecayMode.Decay, 0.0),
])
def test_adam(mode, wdmode, wd):
    lr, b1, b2, eps, ls = 0.01, 0.9, 0.99, 1e-6, 4.0
    opt = popart.Adam({"defaultLearningRate": (lr, True), "defaultBeta1": (b1, True), "defaultBeta2": (b2, True),
                       "defaultEps": (eps, True), "defaultWeightDecay": (wd, True), "lossScaling": (ls, True)},
                      mode=mode, weight_decay_mode=wdmode)

    def update(k, w, g, st, t):
        gt = g + wd * w if wdmode == popart.WeightDecayMode.L2Regularization else g
        m = b1 * st.get("m", 0) + (1 - b1) * gt
        if mode == popart.AdamMode.AdaMax:
            v = np.maximum(b2 * st.get("v", 0), np.abs(gt))
        else:
            v = b2 * st.get("v", 0) + (1 - b2) * gt * gt
        st["m"], st["v"] = m, v
        bias = mode in (popart.AdamMode.Adam, popart.AdamMode.Lamb, popart.AdamMode.AdaMax)
        mt = m / (1 - b1 ** t) if bias else m
        if mode == popart.AdamMode.AdaMax:  # popxl's adamax_updater: m_hat / (v + eps)
            u = mt / (v + eps)
        else:
            vt = v / (1 - b2 ** t) if bias else v
            u = mt / (np.sqrt(vt) + eps)
        if wdmode == popart.WeightDecayMode.Decay:
            u = u + wd * w
        if mode in (popart.AdamMode.Lamb, popart.AdamMode.LambNoBias):
            r1, r2 = min(np.linalg.norm(w), 65504.0), np.linalg.norm(u)
            ratio = r1 / r2 if r1 > 0 and r2 > 0 else 1.0
            return w - ratio * lr * u
        return w - lr * u
    got, _ = _train(opt)
    _check(got, _numpy(update), rtol=1e-3, atol=1e-5)


@pytest.mark.parametrize("mode", list(popart.AdaptiveMode))
@pytest.mark.parametrize("mm", [0.0, 0.5])
def test_adaptive(mode, mm):
    lr, alpha, eps, wd = 0.01, 0.9, 1e-6, 0.02
    opt = popart.Adaptive({"defaultLearningRate": (lr, True), "defaultAlpha": (alpha, True),
                           "defaultEps": (eps, True), "defaultWeightDecay": (wd, True),
                           "defaultMomentum": (mm, True)}, mode=mode)

    def update(k, w, g, st, t):
        g = g + wd * w  # L2 regularisation, Adaptive's default weight decay mode
        if mode == popart.AdaptiveMode.AdaGrad:
            v = st.get("v", 0) + g * g
        else:
            v = alpha * st.get("v", 0) + (1 - alpha) * g * g
        st["v"] = v
        if mode == popart.AdaptiveMode.AdaDelta:
            d = st.get("d", 0)
            u = g * np.sqrt(d + eps) / np.sqrt(v + eps)
            st["d"] = alpha * d + (1 - alpha) * u * u
        elif mode == popart.AdaptiveMode.CenteredRMSProp:
            mg = alpha * st.get("mg", 0) + (1 - alpha) * g
            st["mg"] = mg
            u = g / (np.sqrt(v - mg * mg) + eps)
        else:
            u = g / (np.sqrt(v) + eps)
        if mm:
            x = mm * st.get("x", 0) + u
            st["x"] = x
            u = x
        return w - lr * u
    got, _ = _train(opt)
    _check(got, _numpy(update), rtol=1e-3, atol=1e-5)


def test_gradient_accumulation_sums_micro_batch_gradients():
    """accumulationFactor 2 with the default Sum reduction: one update from the summed gradients."""
    proto, x, loss = _model()
    opts = popart.SessionOptions()
    opts.enableGradientAccumulation = True
    opts.accumulationFactor = 2
    sgd = popart.SGD({"defaultLearningRate": (0.01, True)})
    s = popart.TrainingSession(proto, popart.DataFlow(1, [loss]), loss, sgd, device(), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    assert out[loss].shape == (2,)
    X2 = np.stack([X, 2 * X])
    s.run(popart.PyStepIO({x: X2}, out))
    s.weightsToHost()
    got = {"w": np.zeros_like(W0), "bias": np.zeros_like(B0)}
    s.readWeights(popart.PyWeightsIO(got))
    g = {k: 0 for k in got}
    for xi in X2:
        y = xi @ W0 + B0
        g["w"] = g["w"] + xi.T @ y
        g["bias"] = g["bias"] + y.sum(0)
    _check(got, {"w": W0 - 0.01 * g["w"], "bias": B0 - 0.01 * g["bias"]})
    np.testing.assert_allclose(out[loss], [0.5 * ((xi @ W0 + B0) ** 2).sum() for xi in X2], rtol=1e-5)


def test_adam_and_adaptive_non_const_values_updated_from_host():
    b2, eps = 0.999, 1e-6

    def adam(lr, b1):
        return popart.Adam({"defaultLearningRate": (lr, False), "defaultBeta1": (b1, False),
                            "defaultBeta2": (b2, True), "defaultEps": (eps, True)})

    def adam_step(k, w, g, st, t):
        lr, b1 = (0.01, 0.9) if t == 1 else (0.002, 0.5)
        m = b1 * st.get("m", 0) + (1 - b1) * g
        v = b2 * st.get("v", 0) + (1 - b2) * g * g
        st["m"], st["v"] = m, v
        return w - lr * (m / (1 - b1 ** t)) / (np.sqrt(v / (1 - b2 ** t)) + eps)
    _check(_train_then_update(adam(0.01, 0.9), adam(0.002, 0.5))[0], _numpy(adam_step), rtol=1e-3)

    def rmsprop(lr, alpha):
        return popart.Adaptive({"defaultLearningRate": (lr, False), "defaultAlpha": (alpha, False),
                                "defaultEps": (eps, True)}, mode=popart.AdaptiveMode.RMSProp)

    def rmsprop_step(k, w, g, st, t):
        lr, alpha = (0.01, 0.9) if t == 1 else (0.003, 0.8)
        st["v"] = alpha * st.get("v", 0) + (1 - alpha) * g * g
        return w - lr * g / (np.sqrt(st["v"]) + eps)
    _check(_train_then_update(rmsprop(0.01, 0.9), rmsprop(0.003, 0.8))[0], _numpy(rmsprop_step), rtol=1e-3)


@pytest.mark.parametrize("batch, k, n", [(3, 37, 29), (1, 64, 1), (5, 17, 130)])
def test_sgd_on_a_gemm_trans_b_weight_in_its_consumers_layout(batch, k, n):
    """torch.nn.Linear exported to ONNX: Gemm(x, W, b, transB=1), W [n, k], trained three steps
    with momentum SGD against NumPy. PopART's Gemm reads W through an aliasing transpose: the
    weight is stored as the forward matmul's blocks of W^T (popxl/lowering/creators.py), viewed
    block by block, and updated in place there."""
    rng = np.random.default_rng(11)
    x0 = rng.normal(size=(batch, k)).astype(np.float32)
    w0 = rng.normal(0, 0.3, size=(n, k)).astype(np.float32)
    b0 = rng.normal(size=(n,)).astype(np.float32)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [batch, k]), "x")
    w = b.addInitializedInputTensor(w0, "w")
    bias = b.addInitializedInputTensor(b0, "bias")
    y = b.aiOnnx.gemm([x, w, bias], transB=1)
    loss = b.aiGraphcore.identityloss([b.aiGraphcore.scale([b.aiOnnx.reducesum([b.aiOnnx.mul([y, y])], keepdims=0)],
                                                            0.5)])
    lr, mm, steps = 0.01, 0.9, 3
    opt = popart.SGD({"defaultLearningRate": (lr, True), "defaultMomentum": (mm, True)})
    got, s = _train_model(b.getModelProto(), loss, {x: x0}, {"w": w0, "bias": b0}, opt, steps, device(tiles=16))
    p = {"w": w0.astype(np.float64), "bias": b0.astype(np.float64)}
    v = {key: np.zeros_like(val) for key, val in p.items()}
    for _ in range(steps):
        yy = x0 @ p["w"].T + p["bias"]
        g = {"w": yy.T @ x0, "bias": yy.sum(0)}
        for key in p:
            v[key] = mm * v[key] + g[key]
            p[key] = p[key] - lr * v[key]
    _check(got, p, rtol=2e-4, atol=2e-5)
    lowered = s._session._lowered
    view = next(t for pt, t in lowered.variables.items() if pt.name == "w")
    if (batch, k, n) == (3, 37, 29):  # stored as the plan's blocks of W^T, viewed block by block
        assert view.blocks is not None
        assert not any(name.startswith("transpose") for name in lowered.op_names), lowered.op_names
