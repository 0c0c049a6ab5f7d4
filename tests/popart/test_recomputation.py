"""Recomputation in a PopART training session (SessionOptions.autoRecomputation,
Builder.recomputeOutputInBackwardPass / checkpointOutput): popart/_recompute.py picks the forward ops
by PopART's rules, the gradient graph runs them again just before their first backward reader (their
own programs, ipu.Rerun). Results are bit-identical to keeping the activations; fewer bytes are
live, more cycles run, no vertex state is added."""
from __future__ import annotations

import numpy as np
import onnx
import pytest

import popart
import popxl
from popart import _recompute
from popart._translate.context import Translation
from tests.popart.popart_helpers import device

BATCH, CLASSES = 4, 5


def _model(checkpoint=False, user_recompute=False):
    """conv-BN-ReLU x 2 (16 x 16 images), global average pool, a matmul, softmax + NLL."""
    rng = np.random.default_rng(1)
    b = popart.Builder()
    x = b.addInputTensor(popart.TensorInfo("FLOAT", [BATCH, 3, 16, 16]), "x")
    h, cin = x, 3
    for i, cout in enumerate((8, 8)):
        w = b.addInitializedInputTensor((rng.standard_normal((cout, cin, 3, 3)) * 0.3).astype(np.float32), f"w{i}")
        h = b.aiOnnx.conv([h, w], pads=[1, 1, 1, 1])
        stats = [b.addInitializedInputTensor(v.astype(np.float32), f"bn{i}_{k}")
                 for k, v in enumerate((1 + 0.1 * rng.standard_normal(cout), 0.1 * rng.standard_normal(cout),
                                        np.zeros(cout), np.ones(cout)))]
        h = b.aiOnnx.batchnormalization([h] + stats, 5)[0]
        if user_recompute and i == 0:
            b.recomputeOutputInBackwardPass(h)
        h = b.aiOnnx.relu([h])
        if checkpoint and i == 0:
            (h,) = b.checkpointOutput([h])
        cin = cout
    h = b.aiOnnx.reshape([b.aiOnnx.globalaveragepool([h]),
                          b.aiOnnx.constant(np.array([BATCH, cin], np.int64))])
    w = b.addInitializedInputTensor((rng.standard_normal((cin, CLASSES)) * 0.3).astype(np.float32), "wfc")
    logits = b.aiOnnx.matmul([h, w])
    label = b.addInputTensor(popart.TensorInfo("INT32", [BATCH]), "label")
    loss = b.aiGraphcore.nllloss([b.aiOnnx.softmax([logits], axis=1), label], popart.ReductionType.Mean)
    return b.getModelProto(), loss, label


def _train(mode=popart.RecomputationType.NoRecompute, steps=2, **model_kw):
    proto, loss, label = _model(**model_kw)
    opts = popart.SessionOptions()
    opts.autoRecomputation = mode
    opts.instrumentWithHardwareCycleCounter = True
    s = popart.TrainingSession(proto, popart.DataFlow(1, {loss: popart.AnchorReturnType("All")}), loss,
                               popart.ConstSGD(0.1), device(tiles=8), userOptions=opts)
    s.prepareDevice()
    s.weightsFromHost()
    out = s.initAnchorArrays()
    rng = np.random.default_rng(0)
    losses = []
    for _ in range(steps):
        x = rng.standard_normal((BATCH, 3, 16, 16)).astype(np.float32)
        y = rng.integers(0, CLASSES, BATCH).astype(np.int32)
        s.run(popart.PyStepIO({"x": x, label: y}, out))
        losses.append(float(out[loss]))
    s.weightsToHost()
    names = [t.name for t in onnx.load_from_string(proto).graph.initializer]
    weights = {n: np.zeros(onnx.numpy_helper.to_array(t).shape, np.float32)
               for n, t in zip(names, onnx.load_from_string(proto).graph.initializer)}
    s.readWeights(popart.PyWeightsIO(weights))
    exe = s._session.executable
    return {"losses": losses, "weights": weights, "cycles": s.getCycleCount(), "live_peak": int(exe.liveness.max()),
            "vertex_state": int(exe.plan.categories["vertex_state"].sum())}


@pytest.fixture(scope="module")
def kept():
    return _train()


def _same(a, b):
    assert a["losses"] == b["losses"]
    for k in a["weights"]:
        np.testing.assert_array_equal(a["weights"][k], b["weights"][k], err_msg=k)


@pytest.mark.parametrize("mode", [popart.RecomputationType.Standard, popart.RecomputationType.NormOnly])
def test_recomputation_gives_the_same_numbers_with_fewer_bytes_live(kept, mode):
    got = _train(mode)
    _same(got, kept)
    assert got["live_peak"] < kept["live_peak"]  # activations die after their last forward reader
    assert got["cycles"] > kept["cycles"]  # the recomputed ops run twice
    assert got["vertex_state"] == kept["vertex_state"]  # their programs run again (ipu.Rerun): no new vertices


def test_user_recompute_annotation_alone(kept):
    """recomputeOutputInBackwardPass acts with autoRecomputation off: the first batch norm's
    output is recomputed (from its kept input) before the ReLU's gradient reads it."""
    got = _train(user_recompute=True)
    _same(got, kept)
    assert got["cycles"] > kept["cycles"]


def test_recompute_all_keeps_what_follows_the_last_checkpoint():
    """RecomputeAll with no checkpoint recomputes nothing (everything lies after the last
    checkpoint: PopART's allCheckpointAfterLastCheckpoint); with checkpointOutput after the first
    block, that block is recomputed."""
    base = _train(checkpoint=True)
    nothing = _train(popart.RecomputationType.RecomputeAll)
    assert nothing["cycles"] == _train()["cycles"]
    some = _train(popart.RecomputationType.RecomputeAll, checkpoint=True)
    _same(some, base)
    assert some["cycles"] > base["cycles"]
    assert some["live_peak"] < base["live_peak"]


def _node_ops(**model_kw):
    proto, loss, _ = _model(**model_kw)
    m = onnx.load_from_string(proto)
    ir = popxl.Ir()
    tr = Translation(m.opset_import[0].version, training=True)
    g = ir.create_empty_graph("fwd")
    node_ops = []
    with g:
        inits = {t.name for t in m.graph.initializer}
        for i in m.graph.input:
            if i.name in inits:
                continue
            shape = [d.dim_value for d in i.type.tensor_type.shape.dim]
            dt = popxl.float32 if i.type.tensor_type.elem_type == onnx.TensorProto.FLOAT else popxl.int32
            tr.values[i.name] = popxl.graph_input(shape, dt, name=i.name)
        for init in m.graph.initializer:
            a = onnx.numpy_helper.to_array(init)
            tr.values[init.name] = popxl.graph_input(a.shape, popxl.float32 if a.dtype == np.float32 else popxl.int64,
                                                     name=init.name)
        for node in m.graph.node:
            n0 = len(g._ops)
            tr.run_node(node)
            node_ops.append((node, g._ops[n0:]))
    return node_ops, tr.values[loss]


def _types(ops):
    return sorted(op.type for op in ops)


def test_which_ops_each_mode_picks():
    node_ops, loss = _node_ops(checkpoint=True)
    # the batch norms themselves, not the running statistics they update (no path to the loss)
    norms = {op for node, ops in node_ops if node.op_type == "BatchNormalization" for op in ops
             if op.type == "batch_norm_training"}
    nodes = _recompute.from_onnx(node_ops)
    assert len(norms) == 2 and _recompute.recompute_ops(popart.RecomputationType.NormOnly, nodes, loss) == norms
    assert _recompute.recompute_ops(popart.RecomputationType.NoRecompute, nodes, loss) == set()
    first_block = {op for node, ops in node_ops[:node_ops.index(next(n for n in node_ops
                                                                    if n[0].op_type == "Identity"))]
                   for op in ops if op.type in ("conv", "batch_norm_training", "relu")}
    assert len(first_block) == 3
    assert _recompute.recompute_ops(popart.RecomputationType.RecomputeAll, nodes, loss) == first_block


def test_decreasing_intervals_and_live_sets():
    # PopART's getDecreasingIntervals: K = int(0.75 * (int(sqrt(2N)) - 1)), sizes K, K-1, ..., then 1s
    assert _recompute.decreasing_intervals(1) == [(0, 1)]
    assert _recompute.decreasing_intervals(5) == [(0, 1), (1, 2), (2, 3), (3, 4), (4, 5)]
    iv = _recompute.decreasing_intervals(25)  # K = int(0.75 * 6) = 4
    assert iv[:4] == [(0, 4), (4, 7), (7, 9), (9, 10)] and iv[4:] == [(i, i + 1) for i in range(10, 25)]
    iv = _recompute.decreasing_intervals(300)  # K = int(0.75 * 23) = 17: 17 + 16 + ... + 1 = 153 ops
    assert iv[0] == (0, 17) and iv[16] == (152, 153) and len(iv) == 17 + 300 - 153
    # live sets of a chain a -> b -> c with a also read by c
    ir = popxl.Ir()
    with ir.create_empty_graph("g") as g:
        x = popxl.graph_input([4], popxl.float32)
        a = popxl.ops.relu(x)
        b = popxl.ops.relu(a)
        c = popxl.ops.add(a, b)
    oa, ob, oc = (t._producer for t in (a, b, c))
    assert g and _recompute.live_sets([oa, ob, oc]) == [{oa}, {oa, ob}, {oc}]
