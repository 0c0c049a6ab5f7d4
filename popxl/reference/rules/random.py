"""Random ops: the counter-based generator of codelets.rng (each element's numbers depend only on
the (2,) uint32 seed and its index in the whole output), so the reference draws exactly the
numbers the simulated IPU draws."""
import numpy as np

from codelets.rng import dropout_reference, modify_seed_reference, normal_reference, uniform_reference

from ..registry import reference_rule


@reference_rule("random_uniform")
def random_uniform(ctx, op, ins):
    t = op.outputs[0]
    n = int(np.prod(t.shape, dtype=np.int64))
    return [uniform_reference(ins[0], n, op.attrs["low"], op.attrs["high"], ctx.out_dtype()).reshape(t.shape)]


@reference_rule("random_normal")
def random_normal(ctx, op, ins):
    t = op.outputs[0]
    n = int(np.prod(t.shape, dtype=np.int64))
    return [normal_reference(ins[0], n, op.attrs["mean"], op.attrs["std"], ctx.out_dtype()).reshape(t.shape)]


@reference_rule("dropout")
def dropout(ctx, op, ins):
    x, seed = ins
    if x.dtype == np.float64:  # upcast: the same mask, the scaling in float64
        return [x * dropout_reference(seed, np.ones(x.shape), float(op.attrs["ratio"]))]
    return [dropout_reference(seed, x, float(op.attrs["ratio"]))]


@reference_rule("shaped_dropout")
def shaped_dropout(ctx, op, ins):
    x, seed = ins
    mask = dropout_reference(seed, np.ones(tuple(op.attrs["shape"]), x.dtype), float(op.attrs["ratio"]))
    return [x * mask]


@reference_rule("create_random_seed")
def create_random_seed(ctx, op, ins):
    return [modify_seed_reference(ins[0], int(np.asarray(ins[1]).reshape(-1)[0]))]
