"""Random ATen ops: bernoulli (PyTorch's CPU dropout), rand / randn and their _like forms,
normal, uniform. The numbers come from popxl's generator, seeded per micro-batch from the
model's seed (Options.randomSeed): reproducible, but not PyTorch's stream."""
from __future__ import annotations

import numpy as np

import popxl
import popxl.ops as ops

from .context import Op, aten


def _uniform(op: Op, low=0.0, high=1.0) -> popxl.Tensor:
    dt = op.out_dtype()
    u = ops.random_uniform(op.tr.next_seed(), op.out_shape(), low=float(low), high=float(high),
                           dtype=dt if dt.is_floating_point else popxl.float32)
    return u


@aten("bernoulli.p", "bernoulli.default")
def bernoulli(op: Op):
    """1 with probability p (a number, or each element of the input for bernoulli(probs))."""
    dt = op.out_dtype()
    u = _uniform(op)
    if op.node.op_name.endswith(".default"):  # bernoulli(probs)
        probs = op.t("self", u.dtype)
    else:
        probs = popxl.constant(np.asarray(float(op.arg("p")), u.dtype.as_numpy()), u.dtype)
    hit = ops.less(u, probs)
    return ops.detach(ops.cast(hit, dt))


@aten("rand", "rand_like", "uniform")
def rand(op: Op):
    low, high = op.arg("from", 0.0), op.arg("to", 1.0)
    u = _uniform(op, low, high)
    return u if u.dtype == op.out_dtype() else ops.cast(u, op.out_dtype())


@aten("randn", "randn_like")
def randn(op: Op):
    dt = op.out_dtype()
    return ops.random_normal(op.tr.next_seed(), op.out_shape(), mean=float(op.arg("mean", 0.0)),
                             std=float(op.arg("std", 1.0)), dtype=dt)
