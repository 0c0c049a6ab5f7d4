"""popxl-addons unchanged: phased execution, one layer at a time: each layer's weights are a row
of remote buffers (named_variable_buffers / init_remote / load_remote_graph), the batch is
serialised (transforms.batch_serialise: a repeat over micro-batches that loads its input from and
stores its output to rows of a remote activation buffer); checked against NumPy."""
import numpy as np
import pytest

import popxl
from popxl import ops

STEPS, LAYERS, B, D = 3, 2, 2, 4


def _layer(addons):
    class Layer(addons.Module):
        def build(self, x):
            w = self.add_variable_input("w", lambda: np.random.default_rng(7).normal(size=(D, D)).astype(np.float32))
            b = self.add_variable_input("b", lambda: np.full((D,), 0.1, np.float32))
            return ops.relu(x @ w + b)

    return Layer()


@pytest.mark.parametrize("io_mode", ["compute", "io", "io_overlapped"])
def test_phased_forward_with_batch_serialisation_and_remote_weights(addons, io_mode):
    from popxl_addons.named_tensors import NamedTensors
    from popxl_addons.transforms.batch_serialisation import RemoteHandle

    ir = popxl.Ir()
    if io_mode != "compute":
        ir._pb_ir.getSessionOptions().numIOTiles = 2
    with ir.main_graph, popxl.in_sequence(True):
        x_s = popxl.h2d_stream((B, D), popxl.float32, "x")
        y_s = popxl.d2h_stream((B, D), popxl.float32, "y")
        facts, layer = _layer(addons).create_graph(popxl.TensorSpec((B, D), popxl.float32))
        x_in, y_out = layer.graph.inputs[0], layer.graph.outputs[0]
        acts = addons.batch_serial_buffer(x_in, steps=STEPS, rows=LAYERS + 1)
        bs = addons.transforms.batch_serialise(layer, STEPS, load_handles={x_in: RemoteHandle(acts, 0)},
                                               store_streams={}, store_buffers={y_out: RemoteHandle(acts, 1)},
                                               rows=LAYERS, io_mode=io_mode)
        buffers = addons.named_variable_buffers(facts, entries=LAYERS, shard_over_dict=False)
        weights = [facts.init_remote(buffers, i, prefix=f"layer{i}") for i in range(LAYERS)]
        load, names = addons.load_remote_graph(buffers, entries=LAYERS)
        for s in range(STEPS):  # the input batch into row 0 of the activations
            ops.remote_store(acts, s, ops.host_load(x_s))
        for i in range(LAYERS):  # phase i: load layer i's weights, run it on every micro-batch
            w = NamedTensors.pack(names, load.call(i))
            bs.graph.bind(w).call(i)
        for s in range(STEPS):
            ops.host_store(y_s, ops.remote_load(acts, LAYERS * STEPS + s))
    ir.num_host_transfers = STEPS
    assert acts.entries == STEPS * (LAYERS + 1)
    repeats = [op for g in ir.graphs for op in g.ops if op.type == "repeat"]
    # overlapped IO: loads of micro-batch i + 1 and stores of i - 1 beside the compute of i, so the
    # loop runs STEPS - 2 times between a prologue and an epilogue
    assert [op.attrs["repeat_count"] for op in repeats] == [STEPS - 2 if io_mode == "io_overlapped" else STEPS]
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(STEPS, B, D)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        ys = sess.run({x_s: xs})[y_s]
        ws = [(sess.get_tensor_data(v.w), sess.get_tensor_data(v.b)) for v in weights]
    want = xs.astype(np.float64)
    for w, b in ws:
        want = np.maximum(want @ w + b, 0)
    np.testing.assert_allclose(ys, want, rtol=1e-5, atol=1e-6)


@pytest.mark.every_branch
def test_phased_training_with_batch_serialised_forward_and_gradient(addons):
    """Training phase by phase: forward layer by layer, then gradients layer by layer in reverse
    (transforms.batch_serialise_fwd_and_grad: activations the gradient needs are stored to remote
    buffers by the forward loop and loaded by the gradient loop), weight gradients accumulated
    over the micro-batches (autodiff_with_accumulation), then each layer's weights updated and
    stored back to its row of the remote buffers."""
    from popxl_addons.named_tensors import NamedTensors
    from popxl_addons.transforms.batch_serialisation import RemoteHandle

    lr = 0.1
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        x_s = popxl.h2d_stream((B, D), popxl.float32, "x")
        t_s = popxl.h2d_stream((B, D), popxl.float32, "target")
        facts, fwd = _layer(addons).create_graph(popxl.TensorSpec((B, D), popxl.float32))
        x_in, y_out = fwd.graph.inputs[0], fwd.graph.outputs[0]
        accum_facts, bwd = addons.autodiff_with_accumulation(fwd, fwd.args.tensors, grads_required=[x_in])
        dy_in, dx_out = bwd.graph.inputs[0], bwd.graph.outputs[0]
        acts = addons.batch_serial_buffer(x_in, steps=STEPS, rows=LAYERS + 1)
        grads = addons.batch_serial_buffer(x_in, steps=STEPS, rows=LAYERS + 1)
        fwd_bs, bwd_bs = addons.transforms.batch_serialise_fwd_and_grad(
            fwd, bwd, fwd.args, STEPS,
            load_handles={x_in: RemoteHandle(acts, 0), dy_in: RemoteHandle(grads, 1)},
            store_streams={}, store_buffers={y_out: RemoteHandle(acts, 1), dx_out: RemoteHandle(grads, 0)},
            rows=LAYERS, io_mode="compute")
        buffers = addons.named_variable_buffers(facts, entries=LAYERS, shard_over_dict=False)
        weights = [facts.init_remote(buffers, i, prefix=f"layer{i}") for i in range(LAYERS)]
        load, names = addons.load_remote_graph(buffers, entries=LAYERS)
        store = addons.store_remote_graph(buffers, entries=LAYERS)
        accums = [accum_facts.init(prefix=f"layer{i}") for i in range(LAYERS)]

        for s in range(STEPS):
            ops.remote_store(acts, s, ops.host_load(x_s))
        for i in range(LAYERS):  # forward phases
            fwd_bs.graph.bind(NamedTensors.pack(names, load.call(i))).call(i)
        for s in range(STEPS):  # loss 0.5 |y - t|^2 per micro-batch: dy = y - t into the top row
            y = ops.remote_load(acts, LAYERS * STEPS + s)
            ops.remote_store(grads, LAYERS * STEPS + s, y - ops.host_load(t_s))
        for i in reversed(range(LAYERS)):  # gradient phases, then the update of the layer's weights
            w = NamedTensors.pack(names, load.call(i))
            bwd_bs.graph.bind(NamedTensors.from_dict({**w.to_dict(), **accums[i].to_dict()})).call(i)
            for name, t in w.named_tensors.items():
                ops.scaled_add_(t, accums[i].to_dict()["accum." + name], b=-lr)
            store.bind(w).call(i)
    ir.num_host_transfers = STEPS
    rng = np.random.default_rng(5)
    xs = rng.normal(size=(STEPS, B, D)).astype(np.float32)
    ts = rng.normal(size=(STEPS, B, D)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        w0 = [(sess.get_tensor_data(v.w).astype(np.float64), sess.get_tensor_data(v.b).astype(np.float64))
              for v in weights]
        sess.run({x_s: xs, t_s: ts})
        w1 = [(sess.get_tensor_data(v.w), sess.get_tensor_data(v.b)) for v in weights]
    gw = [[np.zeros_like(w), np.zeros_like(b)] for w, b in w0]
    for x, t in zip(xs.astype(np.float64), ts):
        hs, zs = [x], []
        for w, b in w0:
            zs.append(hs[-1] @ w + b)
            hs.append(np.maximum(zs[-1], 0))
        d = hs[-1] - t
        for i in reversed(range(LAYERS)):
            dz = d * (zs[i] > 0)
            gw[i][0] += hs[i].T @ dz / STEPS
            gw[i][1] += dz.sum(0) / STEPS
            d = dz @ w0[i][0].T
    for (w, b), (dw, db), (w_new, b_new) in zip(w0, gw, w1):
        np.testing.assert_allclose(w_new, w - lr * dw, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(b_new, b - lr * db, rtol=1e-5, atol=1e-6)
