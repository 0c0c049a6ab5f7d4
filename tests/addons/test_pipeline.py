"""popxl-addons unchanged: a two-stage pipeline over 2 IPUs (addons.pipelined_execution: the
transform clones the ops into stage graphs, IPU copies and a repeat of the main cycle through
PopART's _ir views), checked against NumPy."""
import numpy as np
import pytest

import popxl
from popxl import ops

B, D = 2, 4


def _layer(addons):
    class Layer(addons.Module):
        def build(self, x):
            w = self.add_variable_input("w", lambda: np.eye(D, dtype=np.float32) * 0.5 + 0.1, popxl.float32)
            b = self.add_variable_input("b", lambda: np.arange(D, dtype=np.float32), popxl.float32)
            return ops.gelu(x @ w + b)

    return Layer()


def _np_layer(x, w, b):
    import math
    z = x @ w + b
    return 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))


def test_two_stage_pipeline_over_two_ipus(addons):
    steps = 6
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((B, D), popxl.float32, "x")
        y_s = popxl.d2h_stream((B, D), popxl.float32, "y")
        with popxl.ipu(0):
            f0, g0 = _layer(addons).create_graph(popxl.TensorSpec((B, D), popxl.float32))
            v0 = f0.init("l0")
        with popxl.ipu(1):
            f1, g1 = _layer(addons).create_graph(popxl.TensorSpec((B, D), popxl.float32))
            v1 = f1.init("l1")
        with addons.pipelined_execution(steps) as p:
            with p.stage(0), popxl.ipu(0):
                x = ops.host_load(x_s, "x")
                a, = g0.bind(v0).call(x)
                a = a.copy_to_ipu(1)
            with p.stage(1), popxl.ipu(1):
                y, = g1.bind(v1).call(a)
                ops.host_store(y_s, y)
    ir.num_host_transfers = steps
    graphs = {g.id for g in ir.graphs}
    assert {"stage_0_0", "stage_1_0", "ipu_copies_0", "pipeline_graph_0"} <= graphs, graphs
    main_types = [op.type for op in ir.main_graph.ops]
    assert main_types == ["call"], main_types  # everything moved into the pipeline graph
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(steps, B, D)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        assert sess.ipus_per_replica == 2
        ys = sess.run({x_s: xs})[y_s]
        w0, b0 = sess.get_tensor_data(v0.w), sess.get_tensor_data(v0.b)
        w1, b1 = sess.get_tensor_data(v1.w), sess.get_tensor_data(v1.b)
    want = np.stack([_np_layer(_np_layer(x, w0, b0), w1, b1) for x in xs])
    np.testing.assert_allclose(ys, want, rtol=1e-5, atol=1e-6)


@pytest.mark.every_branch
def test_pipelined_training_over_two_ipus(addons):
    """Forward on IPU 0 and IPU 1, the loss gradient and layer 1's gradient on IPU 1, layer 0's
    gradient on IPU 0 (three stages); layer 0's activations stashed and restored across stages
    (stash_and_restore_activations); weight gradients accumulated (autodiff_with_accumulation)
    over the pipelined micro-batches, then applied once."""
    steps, lr = 6, 0.5
    spec = popxl.TensorSpec((B, D), popxl.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((B, D), popxl.float32, "x")
        t_s = popxl.h2d_stream((B, D), popxl.float32, "target")
        with popxl.ipu(0):
            f0, g0 = _layer(addons).create_graph(spec)
            a0_facts, b0 = addons.autodiff_with_accumulation(g0, g0.args.tensors, grads_required=[])
            v0, acc0 = f0.init("l0"), a0_facts.init("l0")
        with popxl.ipu(1):
            f1, g1 = _layer(addons).create_graph(spec)
            a1_facts, b1 = addons.autodiff_with_accumulation(g1, g1.args.tensors, grads_required=[g1.graph.inputs[0]])
            v1, acc1 = f1.init("l1"), a1_facts.init("l1")
        with addons.pipelined_execution(steps) as p:
            with p.stage(0), popxl.ipu(0):
                info0 = g0.bind(v0).call_with_info(ops.host_load(x_s, "x"))
                a = info0.outputs[0].copy_to_ipu(1)
            with p.stage(1), popxl.ipu(1):
                info1 = g1.bind(v1).call_with_info(a)
                dy = info1.outputs[0] - ops.host_load(t_s, "target")  # loss 0.5 |y - t|^2
                da, = b1.bind(acc1).call(dy, args=b1.grad_graph_info.inputs_dict(info1))
                da = da.copy_to_ipu(0)
            with p.stage(2), popxl.ipu(0):
                acts = p.stash_and_restore_activations(info0, b0.grad_graph_info)
                b0.bind(acc0).call(da, args=acts)
        for v, acc, ipu in ((v0, acc0, 0), (v1, acc1, 1)):
            with popxl.ipu(ipu):
                for name, t in v.named_tensors.items():
                    ops.scaled_add_(t, acc.to_dict()["accum." + name], b=-lr)
    ir.num_host_transfers = steps
    assert any(g.id.startswith("stage_2") for g in ir.graphs)
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(steps, B, D)).astype(np.float32)
    ts = rng.normal(size=(steps, B, D)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        w = [[sess.get_tensor_data(t).astype(np.float64) for t in (v.w, v.b)] for v in (v0, v1)]
        sess.run({x_s: xs, t_s: ts})
        got = [[sess.get_tensor_data(t) for t in (v.w, v.b)] for v in (v0, v1)]
    import math
    k = math.sqrt(2 / math.pi)

    def gelu(z):
        return 0.5 * z * (1 + np.tanh(k * (z + 0.044715 * z ** 3)))

    def dgelu(z):
        th = np.tanh(k * (z + 0.044715 * z ** 3))
        return 0.5 * (1 + th) + 0.5 * z * (1 - th ** 2) * k * (1 + 3 * 0.044715 * z ** 2)

    grads = [[np.zeros_like(a) for a in layer] for layer in w]
    for x, t in zip(xs.astype(np.float64), ts):
        z0 = x @ w[0][0] + w[0][1]
        h0 = gelu(z0)
        z1 = h0 @ w[1][0] + w[1][1]
        dz1 = (gelu(z1) - t) * dgelu(z1)
        dz0 = (dz1 @ w[1][0].T) * dgelu(z0)
        for (gw, gb), (inp, dz) in zip(grads, ((x, dz0), (h0, dz1))):
            gw += inp.T @ dz / steps
            gb += dz.sum(0) / steps
    for layer, layer_grads, layer_got in zip(w, grads, got):
        for a, g, new in zip(layer, layer_grads, layer_got):
            np.testing.assert_allclose(new, a - lr * g, rtol=1e-4, atol=1e-5)
