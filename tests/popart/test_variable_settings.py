"""VariableSettings / CommGroup as PopART's (the groups of every kind, the host shapes, the names of
the user guide's replication example), and weights made with them in sessions: one value per
group, gradients reduced within the group, read back one per group or one per replica."""
import numpy as np
import onnx
import pytest

import popart
from popart import CommGroup, CommGroupType, VariableRetrievalMode, VariableSettings
from popart_helpers import device


@pytest.mark.parametrize("settings, n, groups", [
    (VariableSettings(), 4, [[0, 1, 2, 3]]),
    (VariableSettings(VariableRetrievalMode.AllReplicas), 3, [[0, 1, 2]]),
    (VariableSettings(CommGroup(CommGroupType.Consecutive, 2)), 6, [[0, 1], [2, 3], [4, 5]]),
    (VariableSettings(CommGroup(CommGroupType.Orthogonal, 2)), 6, [[0, 3], [1, 4], [2, 5]]),
    (VariableSettings(CommGroup(CommGroupType.Ungrouped, 0)), 3, [[0], [1], [2]]),
    (VariableSettings(CommGroup(CommGroupType.Consecutive, 1)), 2, [[0], [1]]),
    (VariableSettings(2, 2), 8, [[0, 2], [1, 3], [4, 6], [5, 7]]),
    (VariableSettings(4, 1, VariableRetrievalMode.AllReplicas), 2, [[0], [1]]),
])
def test_groups_and_counts(settings, n, groups):
    assert settings.groups(n) == groups
    assert settings.getGroupCount(n) == settings.groupCount(n) == len(groups)
    assert settings.getRealGroupSize(n) == len(groups[0])
    assert [settings.getGroupRepresentative(g) for g in range(len(groups))] == [g[0] for g in groups]
    all_replicas = settings.getRetrievalMode() == VariableRetrievalMode.AllReplicas
    assert settings.numReplicasReturningVariable(n) == (n if all_replicas else len(groups))
    if len(groups) > 1:
        assert settings.shapeOnHost([3, 5], n) == [len(groups), 3, 5]
        assert settings.shapeOnReplica([len(groups), 3, 5], n, "w") == [3, 5]
    else:
        assert settings.shapeOnHost([3, 5], n) == [3, 5] == settings.shapeOnReplica([3, 5], n, "w")


def test_settings_accessors_and_errors():
    cg = CommGroup(CommGroupType.Orthogonal, 4)
    s = VariableSettings(cg, VariableRetrievalMode.AllReplicas)
    assert s.getSharedVariableDomain() == cg and s.isUsingCommGroup() and s.getStride(8) == 2
    assert s == VariableSettings(CommGroup(CommGroupType.Orthogonal, 4), VariableRetrievalMode.AllReplicas)
    assert s != VariableSettings(cg)
    with pytest.raises(popart.popart_exception, match="replicaGroupSize of at least 1"):
        VariableSettings(CommGroup(CommGroupType.Consecutive, 0))
    with pytest.raises(popart.popart_exception, match="AllReduceReplicas is not supported"):
        VariableSettings(VariableRetrievalMode.AllReduceReplicas)
    with pytest.raises(popart.popart_exception, match="do not divide 6 replicas"):
        VariableSettings(CommGroup(CommGroupType.Consecutive, 4)).getGroupCount(6)
    with pytest.raises(popart.popart_exception, match="outer dimension must be the number of groups"):
        VariableSettings(CommGroup(CommGroupType.Consecutive, 2)).shapeOnReplica([3, 5], 4, "w")
    with pytest.raises(popart.popart_exception, match="not made from a popart.CommGroup"):
        VariableSettings(1, 2).getSharedVariableDomain()


def _grouped_model(settings, w_init):
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [3]), "x")
    w = b.addInitializedInputTensor(w_init, settings, "w")
    y = b.aiOnnx.mul([x, w])
    loss = b.aiGraphcore.l1loss([y], 1.0, reduction=popart.ReductionType.Sum)
    return b.getModelProto(), x, w, y, loss


def _options(replicas):
    o = popart.SessionOptions()
    o.enableReplicatedGraphs = True
    o.replicatedGraphCount = replicas
    return o


@pytest.mark.parametrize("mode", [VariableRetrievalMode.OnePerGroup, VariableRetrievalMode.AllReplicas])
def test_grouped_weight_trains_per_group(mode):
    """4 replicas in 2 consecutive groups: each replica multiplies by its group's weight, and SGD
    updates each group's weight with the gradient summed over that group's replicas only."""
    settings = VariableSettings(CommGroup(CommGroupType.Consecutive, 2), mode)
    w0 = np.array([[1, 2, 3], [-1, -2, -3]], np.float32)  # one row per group
    proto, x, w, y, loss = _grouped_model(settings, w0)
    lr = 0.1
    s = popart.TrainingSession(proto, popart.DataFlow(1, [y]), loss, popart.SGD({"defaultLearningRate": (lr, True)}),
                               device(num_ipus=4), userOptions=_options(4))
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    data = np.arange(12, dtype=np.float32).reshape(4, 3) - 5
    s.run(popart.PyStepIO({x: data}, out))
    group = np.array([0, 0, 1, 1])
    np.testing.assert_allclose(out[y], data * w0[group])
    # d(sum |x w|)/dw = sign(x w) x, summed over the replicas of the group
    g = np.sign(data * w0[group]) * data
    want = w0 - lr * np.stack([g[:2].sum(0), g[2:].sum(0)])
    s.weightsToHost()
    n = settings.numReplicasReturningVariable(4)
    got = {w: np.zeros([n, 3], np.float32)}
    s.readWeights(popart.PyWeightsIO(got))
    np.testing.assert_allclose(got[w], want if n == 2 else want[group], rtol=1e-6)


def test_builder_keeps_settings_in_the_model():
    settings = VariableSettings(CommGroup(CommGroupType.Orthogonal, 2), VariableRetrievalMode.AllReplicas)
    proto, *_ = _grouped_model(settings, np.ones((2, 3), np.float32))
    props = {p.key: p.value for p in onnx.load_from_string(proto).metadata_props}
    assert len(props) == 1
    assert VariableSettings._decode(next(iter(props.values()))) == settings


def test_initializers_read_when_ops_are_built():
    """An opset-18 model as today's exporters write it: Dropout's ratio and Clip's bounds are
    floating-point initializers. Their values are read at compile time (as PopART does), and an
    initializer only read that way is not a weight of the session."""
    h = onnx.helper
    nodes = [h.make_node("Clip", ["x", "lo", "hi"], ["c"]),
             h.make_node("Dropout", ["c", "ratio", "train"], ["d"]),
             h.make_node("Mul", ["d", "w"], ["y"])]
    inits = [onnx.numpy_helper.from_array(np.array(v, dtype=t), n) for n, v, t in
             (("lo", -1.0, np.float32), ("hi", 2.0, np.float32), ("ratio", 0.25, np.float32),
              ("train", False, np.bool_), ("w", [1.0, 2.0, 3.0, 4.0], np.float32))]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4])],
                     [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])], inits)
    model = h.make_model(g, opset_imports=[h.make_opsetid("", 18)])
    s = popart.InferenceSession(model.SerializeToString(), popart.DataFlow(1, ["y"]), device())
    s.prepareDevice()
    out = s.initAnchorArrays()
    x = np.array([-3, 0.5, 1.5, 5], np.float32)
    s.run(popart.PyStepIO({"x": x}, out))
    np.testing.assert_allclose(out["y"], np.clip(x, -1, 2) * [1, 2, 3, 4])
    got = {"w": np.zeros(4, np.float32)}
    s.readWeights(popart.PyWeightsIO(got))
    with pytest.raises(popart.popart_exception, match="'ratio' is not a weight"):
        s.readWeights(popart.PyWeightsIO({"ratio": np.zeros((), np.float32)}))
    # a model input where a constant is needed is still an error naming the input
    g2 = h.make_graph([h.make_node("Clip", ["x", "lo_in"], ["y"])], "g",
                      [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [4]),
                       h.make_tensor_value_info("lo_in", onnx.TensorProto.FLOAT, [])],
                      [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [4])])
    m2 = h.make_model(g2, opset_imports=[h.make_opsetid("", 18)])
    with pytest.raises(popart.popart_exception, match="input 1 \\(min\\) must be a constant"):
        popart.InferenceSession(m2.SerializeToString(), popart.DataFlow(1, ["y"]), device())


def test_cpu_device_is_not_bounded_by_tile_memory():
    """Poplar's CPU device runs models that fit no IPU (the user guide runs AlexNet on it); an IPU
    model device of the same 16 tiles says it does not fit."""
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [1, 1024]), "x")
    w = b.addInitializedInputTensor(np.full((1024, 3072), 1e-3, np.float32), "w")  # 12 MiB > 16 x 624 KiB
    y = b.aiOnnx.matmul([x, w])
    proto = b.getModelProto()
    s = popart.InferenceSession(proto, popart.DataFlow(1, [y]), popart.DeviceManager().createCpuDevice())
    s.prepareDevice()
    out = s.initAnchorArrays()
    s.run(popart.PyStepIO({x: np.ones((1, 1024), np.float32)}, out))
    np.testing.assert_allclose(out[y], np.full((1, 3072), 1.024, np.float32), rtol=1e-5)
    s2 = popart.InferenceSession(proto, popart.DataFlow(1, [y]), device(tiles=16))
    with pytest.raises(popart.OutOfMemoryException, match="does not fit|Out of tile memory"):
        s2.prepareDevice()
