"""Windowed ops on (N, C, *spatial) tensors: convolutions, pools, interpolate (ONNX Resize) and
roi_align (ONNX RoiAlign, average mode)."""
import math

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
        for kidx in np.ndindex(*kernel):
            sl = [slice(None), slice(g * cg, (g + 1) * cg)]
            for i in range(nd):
                start = kidx[i] * dilations[i]
                sl.append(slice(start, start + strides[i] * (out_sp[i] - 1) + 1, strides[i]))
            patch = xp[tuple(sl)]  # (n, cg, *out)
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + kidx]  # (mg, cg)
            out[:, g * mg:(g + 1) * mg] += np.einsum("nc...,mc->nm...", patch, wk)
    return out


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
        vals = np.stack(vals, -1)
        out[(slice(None), slice(None)) + o] = vals.max(-1) if op.type == "max_pool" else vals.mean(-1)
    return [out]


def _source_coords(n_out, n_in, scale, mode):
    x = np.arange(n_out, dtype=np.float64)
    if mode == "align_corners":
        return x * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return x / scale
    if mode == "pytorch_half_pixel" and n_out <= 1:
        return np.zeros(n_out)
    return (x + 0.5) / scale - 0.5  # half_pixel


def _nearest_index(coords, n_in, mode):
    i = {"floor": np.floor, "ceil": np.ceil}.get(mode)
    i = i(coords) if i else (np.floor(coords + 0.5) if mode == "round_prefer_ceil" else np.ceil(coords - 0.5))
    return np.clip(i, 0, n_in - 1).astype(np.int64)


def _cubic_weights(t, a=-0.75):
    """ONNX Resize cubic convolution weights of the 4 neighbours at offsets -1, 0, 1, 2."""
    d = np.stack([1 + t, t, 1 - t, 2 - t], -1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far)


@reference_rule("interpolate")
def interpolate(ctx, op, ins):
    a = op.attrs
    x = wide(ins[0])
    ctm = a.get("coordinate_transformation_mode", "half_pixel")
    out_shape = op.outputs[0].shape
    for ax, (n_in, n_out, s) in enumerate(zip(x.shape, out_shape, a["scale_factor"])):
        if n_in == n_out and s == 1.0:
            continue
        coords = _source_coords(n_out, n_in, s, ctm)
        if a["mode"] == "nearest":
            x = np.take(x, _nearest_index(coords, n_in, a.get("nearest_mode", "round_prefer_floor")), axis=ax)
            continue
        shape = [1] * x.ndim
        shape[ax] = n_out
        if a["mode"] == "linear":
            c = np.clip(coords, 0, n_in - 1)
            lo = np.floor(c).astype(np.int64)
            hi = np.minimum(lo + 1, n_in - 1)
            frac = (c - lo).reshape(shape).astype(x.dtype)
            x = np.take(x, lo, axis=ax) * (1 - frac) + np.take(x, hi, axis=ax) * frac
        else:  # cubic, neighbours clamped to the edge
            base = np.floor(coords).astype(np.int64)
            wts = _cubic_weights(coords - base)
            acc = 0
            for k, off in enumerate((-1, 0, 1, 2)):
                idx = np.clip(base + off, 0, n_in - 1)
                acc = acc + np.take(x, idx, axis=ax) * wts[:, k].reshape(shape).astype(x.dtype)
            x = acc
    return [x]


def _bilinear(img, y, x):
    """img (C, H, W) at (y, x), zero outside [-1, H] x [-1, W] (ONNX RoiAlign)."""
    h, w = img.shape[1:]
    if y < -1.0 or y > h or x < -1.0 or x > w:
        return np.zeros(img.shape[0], img.dtype)
    y, x = max(y, 0.0), max(x, 0.0)
    y0, x0 = int(y), int(x)
    if y0 >= h - 1:
        y0 = y1 = h - 1
        y = float(y0)
    else:
        y1 = y0 + 1
    if x0 >= w - 1:
        x0 = x1 = w - 1
        x = float(x0)
    else:
        x1 = x0 + 1
    ly, lx = y - y0, x - x0
    hy, hx = 1 - ly, 1 - lx
    return (hy * hx * img[:, y0, x0] + hy * lx * img[:, y0, x1] + ly * hx * img[:, y1, x0]
            + ly * lx * img[:, y1, x1])


@reference_rule("roi_align")
def roi_align(ctx, op, ins):
    t, rois, batch = wide(ins[0]), wide(ins[1]), np.asarray(ins[2]).astype(np.int64)
    oh, ow = op.attrs["output_size"]
    scale, ratio = op.attrs["spatial_scale"], op.attrs["sampling_ratio"]
    out = np.zeros((rois.shape[0], t.shape[1], oh, ow), t.dtype)
    for k in range(rois.shape[0]):
        x1, y1, x2, y2 = (float(v) * scale for v in rois[k])
        rw, rh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        bh, bw = rh / oh, rw / ow
        gh = ratio if ratio > 0 else int(math.ceil(rh / oh))
        gw = ratio if ratio > 0 else int(math.ceil(rw / ow))
        img = t[batch[k]]
        for ph in range(oh):
            for pw in range(ow):
                acc = np.zeros(t.shape[1], t.dtype)
                for iy in range(gh):
                    y = y1 + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        acc += _bilinear(img, y, x1 + pw * bw + (ix + 0.5) * bw / gw)
                out[k, :, ph, pw] = acc / max(gh * gw, 1)
    return [out]
