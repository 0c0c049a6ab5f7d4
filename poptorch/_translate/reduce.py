"""Reductions: sum, mean, amax / amin, max / min (with indices), argmax / argmin, prod, var / std,
logsumexp, any / all, vector norms, cumsum."""
from __future__ import annotations

import math

import numpy as np

import popxl
import popxl.ops as ops

from .context import Op, aten
from .elementwise import scalar_like


def _dims(op: Op, rank: int, name: str = "dim"):
    """The reduced axes: None or [] means all of them (PyTorch's convention)."""
    d = op.args.get(name)
    if d is None:
        return list(range(rank))
    if isinstance(d, int):
        d = [d]
    d = [x + rank if x < 0 else x for x in d]
    return list(range(rank)) if not d else d


def _reduce(fn, x: popxl.Tensor, axes, keepdim: bool, out_shape) -> popxl.Tensor:
    if x.rank == 0:
        return ops.identity(x)
    if not axes:
        return ops.identity(x)
    r = fn(x, axis=axes, keepdims=bool(keepdim))
    return r if tuple(r.shape) == tuple(out_shape) else ops.reshape(r, out_shape)


@aten("sum.default", "sum.dim_IntList")
def sum_(op: Op):
    x = op.t("self", op.out_dtype())
    if x.dtype == popxl.bool:
        x = ops.cast(x, popxl.int32)
    return _reduce(ops.sum, x, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())


@aten("mean.default", "mean.dim")
def mean(op: Op):
    x = op.t("self", op.out_dtype())
    return _reduce(ops.mean, x, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())


@aten("amax", "max.default")
def amax(op: Op):
    x = op.t("self")
    return _reduce(ops.max, x, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())


@aten("amin", "min.default")
def amin(op: Op):
    x = op.t("self")
    return _reduce(ops.min, x, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())


def _values_indices(op: Op, reduce_fn, arg_fn):
    x = op.t("self")
    d = op.arg("dim")
    d = d + x.rank if d < 0 else d
    keep = bool(op.arg("keepdim", False))
    values = _reduce(reduce_fn, x, [d], keep, op.out_shape(0))
    indices = arg_fn(x, d, keep)
    return [values, indices if tuple(indices.shape) == op.out_shape(1) else ops.reshape(indices, op.out_shape(1))]


@aten("max.dim")
def max_dim(op: Op):
    return _values_indices(op, ops.max, ops.argmax)


@aten("min.dim")
def min_dim(op: Op):
    return _values_indices(op, ops.min, ops.argmin)


def _arg(op: Op, fn):
    x = op.t("self")
    d = op.arg("dim")
    keep = bool(op.arg("keepdim", False))
    if d is None:
        flat = ops.reshape(x, (int(np.prod(x.shape)),))
        r = fn(flat, 0, False)
    else:
        r = fn(x, d + x.rank if d < 0 else d, keep)
    return r if tuple(r.shape) == op.out_shape() else ops.reshape(r, op.out_shape())


@aten("argmax")
def argmax(op: Op):
    return _arg(op, ops.argmax)


@aten("argmin")
def argmin(op: Op):
    return _arg(op, ops.argmin)


@aten("prod.default", "prod.dim_int")
def prod(op: Op):
    x = op.t("self", op.out_dtype())
    return _reduce(ops.prod, x, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())


def _variance(op: Op, x: popxl.Tensor, axes, keep: bool):
    correction = op.arg("correction")
    if correction is None:
        correction = 1 if op.arg("unbiased", True) else 0
    n = int(np.prod([x.shape[a] for a in axes])) if axes else 1
    m = ops.mean(x, axis=axes, keepdims=True)
    c = ops.sub(x, m)
    ss = ops.sum(ops.mul(c, c), axis=axes, keepdims=keep)
    return ops.div(ss, scalar_like(max(n - float(correction), 0.0), x)), m


@aten("var.correction")
def var(op: Op):
    x = op.t("self", op.out_dtype())
    v, _ = _variance(op, x, _dims(op, x.rank), bool(op.arg("keepdim", False)))
    return v if tuple(v.shape) == op.out_shape() else ops.reshape(v, op.out_shape())


@aten("std.correction")
def std(op: Op):
    x = op.t("self", op.out_dtype())
    v, _ = _variance(op, x, _dims(op, x.rank), bool(op.arg("keepdim", False)))
    s = ops.sqrt(v)
    return s if tuple(s.shape) == op.out_shape() else ops.reshape(s, op.out_shape())


@aten("var_mean.correction")
def var_mean(op: Op):
    x = op.t("self", op.out_dtype(0))
    axes = _dims(op, x.rank)
    keep = bool(op.arg("keepdim", False))
    v, m = _variance(op, x, axes, keep)
    m = m if keep else ops.reshape(m, op.out_shape(1))
    return [v if tuple(v.shape) == op.out_shape(0) else ops.reshape(v, op.out_shape(0)), m]


@aten("logsumexp")
def logsumexp(op: Op):
    x = op.t("self", op.out_dtype())
    return _reduce(ops.logsumexp, x, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())


def _any_all(op: Op, fn):
    x = op.t("self")
    nz = ops.cast(ops.not_equal(x, scalar_like(0, x)) if x.dtype != popxl.bool else x, popxl.int32)
    r = _reduce(fn, nz, _dims(op, x.rank), op.arg("keepdim", False), op.out_shape())
    return ops.cast(r, popxl.bool)


@aten("any.default", "any.dim", "any.dims")
def any_(op: Op):
    return _any_all(op, ops.max)


@aten("all.default", "all.dim", "all.dims")
def all_(op: Op):
    return _any_all(op, ops.min)


@aten("linalg_vector_norm")
def vector_norm(op: Op):
    x = op.t("self", op.out_dtype())
    p = op.arg("ord", op.arg("p", 2))
    p = 2.0 if p is None else float(p)
    axes = _dims(op, x.rank)
    keep = bool(op.arg("keepdim", False))
    if p == 2.0:
        r = ops.sqrt(ops.sum(ops.mul(x, x), axis=axes, keepdims=keep))
    elif p == 1.0:
        r = ops.sum(ops.abs(x), axis=axes, keepdims=keep)
    elif math.isinf(p):
        r = (ops.max if p > 0 else ops.min)(ops.abs(x), axis=axes, keepdims=keep)
    elif p == 0.0:
        r = ops.sum(ops.cast(ops.not_equal(x, scalar_like(0, x)), x.dtype), axis=axes, keepdims=keep)
    else:
        r = ops.pow(ops.sum(ops.pow(ops.abs(x), scalar_like(p, x)), axis=axes, keepdims=keep), scalar_like(1 / p, x))
    return r if tuple(r.shape) == op.out_shape() else ops.reshape(r, op.out_shape())


@aten("cumsum")
def cumsum(op: Op):
    x = op.t("self", op.out_dtype())
    if x.rank == 0:
        return ops.identity(x)
    d = op.arg("dim")
    return ops.cumsum(x, d + x.rank if d < 0 else d)
