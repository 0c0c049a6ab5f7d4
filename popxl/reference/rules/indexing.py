"""Indexing by run-time values, with the simulator's rules for indices out of range: a gather
gives zeros for them (PopXL leaves them undefined unless zero_OOR), scatter / scatter_reduce /
sparse updates skip them, dynamic_slice / dynamic_update read an offset outside the axis as 0 and
wrap the slice around the axis."""
import numpy as np

from codelets.indexing import UPDATE_OPS, UpdateOpCode

from ..registry import reference_rule
from ._util import inputs_by_name, wide


def take(t: np.ndarray, idx: np.ndarray, axis: int) -> np.ndarray:
    """np.take with zeros where an index is outside [0, size of axis)."""
    idx = np.asarray(idx).astype(np.int64)
    n = t.shape[axis]
    ok = (idx >= 0) & (idx < n)
    out = np.take(t, np.where(ok, idx, 0), axis=axis) if n else np.zeros(
        t.shape[:axis] + idx.shape + t.shape[axis + 1:], t.dtype)
    shape = [1] * out.ndim
    shape[axis:axis + idx.ndim] = idx.shape
    return np.where(ok.reshape(shape), out, np.zeros((), t.dtype))


@reference_rule("gather", "tied_gather")
def gather(ctx, op, ins):
    return [take(ins[0], ins[1], op.attrs["axis"])]


@reference_rule("grouped_gather")
def grouped_gather(ctx, op, ins):
    t, idx = ins
    ax = op.attrs["axis"] - 1  # the data axis after the group axis
    return [np.stack([take(t[g], idx[g], ax) for g in range(t.shape[0])])]


def _combine(code: int, old, new):
    if code == UpdateOpCode.ASSIGN:
        return new
    if code == UpdateOpCode.ADD:
        return old + new
    if code == UpdateOpCode.MUL:
        return old * new
    if code == UpdateOpCode.MAX:
        return new if (new > old or new != new) else old
    return new if (new < old or new != new) else old


def scatter_into(out: np.ndarray, idx: np.ndarray, values: np.ndarray, axis: int, code: int,
                 reached: np.ndarray | None = None) -> None:
    """out[..., idx[p], ...] op= values[p] along axis, for every position p of idx (in order);
    indices outside the axis are skipped. idx has values' shape (or is broadcast along axis)."""
    idx = np.asarray(idx).astype(np.int64)
    if idx.shape != values.shape:
        shp = [1] * values.ndim
        shp[axis] = -1
        idx = np.broadcast_to(idx.reshape(shp), values.shape)
    n = out.shape[axis]
    for pos in np.ndindex(*values.shape):
        i = int(idx[pos])
        if not 0 <= i < n:
            continue
        at = list(pos)
        at[axis] = i
        dst = tuple(at)
        if any(d >= s for d, s in zip(dst, out.shape)):
            continue
        if reached is not None and not reached[dst]:
            out[dst] = values[pos]
            reached[dst] = True
        else:
            out[dst] = _combine(code, out[dst], values[pos])


@reference_rule("scatter")
def scatter(ctx, op, ins):
    t, idx, vals = ins
    out = t.copy()
    scatter_into(out, idx, vals, op.attrs["axis"], UpdateOpCode.ASSIGN)
    return [out]


_IDENTITY = {"sum": 0.0, "mul": 1.0, "none": 0.0}


@reference_rule("scatter_reduce", "grouped_scatter_reduce")
def scatter_reduce(ctx, op, ins):
    named = inputs_by_name(op, ins)
    data, idx = ins[0], ins[1]
    axis, red = op.attrs["axis"], op.attrs["reduction"]
    shape = list(data.shape)
    shape[axis] = op.attrs["axis_size"]
    code = UPDATE_OPS[red]
    acc = wide(data)
    reached = None
    if "initial_values" in named:
        out = wide(named["initial_values"]).copy()
    elif red in ("max", "min"):
        out = np.zeros(shape, acc.dtype)  # positions no index reaches stay 0 (PopART)
        reached = np.zeros(shape, bool)
    else:
        out = np.full(shape, _IDENTITY[red], acc.dtype)
    scatter_into(out, idx, acc, axis, code, reached)
    return [out.astype(data.dtype)]


def _wrapped_rows(offset, size: int, n: int) -> np.ndarray:
    o = int(offset)
    o = 0 if o < 0 or o >= n else o
    return (o + np.arange(size)) % n if n else np.zeros(0, np.int64)


def _dynamic_index(t, offsets, axes, sizes):
    index = [slice(None)] * t.ndim
    for ax, size, off in zip(axes, sizes, np.asarray(offsets).reshape(-1)):
        index[ax] = _wrapped_rows(off, size, t.shape[ax])
    return np.ix_(*[np.arange(t.shape[d]) if isinstance(i, slice) else i for d, i in enumerate(index)])


@reference_rule("dynamic_slice")
def dynamic_slice(ctx, op, ins):
    t, off = ins
    return [t[_dynamic_index(t, off.reshape(-1), op.attrs["axes"], op.attrs["sizes"])]]


@reference_rule("dynamic_update")
def dynamic_update(ctx, op, ins):
    t, off, upd = ins
    out = t.copy()
    out[_dynamic_index(t, off.reshape(-1), op.attrs["axes"], op.attrs["sizes"])] = upd
    return [out]


@reference_rule("onehot")
def onehot(ctx, op, ins):
    idx, vals = np.asarray(ins[0]).astype(np.int64), ins[1]
    n = op.attrs["num_classes"]
    hot = np.moveaxis(idx[..., None] == np.arange(n), -1, op.attrs["axis"])
    return [np.where(hot, vals[1], vals[0])]
