"""popxl-addons unchanged: weights as remote variables sharded over 4 replicas (replicated tensor
sharding): loaded by addons.load_remote_graph, gathered by all_gather_replica_sharded_graph (the
strided all-gather custom op), gradients reduce-scattered by reduce_replica_sharded_graph (the
strided reduce-scatter custom op), shards updated and stored back; checked against NumPy."""
import numpy as np
import pytest

import popxl
from popxl import ops

R, B, D_IN, D_HID = 4, 2, 8, 4
LR = 0.5


def _net(addons):
    from popxl_addons.layers import Linear

    class Net(addons.Module):
        def __init__(self):
            super().__init__()
            self.fc = Linear(D_HID)

        def build(self, x):
            return ops.tanh(self.fc(x))

    return Net()


@pytest.mark.every_branch
def test_remote_sharded_weights_trained_over_four_replicas(addons, addons_branch):
    from popxl_addons.named_tensors import NamedTensors

    # sdk-release-3.0 shards only tensors of at least `sharded_threshold` (1024) elements
    threshold = {"sharded_threshold": 1} if addons_branch == "sdk-release-3.0" else {}
    reduce_threshold = {"threshold": 1} if addons_branch == "sdk-release-3.0" else {}

    ir = popxl.Ir(replication=R)
    with ir.main_graph, popxl.in_sequence(True):
        x_s = popxl.h2d_stream((B, D_IN), popxl.float32, "x")
        t_s = popxl.h2d_stream((B, D_HID), popxl.float32, "target")
        facts, fwd = _net(addons).create_graph(popxl.TensorSpec((B, D_IN), popxl.float32))
        bwd = addons.autodiff(fwd, grads_required=fwd.args.tensors)

        buffers = addons.named_variable_buffers(facts, entries=1, **threshold)  # sharded over all 4 replicas
        remote = facts.init_remote(buffers, 0)
        load, names = addons.load_remote_graph(buffers)
        shards = NamedTensors.pack(names, load.call(0))
        gather, gnames = addons.rts.all_gather_replica_sharded_graph(shards)
        full = NamedTensors.pack(gnames, gather.bind(shards).call())

        x, target = ops.host_load(x_s), ops.host_load(t_s)
        info = fwd.bind(full).call_with_info(x)
        dy = info.outputs[0] - target
        grads = bwd.call(dy, args=bwd.grad_graph_info.inputs_dict(info))
        grads = NamedTensors.pack(sorted(fwd.args.named_tensors), grads)
        reduce, rnames = addons.rts.reduce_replica_sharded_graph(grads, "mean", **reduce_threshold)
        grad_shards = NamedTensors.pack(rnames, reduce.bind(grads).call())
        for name, shard in shards.named_tensors.items():
            g = grad_shards.named_tensors[name]
            assert g.shape == shard.shape and shard.meta_shape, (name, g.shape, shard.shape)
            ops.scaled_add_(shard, g, b=-LR)
        store = addons.store_remote_graph(buffers)
        store.bind(shards).call(0)

    types = {op.type for g in ir.graphs for op in g.ops}
    assert {"replicated_all_gather_strided", "replicated_reduce_scatter_strided"} <= types, types
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(R, B, D_IN)).astype(np.float32)
    ts = rng.normal(size=(R, B, D_HID)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        w0 = sess.get_tensor_data(remote.fc.weight).astype(np.float64)
        b0 = sess.get_tensor_data(remote.fc.bias).astype(np.float64)
        assert w0.shape == (D_IN, D_HID) and np.abs(w0).max() > 0
        sess.run({x_s: xs, t_s: ts})
        w1, b1 = sess.get_tensor_data(remote.fc.weight), sess.get_tensor_data(remote.fc.bias)
    gw, gb = np.zeros_like(w0), np.zeros_like(b0)
    for x, t in zip(xs, ts):
        y = np.tanh(x @ w0 + b0)
        dz = (y - t) * (1 - y * y)
        gw += x.T @ dz / R
        gb += dz.sum(0) / R
    np.testing.assert_allclose(w1, w0 - LR * gw, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(b1, b0 - LR * gb, rtol=1e-5, atol=1e-6)
