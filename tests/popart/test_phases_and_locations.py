"""PopART's phased execution (VirtualGraphMode.ExecutionPhases), tensor locations, the Nll loss of a
softmax in training (the NlllWithSoftmaxGradDirect pattern) and the optimizer constructors, as the
PopART feature examples use them."""
import numpy as np
import pytest

import popart
from popart_helpers import device

RNG = np.random.default_rng(25)


def _phased_model(layers, dsize=6, batch=3, vgraph_of=None):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [batch, dsize]))
    ws = [RNG.normal(size=(dsize, dsize)).astype(np.float32) for _ in range(layers)]
    out = x
    for i, w in enumerate(ws):
        with b.executionPhase(i):
            if vgraph_of is not None:
                with b.virtualGraph(vgraph_of(i)):
                    out = b.aiOnnx.matmul([out, b.addInitializedInputTensor(w)])
            else:
                out = b.aiOnnx.matmul([out, b.addInitializedInputTensor(w)])
    y = b.aiOnnx.relu([out])  # no phase: runs in its producer's phase
    return b, x, y, ws


def _phase_options(phases, stages=2):
    o = popart.SessionOptions()
    o.virtualGraphMode = popart.VirtualGraphMode.ExecutionPhases
    o.executionPhaseSettings.phases = phases
    o.executionPhaseSettings.stages = stages
    loc = popart.TensorLocation()
    loc.storage = popart.TensorStorage.OffChip
    loc.loadTileSet = popart.TileSet.IO
    loc.storageTileSet = popart.TileSet.IO
    o.weightTensorLocationSettings.location = loc
    return o


@pytest.mark.parametrize("stages", [1, 2])
def test_execution_phases_place_each_phase_on_phase_mod_stages(stages):
    b, x, y, ws = _phased_model(3)
    xv = RNG.normal(size=(2, 3, 6)).astype(np.float32)
    s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(2, {y: popart.AnchorReturnType("All")}),
                                device(num_ipus=stages), userOptions=_phase_options(3, stages))
    placed = {n.output[0]: {a.name: a.i for a in n.attribute}.get("__ipu_number") for n in s._model.graph.node}
    phases = [0, 1, 2, 2]  # three matmuls, then the relu in its producer's phase
    want = [p % stages if stages > 1 else None for p in phases]
    assert list(placed.values()) == want
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: xv}, out))
    ref = xv
    for w in ws:
        ref = ref @ w
    np.testing.assert_allclose(out[y], np.maximum(ref, 0), rtol=1e-4, atol=1e-4)


def test_execution_phase_and_virtual_graph_must_agree():
    b, x, y, _ = _phased_model(2, vgraph_of=lambda i: 0)  # phase 1 on IPU 0: not phase % 2
    with pytest.raises(popart.popart_exception, match="inconsistent execution phase 1 and virtual graph ID 0"):
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, {y: popart.AnchorReturnType("All")}),
                                device(num_ipus=2), userOptions=_phase_options(2))


def test_several_phases_need_the_execution_phases_mode():
    b, x, y, _ = _phased_model(2)
    o = popart.SessionOptions()
    o.executionPhaseSettings.phases = 2
    with pytest.raises(popart.popart_exception, match="> 1 execution phases requires VirtualGraphMode::ExecutionPhases"):
        popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, {y: popart.AnchorReturnType("All")}),
                                device(num_ipus=2), userOptions=o)


def test_one_phase_disables_phased_execution_with_a_warning():
    b, x, y, _ = _phased_model(1)
    with pytest.warns(UserWarning, match="only 1 phases were defined"):
        s = popart.InferenceSession(b.getModelProto(), popart.DataFlow(1, {y: popart.AnchorReturnType("All")}),
                                    device(), userOptions=_phase_options(1))
    assert all(a.name != "__ipu_number" for n in s._model.graph.node for a in n.attribute)


def test_tensor_location_constructors_as_popart_binds_them():
    default = popart.TensorLocation()
    assert (default.storage, default.loadTileSet, default.storageTileSet, default.replicatedTensorSharding) == \
        (popart.TensorStorage.OnChip, popart.TileSet.Compute, popart.TileSet.Compute,
         popart.ReplicatedTensorSharding.Off)
    assert popart.TensorLocation(popart.TensorStorage.OffChip).isRemote()
    rts = popart.TensorLocation(popart.TensorStorage.OffChip, popart.ReplicatedTensorSharding.On)
    assert rts.replicatedTensorSharding == popart.ReplicatedTensorSharding.On and rts.loadTileSet == popart.TileSet.Compute
    full = popart.TensorLocation(popart.TensorStorage.OffChip, popart.TileSet.IO, popart.TileSet.IO,
                                 popart.ReplicatedTensorSharding.Off)
    assert full.loadTileSet == full.storageTileSet == popart.TileSet.IO
    assert popart.TensorLocationSettings(popart.TensorStorage.OffChip, 0, 0).location == \
        popart.TensorLocation(popart.TensorStorage.OffChip)
    assert popart.TensorLocationSettings(full).location == full
    with pytest.raises(TypeError, match="replicatedTensorSharding must be a popart.ReplicatedTensorSharding"):
        popart.TensorLocation(popart.TensorStorage.OffChip, popart.TileSet.IO)
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        popart.TensorLocation(popart.TensorStorage.OffChip, popart.TileSet.IO, popart.TileSet.IO)
    with pytest.raises(TypeError, match="storage must be a popart.TensorStorage"):
        popart.TensorLocation("OffChip")


def test_optimizers_take_a_dict_of_values_not_a_bare_learning_rate():
    with pytest.raises(TypeError, match="incompatible constructor arguments.*ConstSGD"):
        popart.SGD(0.01)
    with pytest.raises(TypeError, match="incompatible constructor arguments"):
        popart.Adam(0.01)
    assert popart.SGD({"defaultLearningRate": (0.01, False)}).learningRates().getDefault().val() == \
        pytest.approx(0.01)


def test_softmax_nll_training_uses_the_fused_gradient_where_probabilities_underflow():
    """PopART's NlllWithSoftmaxGradDirect: the gradient of the logits is probs - onehot, finite
    (and large) where the label's probability underflowed to 0, where the gradient through
    -1 / max(p, eps) and the softmax would vanish. The loss is -log(max(p, 1e-7))."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [2, 3]))
    lab = b.addInputTensor(popart.TensorInfo("INT32", [2]))
    w0 = np.array([[40.0, 0, 0], [0, 40.0, 0], [0, 0, -40.0]], np.float32) * 3
    w = b.addInitializedInputTensor(w0)
    logits = b.aiOnnx.matmul([x, w])
    probs = b.aiOnnx.softmax([logits], axis=1)
    loss = b.aiGraphcore.nllloss([probs, lab], popart.ReductionType.Sum)
    xv = np.array([[1.0, 0, 0], [0, 1.0, 0]], np.float32)
    lv = np.array([2, 0], np.int32)  # the labels' probabilities underflow to 0 in float32
    lr = 0.01
    s = popart.TrainingSession(b.getModelProto(), popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               popart.ConstSGD(lr), device())
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: xv, lab: lv}, out))
    z = xv @ w0
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    assert p[np.arange(2), lv].max() == 0.0
    np.testing.assert_allclose(out[loss], -np.log(np.maximum(p[np.arange(2), lv], 1e-7)).sum(), rtol=1e-5)
    s.weightsToHost()
    got = {w: np.empty_like(w0)}
    s.readWeights(popart.PyWeightsIO(got))
    g = p.copy()
    g[np.arange(2), lv] -= 1
    np.testing.assert_allclose(got[w], w0 - lr * xv.T @ g, rtol=1e-5, atol=1e-6)
