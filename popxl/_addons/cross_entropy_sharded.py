"""popxl-addons' CrossEntropySharded (ops/cross_entropy_sharded_loss/crossentropysharded*.cpp):
cross entropy of logits (N, C_local) whose class axis is sharded over the replicas of a group;
indices (N,) are the same on every replica, already shifted to each shard's class range.

Forward (CrossEntropyShardedOpx):
    m = max over the group of max_C(logits);  d = sum over the group of sum_C(exp(logits - m)),
    nls = -(logits - m - log d)        (output 1, the negative log softmax of the shard),
    loss[n] = sum over the group of nls[n, idx[n]] where 0 <= idx[n] < C_local, else 0 (output 0).
Gradient (CrossEntropyShardedGradOpx, from the loss gradient only):
    dlogits = exp(-nls) dloss[:, None], minus dloss[n] at [n, idx[n]] for indices in range.
"""
from __future__ import annotations

import numpy as np

import popxl
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph


def _in_shard(indices, n_classes: int):
    """(N, C) float mask: 1 where the column is the sample's index (out-of-range indices match none)."""
    cols = popxl.constant(np.arange(n_classes, dtype=np.int32), popxl.int32, "classes")
    idx = indices if indices.dtype == popxl.int32 else ops.cast(indices, popxl.int32)
    return ops.equal(idx.reshape((idx.shape[0], 1)), cols.reshape((1, n_classes)))


@register_custom_op
class CrossEntropySharded(CustomOp):
    """Tensor-parallel cross entropy: outputs the per-sample loss and the shard's -log softmax."""
    op_type = "cross_entropy_sharded"
    pb_type = "CrossEntropySharded"
    attrs = ("group", "available_memory_proportion")
    input_names = ("logits", "indices")

    def infer(self, inputs, group, available_memory_proportion=0.4):
        logits, indices = inputs
        if logits.rank != 2:
            raise ValueError(f"CrossEntropySharded: logits must be of rank 2 (n_samples, sharded_n_classes), "
                             f"not {logits.shape}")
        if indices.rank != 1:
            raise ValueError(f"CrossEntropySharded: indices must be of rank 1 (n_samples,), not {indices.shape}")
        if logits.shape[0] != indices.shape[0]:
            raise ValueError(f"CrossEntropySharded: indices and logits must have the same number of samples: "
                             f"logits {logits.shape}, indices {indices.shape}")
        if indices.dtype.is_floating_point:
            raise TypeError(f"CrossEntropySharded: indices must be integers, not {indices.dtype.name}")
        return [((logits.shape[0],), logits.dtype), (logits.shape, logits.dtype)]

    def expand(self, logits, indices, group, available_memory_proportion=0.4):
        n, c = logits.shape
        m = ops.max(logits, axis=1)
        if group.group_size > 1:
            m = ops.collectives.replicated_all_reduce(m, "max", group)
        translated = logits - m.reshape((n, 1))
        d = ops.sum(ops.exp(translated), axis=1)
        if group.group_size > 1:
            d = ops.collectives.replicated_all_reduce(d, "add", group)
        nls = -(translated - ops.log(d).reshape((n, 1)))
        mask = ops.cast(_in_shard(indices, c), logits.dtype)
        loss = ops.sum(nls * mask, axis=1)
        if group.group_size > 1:
            loss = ops.collectives.replicated_all_reduce(loss, "add", group)
        return [loss, nls]

    def grad(self, ctx, fwd, grads):
        dloss = grads[0]
        if dloss is None:
            return [None, None]
        dlogits, = CrossEntropyShardedGrad.create(dloss, ctx.output(1), ctx.input(1))
        return [dlogits, None]


@register_custom_op
class CrossEntropyShardedGrad(CustomOp):
    """(dloss, nls, indices) -> dlogits of the shard."""
    op_type = "cross_entropy_sharded_grad"
    pb_type = "CrossEntropyShardedGrad"
    gradient = "missing"
    input_names = ("dloss", "nls", "indices")

    def infer(self, inputs):
        dloss, nls, indices = inputs
        return [(nls.shape, nls.dtype)]

    def expand(self, dloss, nls, indices):
        n, c = nls.shape
        g = dloss.reshape((n, 1))
        mask = ops.cast(_in_shard(indices, c), nls.dtype)
        return ops.exp(-nls) * g - mask * g


def _create(graph, inputs, outputs, group=None, availableMemoryProportion=0.4, settings=None,  # noqa: N803
            groupSize=None):  # noqa: N803
    if group is None:  # sdk-release-3.0's binding: a group of `groupSize` consecutive replicas
        if groupSize is None:
            raise TypeError("CrossEntropyShardedOp.createOpInGraph: give `group` (a replica grouping) or `groupSize`")
        from popxl.graph import Graph
        group = Graph._from_pb(graph).ir.replica_grouping(stride=1, group_size=int(groupSize))._pb_replica_grouping
    return create_in_graph(CrossEntropySharded(), graph, inputs, outputs,
                           dict(group=group, available_memory_proportion=float(availableMemoryProportion)),
                           settings)


BINDING_CLASSES = {"crossentropysharded_binding": [
    binding_class("CrossEntropyShardedOp", CrossEntropySharded(), _create)]}
