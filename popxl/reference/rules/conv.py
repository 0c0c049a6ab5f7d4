"""Windowed ops on (N, C, *spatial) tensors: convolutions, pools, interpolate (ONNX Resize, by
popxl/ops/_interpolation.py) and roi_align (ONNX RoiAlign, by codelets/roi_align.py)."""
import numpy as np

from ..registry import reference_rule
from ._util import wide


def conv(x, w, strides, pads, dilations, groups):
    n, c = x.shape[:2]
    m = w.shape[0]
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    kernel = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - dilations[i] * (kernel[i] - 1) - 1) // strides[i] + 1 for i in range(nd)]
    out = np.zeros((n, m) + tuple(out_sp), dtype=np.result_type(x, w))
    cg, mg = c // groups, m // groups
    for g in range(groups):
        for kidx, patch in _patches(xp, g, cg, kernel, strides, dilations, out_sp):
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx]  # (mg, cg)
            out[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wk)
    return out


def _patches(xp, g, cg, kernel, strides, dilations, out_sp):
    """Each kernel position of group g with the padded input's elements it meets: (kidx, patch),
    patch (n, cg, *out) the strided window of xp's channels of the group."""
    for kidx in np.ndindex(*kernel):
        sl = [slice(None), slice(g * cg, (g + 1) * cg)]
        for i, k in enumerate(kidx):
            start = k * dilations[i]
            sl.append(slice(start, start + strides[i] * (out_sp[i] - 1) + 1, strides[i]))
        yield kidx, xp[tuple(sl)]


def conv_transpose(x, w, strides, pads, dilations, groups, out_shape):
    """The adjoint of conv: x (N, M, *O), w (M, C/groups, *K) -> (N, C, *out_shape)."""
    n, m = x.shape[:2]
    nd = x.ndim - 2
    kernel = w.shape[2:]
    c = w.shape[1] * groups
    full = [out_shape[i] + pads[i] + pads[nd + i] for i in range(nd)]
    out = np.zeros((n, c) + tuple(full), dtype=np.result_type(x, w))
    cg, mg = c // groups, m // groups
    osp = x.shape[2:]
    for g in range(groups):
        for kidx in np.ndindex(*kernel):
            sl = [slice(None), slice(g * cg, (g + 1) * cg)]
            for i in range(nd):
                start = kidx[i] * dilations[i]
                sl.append(slice(start, start + strides[i] * (osp[i] - 1) + 1, strides[i]))
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx]  # (mg, cg)
            out[tuple(sl)] += np.einsum("nm...,mc->nc...", x[:, g * mg:(g + 1) * mg], wk)
    sl = [slice(None), slice(None)] + [slice(pads[i], pads[i] + out_shape[i]) for i in range(nd)]
    return out[tuple(sl)]


@reference_rule("conv")
def conv_rule(ctx, op, ins):
    a = op.attrs
    return [conv(wide(ins[0]), wide(ins[1]), a["strides"], a["pads"], a["dilations"], a["groups"])]


@reference_rule("conv_transpose")
def conv_transpose_rule(ctx, op, ins):
    a = op.attrs
    return [conv_transpose(wide(ins[0]), wide(ins[1]), a["strides"], a["pads"], a["dilations"], a["groups"],
                           a["output_shape"])]


def conv_weights_grad(x, dy, kernel, strides, pads, dilations, groups):
    """dW (M, C / groups, *kernel) of conv(x, W) given dy = d loss / d out."""
    n, c = x.shape[:2]
    m = dy.shape[1]
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    out_sp = dy.shape[2:]
    cg, mg = c // groups, m // groups
    dw = np.zeros((m, cg) + tuple(kernel), dtype=np.result_type(x, dy))
    for g in range(groups):
        for kidx, patch in _patches(xp, g, cg, kernel, strides, dilations, out_sp):
            dw[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx] = np.einsum(
                "ncp,nmp->mc", patch.reshape(n, cg, -1), dy[:, g * mg:(g + 1) * mg].reshape(n, mg, -1))
    return dw


@reference_rule("conv_weights_grad")
def conv_weights_grad_rule(ctx, op, ins):
    a = op.attrs
    return [conv_weights_grad(wide(ins[0]), wide(ins[1]), a["kernel_shape"], a["strides"], a["pads"], a["dilations"],
                              a["groups"])]


@reference_rule("max_pool", "average_pool")
def pool(ctx, op, ins):
    a, x = op.attrs, wide(ins[0])
    kernel, strides, dilations, pads = a["kernel_size"], a["strides"], a["dilations"], a["pads"]
    nd = len(kernel)
    n_out = []
    for i in range(nd):
        span = x.shape[2 + i] + pads[i] + pads[nd + i] - dilations[i] * (kernel[i] - 1) - 1
        n_out.append((-(-span // strides[i]) if a["ceil_mode"] else span // strides[i]) + 1)
    out = np.zeros(x.shape[:2] + tuple(n_out), x.dtype)
    for o in np.ndindex(*n_out):
        vals = []
        for kidx in np.ndindex(*kernel):
            pos = [o[i] * strides[i] - pads[i] + kidx[i] * dilations[i] for i in range(nd)]
            if all(0 <= p < x.shape[2 + i] for i, p in enumerate(pos)):
                vals.append(x[(slice(None), slice(None)) + tuple(pos)])
        window = np.stack(vals, -1)
        out[(slice(None), slice(None)) + o] = window.max(-1) if op.type == "max_pool" else window.mean(-1)
    return [out]


@reference_rule("interpolate")
def interpolate(ctx, op, ins):
    from popxl.ops._interpolation import reference

    return [reference(wide(ins[0]), op.outputs[0].shape, op.attrs)]


@reference_rule("roi_align")
def roi_align(ctx, op, ins):
    from codelets.roi_align import reference

    a = op.attrs
    return [reference(wide(ins[0]), ins[1], ins[2], a["output_size"], a["spatial_scale"], a["sampling_ratio"])]


@reference_rule("roi_align_grad")
def roi_align_grad(ctx, op, ins):
    from codelets.roi_align import RoiAlignGrad

    a = op.attrs
    return [RoiAlignGrad().reference(wide(ins[0]), op.outputs[0].shape, ins[1], ins[2], a["output_size"],
                                     a["spatial_scale"], a["sampling_ratio"])]
