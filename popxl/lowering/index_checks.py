"""The `debug.checkIndices` engine option: run-time indices checked on the host.

On the device, out-of-range indices follow poplibs and pass silently: gather gives zero rows,
dynamic_slice / dynamic_update read an offset past the axis as 0 and wrap a slice that runs over
its end around the axis, nll_loss picks nothing for a label
outside the classes. That stays the default. With the option on, the lowering adds before each
such op a device-to-host copy of its indices into a stream whose host callback checks them and
raises IndexError naming the op and the first bad index. The copy costs what any device-to-host
transfer of the indices costs, so cycles differ from a run without the option (as instrumenting a
program on hardware would).

Turn it on as an engine option (`{"debug.checkIndices": "true"}`) in POPLAR_ENGINE_OPTIONS or in
`ir._pb_ir.getSessionOptions().engineOptions`, or with IPU_SIM_CHECK_INDICES=1.
"""
from __future__ import annotations

import numpy as np

import ipu
from popxl._run_options import CHECK_INDICES as OPTION
from popxl._run_options import resolve



def enabled(ir) -> bool:
    """Whether the option is on for a session of this Ir made now (IPU_SIM_CHECK_INDICES first,
    then POPLAR_ENGINE_OPTIONS, then the Ir's engine options: popxl._run_options)."""
    return resolve(ir).check_indices


class IndexChecker:
    """Host callback: every index must lie in [low, high] (per position of the index tensor)."""

    def __init__(self, op, low, high, what, ignore=None):
        self.op_type = op.type
        self.op_name = op.name
        self.low = np.asarray(low, np.int64)
        self.high = np.asarray(high, np.int64)
        self.what = what  # callable(position) -> text describing the allowed range there
        self.ignore = ignore

    def __call__(self, array: np.ndarray, replica: int) -> None:
        v = np.asarray(array).astype(np.int64).reshape(-1)
        low = np.broadcast_to(self.low, v.shape)
        high = np.broadcast_to(self.high, v.shape)
        bad = (v < low) | (v > high)
        if self.ignore is not None:
            bad &= v != self.ignore
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            where = f" (replica {replica})" if replica else ""
            raise IndexError(
                f"{self.op_type} {self.op_name!r}: index {int(v[i])} at position {i} of its indices is out of "
                f"range: {self.what(i)}{where}; {int(bad.sum())} of {v.size} indices are out of range. "
                f"(Found by {OPTION}; without it the device {_DEVICE[self.op_type]}.)")


_DEVICE = {
    "gather": "returns zero rows for them", "tied_gather": "returns zero rows for them",
    "dynamic_slice": "reads an offset past the axis as 0 and wraps a slice that runs over its end",
    "dynamic_update": "reads an offset past the axis as 0 and wraps a slice that runs over its end",
    "nll_loss": "picks no probability for them", "nll_loss_with_softmax_grad": "picks no probability for them",
}


def _gather(op):
    t = op.inputs[0]
    axis = op.attrs["axis"] % max(t.rank, 1)
    n = t.shape[axis]
    return 1, 0, n - 1, lambda i: f"axis {axis} of {t.id!r} has {n} rows (0..{n - 1})", None


def _dynamic(op):
    t = op.inputs[0]
    axes, sizes = list(op.attrs["axes"]), list(op.attrs["sizes"])
    high = [t.shape[a] - s for a, s in zip(axes, sizes)]
    return 1, 0, high, (lambda i: f"a slice of {sizes[i]} along axis {axes[i]} of {t.id!r} (size "
                                  f"{t.shape[axes[i]]}) starts at 0..{high[i]}"), None


def _nll(op):
    classes = op.inputs[0].shape[-1]
    ign = op.attrs.get("ignore_index")
    extra = f" or the ignore_index {ign}" if ign is not None else ""
    return 1, 0, classes - 1, lambda i: f"labels are classes 0..{classes - 1}{extra}", ign


CHECKS = {
    "gather": _gather, "tied_gather": _gather,
    "dynamic_slice": _dynamic, "dynamic_update": _dynamic,
    "nll_loss": _nll, "nll_loss_with_softmax_grad": _nll,
}


def emit(ctx, op) -> None:
    """Before `op` runs: copy its indices to the host and check them (when it has any)."""
    spec = CHECKS.get(op.type)
    if spec is None:
        return
    if op.type == "gather" and op.attrs.get("zero_OOR"):
        return  # the caller asked for zero rows out of range: not an error
    pos, low, high, what, ignore = spec(op)
    idx_t = op.inputs[pos]
    idx = ctx.value(idx_t)
    if idx.numel == 0:
        return
    name = f"check_indices/{op.id}/{op.name}"
    stream = ctx.g.add_device_to_host_stream(name, (idx.numel,), ctx.etype(idx_t),
                                             callback=IndexChecker(op, low, high, what, ignore))
    ctx.emit(ipu.DeviceToHost(idx.reshape(-1), stream, name=ctx.name("check indices")))
