"""Layout ops. The in-place forms (``reshape_``, ``transpose_``, ``slice_``, ``concat_``...) return
NumPy views where NumPy has them, so writes through them reach their input."""
import numpy as np

from ..registry import reference_rule


@reference_rule("reshape")
def reshape(ctx, op, ins):
    return [ins[0].reshape(op.attrs["shape"])]


@reference_rule("transpose")
def transpose(ctx, op, ins):
    return [np.transpose(ins[0], op.attrs["permutation"])]


@reference_rule("slice")
def slice_(ctx, op, ins):
    return [ins[0][tuple(op.attrs["index"])]]


@reference_rule("subsample")
def subsample(ctx, op, ins):
    return [ins[0][tuple(slice(None, None, s) for s in op.attrs["strides"])]]


@reference_rule("concat")
def concat(ctx, op, ins):
    return [np.concatenate(ins, op.attrs["axis"])]


@reference_rule("split")
def split(ctx, op, ins):
    cuts = np.cumsum(op.attrs["splits"])[:-1]
    return np.split(ins[0], cuts, op.attrs["axis"])
