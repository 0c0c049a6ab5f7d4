"""One SGD step of y = X W^T on every replica, with the weight replica-grouped, optionally
replica-sharded (its gradient reduce-scattered over the group) and optionally remote, in both
retrieval modes; checked against NumPy per replica."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.transforms as transforms

A, B, C = 3, 5, 4


def _step(R, spec, rts, remote, mode, shard_grouping=False):
    ir = popxl.Ir()
    ir.replication_factor = R
    rg = ir.replica_grouping(*spec) if spec else None
    grp = rg or ir.replica_grouping()
    G = grp.num_groups
    rng = np.random.default_rng(R + 3 * rts + 5 * remote)
    w0 = rng.random(((G, C, B) if G > 1 else (C, B))).astype(np.float32)
    X = rng.normal(0, 0.4, (R, A, B)).astype(np.float32)
    labels = rng.integers(0, C, (R, A)).astype(np.int32)
    with ir.main_graph, popxl.in_sequence():
        xs = popxl.h2d_stream((A, B), popxl.float32, "X")
        ls = popxl.h2d_stream((A,), popxl.int32, "labels")
        x = ops.host_load(xs)
        lab = ops.host_load(ls)
        buf = None
        if rts and remote:
            kw = {"shard_grouping": grp} if shard_grouping else {}
            buf = popxl.replica_sharded_buffer(w0.shape, popxl.float32, rg, **kw)
            handle = popxl.remote_replica_sharded_variable(w0, buf, 0, popxl.float32, "W", replica_grouping=rg,
                                                           retrieval_mode=mode)
            w = ops.remote_load(buf, 0)
        elif rts:
            handle, w = popxl.replica_sharded_variable(w0, popxl.float32, "W", replica_grouping=rg, retrieval_mode=mode)
        elif remote:
            buf = popxl.remote_buffer((C, B), popxl.float32, 1)
            handle = popxl.remote_variable(w0, buf, 0, popxl.float32, "W", replica_grouping=rg, retrieval_mode=mode)
            w = ops.remote_load(buf, 0)
        else:
            handle = w = popxl.variable(w0, popxl.float32, "W", replica_grouping=rg, retrieval_mode=mode)
        full = ops.collectives.replicated_all_gather(w, group=grp) if rts else w

        def linear(xx, ww):
            return xx @ ww.transpose()

        g = ir.create_graph(linear, x, full)
        info = ops.call_with_info(g, x, full)
        y = info.outputs[0]
        ys = popxl.d2h_stream(y.shape, y.dtype, "y")
        ops.host_store(ys, y)
        _, dy = ops.nll_loss_with_softmax_grad(ops.softmax(y, 1), lab)
        bwd = transforms.autodiff(g, grads_required=[g.inputs[1]])
        (gw,) = ops.call(bwd.graph, dy, inputs_dict=bwd.inputs_dict(info))
        if rts:
            gw = ops.collectives.replicated_reduce_scatter(gw, "add", grp, True)
        ops.var_updates.accumulate_(w, gw, -1.0)
        if remote:
            ops.remote_store(buf, 0, w)
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run({xs: X, ls: labels})
    final = s.get_tensor_data(handle)

    # NumPy: each replica's gradient of mean NLL(softmax(X W^T)); sharded weights share one value
    # per group, so their gradients add up over the group
    W = np.stack([w0[grp.assignment[r]] if G > 1 else w0 for r in range(R)])
    yv = np.einsum("rab,rcb->rac", X, W)
    np.testing.assert_allclose(out[ys], yv if R > 1 else yv[0], rtol=1e-5, atol=1e-6)
    p = np.exp(yv - yv.max(-1, keepdims=True))
    p /= p.sum(-1, keepdims=True)
    p[np.arange(R)[:, None], np.arange(A)[None], labels] -= 1
    grads = np.einsum("rac,rab->rcb", p / A, X)
    if rts:
        for members in grp._groups():
            grads[members] = grads[members].sum(0)
    new = W - grads
    if mode == "all_replicas" and R > 1 and grp.group_size > 1:
        want = new
    elif G > 1:
        want = np.stack([new[m[0]] for m in grp._groups()])
    else:
        want = new[0]
    np.testing.assert_allclose(final, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("R, spec", [(2, (1, 2)), (4, (2, 2)), (4, (1, 2)), (2, (1, 1)), (2, None)])
@pytest.mark.parametrize("rts", [False, True])
@pytest.mark.parametrize("remote", [False, True])
@pytest.mark.parametrize("mode", ["one_per_group", "all_replicas"])
def test_grouped_sgd_step(R, spec, rts, remote, mode):
    _step(R, spec, rts, remote, mode)


def test_shard_grouping_keyword():
    """SDK 3.0 named the sharding by a grouping (shard_grouping) rather than a count (shard_over)."""
    _step(4, (1, 2), True, True, "one_per_group", shard_grouping=True)
    ir = popxl.Ir(replication=8)
    with ir.main_graph:
        v, s = popxl.replica_sharded_variable(np.zeros(8, np.float32), shard_grouping=ir.replica_grouping(1, 4))
        assert s.shape == (2,) and v._shard_over == 4
        for rg, sg in ((None, ir.replica_grouping(stride=2)), (ir.replica_grouping(1, 4), ir.replica_grouping(1, 8)),
                       (ir.replica_grouping(stride=4), ir.replica_grouping(stride=2))):
            with pytest.raises(ValueError):
                popxl.replica_sharded_buffer((4, 4), popxl.float32, replica_grouping=rg, shard_grouping=sg)
    assert ir.replica_grouping(2, 2)._to_variable_settings("all_replicas").groups(8) == [[0, 2], [1, 3], [4, 6],
                                                                                         [5, 7]]
