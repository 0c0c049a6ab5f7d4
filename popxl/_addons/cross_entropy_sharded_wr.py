"""popxl-addons' CrossEntropyShardedWR (ops/cross_entropy_sharded_wr_loss/*.cpp): cross entropy of
logits sharded over the IPUs of one replica along the class axis (shard i on IPU ipus[i], C_i
classes); indices (N,) are the global class indices (the op shifts them to each shard's range).

Forward: the max and the sum of exponentials are all-reduced over the IPUs; output 1 + i is shard
i's negative log softmax (on its IPU); output 0, on IPU ipus[0], is the loss: the sum over shards
of nls_i[n, idx[n] - start_i] where the shifted index is in the shard's range.
Gradient: the loss gradient is copied to every IPU; dlogits_i = exp(-nls_i) g, minus g[n] at the
sample's class in the shard.
"""
from __future__ import annotations

import popxl
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph
from .cross_entropy_sharded import _in_shard


def _shift(idx, start: int):
    idx = idx if idx.dtype == popxl.int32 else ops.cast(idx, popxl.int32)
    return idx - popxl.constant(start, popxl.int32, "shard_start") if start else idx


@register_custom_op
class CrossEntropyShardedWR(CustomOp):
    """Cross entropy of logits sharded over the IPUs of a replica."""
    op_type = "cross_entropy_sharded_wr"
    pb_type = "CrossEntropyShardedWR"
    attrs = ("ipus",)
    spans_ipus = True

    def infer(self, inputs, ipus):
        k = len(ipus)
        if len(inputs) != 2 * k:
            raise ValueError(f"CrossEntropyShardedWR: {k} IPUs need {k} logits and {k} indices, "
                             f"got {len(inputs)} inputs")
        logits = inputs[:k]
        n = logits[0].shape[0]
        for t in logits:
            if t.rank != 2 or t.shape[0] != n:
                raise ValueError(f"CrossEntropyShardedWR: every logits shard must be (n_samples, classes), got "
                                 f"{[x.shape for x in logits]}")
        return [((n,), logits[0].dtype)] + [(t.shape, t.dtype) for t in logits]

    def expand(self, *ts, ipus):
        k = len(ipus)
        logits, indices = ts[:k], ts[k:]
        n = logits[0].shape[0]
        maxes = []
        for x, i in zip(logits, ipus):
            with popxl.ipu(i):
                maxes.append(ops.max(x, axis=1))
        maxes = ops.collectives.all_reduce(maxes, ipus=list(ipus), op="max") if k > 1 else maxes
        translated, sums = [], []
        for x, m, i in zip(logits, maxes, ipus):
            with popxl.ipu(i):
                t = x - m.reshape((n, 1))
                translated.append(t)
                sums.append(ops.sum(ops.exp(t), axis=1))
        sums = ops.collectives.all_reduce(sums, ipus=list(ipus), op="add") if k > 1 else sums
        nls, partials, start = [], [], 0
        for t, d, idx, i, x in zip(translated, sums, indices, ipus, logits):
            with popxl.ipu(i):
                nl = -(t - ops.log(d).reshape((n, 1)))
                nls.append(nl)
                mask = ops.cast(_in_shard(_shift(idx, start), x.shape[1]), x.dtype)
                p = ops.sum(nl * mask, axis=1)
            partials.append(p if i == ipus[0] else ops.ipu_copy(p, ipus[0], i))
            start += x.shape[1]
        with popxl.ipu(ipus[0]):
            loss = partials[0]
            for p in partials[1:]:
                loss = loss + p
        return [loss] + nls

    def grad(self, ctx, fwd, grads):
        k = len(fwd.attrs["ipus"])
        dloss = grads[0]
        if dloss is None:
            return [None] * (2 * k)
        outs = CrossEntropyShardedWRGrad.create(dloss, *[ctx.output(1 + j) for j in range(k)],
                                                *[ctx.input(k + j) for j in range(k)], ipus=fwd.attrs["ipus"])
        return list(outs) + [None] * k


@register_custom_op
class CrossEntropyShardedWRGrad(CustomOp):
    """(dloss, nls_0.., indices_0..) -> dlogits_0.. on their IPUs."""
    op_type = "cross_entropy_sharded_wr_grad"
    pb_type = "CrossEntropyShardedWRGrad"
    attrs = ("ipus",)
    gradient = "missing"
    spans_ipus = True

    def infer(self, inputs, ipus):
        k = len(ipus)
        return [(t.shape, t.dtype) for t in inputs[1:1 + k]]

    def expand(self, dloss, *ts, ipus):
        k = len(ipus)
        nls, indices = ts[:k], ts[k:]
        n = dloss.shape[0]
        out, start = [], 0
        for nl, idx, i in zip(nls, indices, ipus):
            g = dloss if i == ipus[0] else ops.ipu_copy(dloss, i, ipus[0])
            with popxl.ipu(i):
                g = g.reshape((n, 1))
                mask = ops.cast(_in_shard(_shift(idx, start), nl.shape[1]), nl.dtype)
                out.append(ops.exp(-nl) * g - mask * g)
            start += nl.shape[1]
        return out


def _create(graph, inputs, outputs, ipus, settings=None):
    return create_in_graph(CrossEntropyShardedWR(), graph, inputs, outputs, dict(ipus=tuple(int(i) for i in ipus)),
                           settings)


BINDING_CLASSES = {"crossentropysharded_wr_binding": [
    binding_class("CrossEntropyShardedOp", CrossEntropyShardedWR(), _create)]}
