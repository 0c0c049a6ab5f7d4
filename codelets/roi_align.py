"""RoiAlign and RoiAlignGrad vertices: average-pooled bilinear samples of regions of interest.

The arithmetic is Mask R-CNN's RoIAlign as PopART's RoiAlign op computes it (PopART checks it
against torchvision.ops.RoIAlign with aligned=False): a region (x1, y1, x2, y2) is scaled by
`spatial_scale`, at least 1 x 1, cut into PH x PW bins; each bin averages a grid of
`sampling_ratio` x `sampling_ratio` bilinear samples (ceil(region / bins) per axis when the ratio is
0) taken at the centres of the grid's cells; a sample more than one pixel outside the image counts
as 0, one inside the border band is clamped to the edge. A region whose batch index is outside
[0, N) gives zeros (and no gradient).

Layout on a tile (the column blocks of lowering/columns.py): a vertex owns `width` consecutive
channels of the table `in` of (N * H * W) rows x width columns (element (r, c) at r * width + c),
the whole `rois` (K x 4) and `batch` (K,) arrays, and the block `out` of (K * PH * PW) rows x width.
RoiAlignGrad has the same fields with `out` the incoming gradient and `in` the input gradient it
writes (zeroed first, then accumulated; float32 accumulation for half data).

Cost model: poplibs has no RoiAlign vertex, so there is no estimator to follow; the cycles are a
derivation from the loop structure (worker instruction counts, one per cycle): per region 30 to
load and scale its corners; per bin 6 + 4 per channel (init and average + store); per sample 24 to
form the coordinates, the four neighbour offsets and the weights, then 8 per channel (4 loads, 4
multiply-adds). The grad vertex zeroes its block (one 64-bit store per 2 floats / 4 halves) and
spends 12 per channel per sample (4 read-modify-writes). With sampling_ratio 0 the samples per bin
depend on the regions at run time; the estimate uses ceil(H / PH) x ceil(W / PW), a region the
size of the image.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field, load, store

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)
_INDEX = (ipu.INT32, ipu.UINT32)


@njit(cache=True, inline="always")
def _grid(extent, bins, sr):
    return sr if sr > 0 else int(math.ceil(extent / bins))


@njit(cache=True, inline="always")
def _region(rois, r, scale, PH, PW, SR):
    """(x1, y1, bin height, bin width, samples down, samples across, samples per bin) of the region
    whose corners start at element r of `rois`."""
    x1 = load(rois, r) * scale
    y1 = load(rois, r + 1) * scale
    rw = max(load(rois, r + 2) * scale - x1, 1.0)
    rh = max(load(rois, r + 3) * scale - y1, 1.0)
    gh = _grid(rh, PH, SR)
    gw = _grid(rw, PW, SR)
    return x1, y1, rh / PH, rw / PW, gh, gw, max(gh * gw, 1)


@njit(cache=True, inline="always")
def _corners(y, x, H, W):
    """(valid, y_low, x_low, y_high, x_high, w_ll, w_lh, w_hl, w_hh) of a bilinear sample."""
    if y < -1.0 or y > H or x < -1.0 or x > W:
        return False, 0, 0, 0, 0, 0.0, 0.0, 0.0, 0.0
    if y <= 0.0:
        y = 0.0
    if x <= 0.0:
        x = 0.0
    yl = int(y)
    xl = int(x)
    if yl >= H - 1:
        yl = H - 1
        yh = H - 1
        y = float(yl)
    else:
        yh = yl + 1
    if xl >= W - 1:
        xl = W - 1
        xh = W - 1
        x = float(xl)
    else:
        xh = xl + 1
    ly = y - yl
    lx = x - xl
    hy = 1.0 - ly
    hx = 1.0 - lx
    return True, yl, xl, yh, xh, hy * hx, hy * lx, ly * hx, ly * lx


@njit(cache=True)
def _roi_align(views, off, cnt, fp, ip):
    data = views[F.in_]
    rois = views[F.rois]
    batch = views[F.batch]
    out = views[F.out]
    for v in range(off.shape[0]):
        x0, r0, b0, o0 = off[v, F.in_], off[v, F.rois], off[v, F.batch], off[v, F.out]
        N, H, W, PH, PW = ip[v, IP.N], ip[v, IP.H], ip[v, IP.W], ip[v, IP.PH], ip[v, IP.PW]
        SR, width = ip[v, IP.sampling_ratio], ip[v, IP.width]
        scale = fp[v, FP.spatial_scale]
        K = cnt[v, F.batch]
        acc = np.zeros(max(width, 1), np.float32)
        for k in range(K):
            b = int(batch[b0 + k])
            x1, y1, bh, bw, gh, gw, count = _region(rois, r0 + 4 * k, scale, PH, PW, SR)
            for ph in range(PH):
                for pw in range(PW):
                    acc[:] = 0.0
                    if 0 <= b < N:
                        for iy in range(gh):
                            y = y1 + ph * bh + (iy + 0.5) * bh / gh
                            for ix in range(gw):
                                x = x1 + pw * bw + (ix + 0.5) * bw / gw
                                ok, yl, xl, yh, xh, w1, w2, w3, w4 = _corners(y, x, H, W)
                                if not ok:
                                    continue
                                base = b * H * W
                                p1 = x0 + (base + yl * W + xl) * width
                                p2 = x0 + (base + yl * W + xh) * width
                                p3 = x0 + (base + yh * W + xl) * width
                                p4 = x0 + (base + yh * W + xh) * width
                                for c in range(width):
                                    acc[c] += (w1 * load(data, p1 + c) + w2 * load(data, p2 + c)
                                               + w3 * load(data, p3 + c) + w4 * load(data, p4 + c))
                    o = o0 + ((k * PH + ph) * PW + pw) * width
                    for c in range(width):
                        store(out, o + c, acc[c] / count)


@njit(cache=True)
def _roi_align_grad(views, off, cnt, fp, ip):
    dx = views[F.in_]
    rois = views[F.rois]
    batch = views[F.batch]
    dy = views[F.out]
    for v in range(off.shape[0]):
        x0, r0, b0, o0 = off[v, F.in_], off[v, F.rois], off[v, F.batch], off[v, F.out]
        N, H, W, PH, PW = ip[v, IP.N], ip[v, IP.H], ip[v, IP.W], ip[v, IP.PH], ip[v, IP.PW]
        SR, width = ip[v, IP.sampling_ratio], ip[v, IP.width]
        scale = fp[v, FP.spatial_scale]
        K = cnt[v, F.batch]
        acc = np.zeros(cnt[v, F.in_], np.float32)
        for k in range(K):
            b = int(batch[b0 + k])
            if b < 0 or b >= N:
                continue
            x1, y1, bh, bw, gh, gw, count = _region(rois, r0 + 4 * k, scale, PH, PW, SR)
            for ph in range(PH):
                for pw in range(PW):
                    o = o0 + ((k * PH + ph) * PW + pw) * width
                    for iy in range(gh):
                        y = y1 + ph * bh + (iy + 0.5) * bh / gh
                        for ix in range(gw):
                            x = x1 + pw * bw + (ix + 0.5) * bw / gw
                            ok, yl, xl, yh, xh, w1, w2, w3, w4 = _corners(y, x, H, W)
                            if not ok:
                                continue
                            base = b * H * W
                            p1 = (base + yl * W + xl) * width
                            p2 = (base + yl * W + xh) * width
                            p3 = (base + yh * W + xl) * width
                            p4 = (base + yh * W + xh) * width
                            for c in range(width):
                                g = load(dy, o + c) / count
                                acc[p1 + c] += w1 * g
                                acc[p2 + c] += w2 * g
                                acc[p3 + c] += w3 * g
                                acc[p4 + c] += w4 * g
        for i in range(acc.shape[0]):
            store(dx, x0 + i, acc[i])


def samples_per_bin(ip) -> np.ndarray:
    """The static estimate of grid samples per bin (see the module docstring)."""
    sr = ip[:, IP.sampling_ratio]
    adaptive = (-(-ip[:, IP.H] // np.maximum(ip[:, IP.PH], 1))) * (-(-ip[:, IP.W] // np.maximum(ip[:, IP.PW], 1)))
    return np.where(sr > 0, sr * sr, adaptive)


def roi_align_cycles(cnt, ip) -> np.ndarray:
    """Derivation (module docstring): 20 + K x (30 + PH PW x (6 + 4 width + S x (24 + 8 width)))."""
    K = cnt[:, F.batch].astype(np.int64)
    width = ip[:, IP.width]
    bins = ip[:, IP.PH] * ip[:, IP.PW]
    S = samples_per_bin(ip)
    return 20 + K * (30 + bins * (6 + 4 * width + S * (24 + 8 * width)))


def roi_align_grad_cycles(cnt, ip, t) -> np.ndarray:
    """Derivation (module docstring): zeroing the block in 64-bit stores, then
    K x (30 + PH PW x (6 + S x (24 + 12 width)))."""
    K = cnt[:, F.batch].astype(np.int64)
    width = ip[:, IP.width]
    bins = ip[:, IP.PH] * ip[:, IP.PW]
    S = samples_per_bin(ip)
    zero = -(-cnt[:, F.in_].astype(np.int64) // max(1, 8 // t.itemsize))
    return 20 + zero + K * (30 + bins * (6 + S * (24 + 12 * width)))


def reference(x, rois, batch_index, output_size, spatial_scale, sampling_ratio):
    """NumPy RoiAlign of x (N, C, H, W): (K, C, PH, PW), in float64."""
    x = np.asarray(x, np.float64)
    N, C, H, W = x.shape
    PH, PW = output_size
    rois = np.asarray(rois, np.float64)
    K = rois.shape[0]
    out = np.zeros((K, C, PH, PW))
    for k in range(K):
        b = int(batch_index[k])
        if not 0 <= b < N:
            continue
        x1, y1, x2, y2 = rois[k] * spatial_scale
        rw, rh = max(x2 - x1, 1.0), max(y2 - y1, 1.0)
        bh, bw = rh / PH, rw / PW
        gh = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rh / PH))
        gw = sampling_ratio if sampling_ratio > 0 else int(math.ceil(rw / PW))
        for ph in range(PH):
            for pw in range(PW):
                acc = np.zeros(C)
                for iy in range(gh):
                    y = y1 + ph * bh + (iy + 0.5) * bh / gh
                    for ix in range(gw):
                        xx = x1 + pw * bw + (ix + 0.5) * bw / gw
                        ok, yl, xl, yh, xh, w1, w2, w3, w4 = _corners.py_func(y, xx, H, W)
                        if ok:
                            acc += (w1 * x[b, :, yl, xl] + w2 * x[b, :, yl, xh] + w3 * x[b, :, yh, xl]
                                    + w4 * x[b, :, yh, xh])
                out[k, :, ph, pw] = acc / max(gh * gw, 1)
    return out


class _RoiAlignBase(Codelet):
    int_params = ("N", "H", "W", "PH", "PW", "sampling_ratio", "width")
    float_params = ("spatial_scale",)
    allowed_types = (_FLOATS, _FLOATS, _INDEX, _FLOATS)

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.in_ != t.type.out:
            raise TypeError(f"{self.name}: the image and the output are {t.type.in_.name} and {t.type.out.name}")
        if np.any(t.count.in_ != t.N * t.H * t.W * t.width):
            raise ValueError(f"{self.name}: the image block holds N x H x W rows of `width` channels")
        if np.any(t.count.rois != 4 * t.count.batch):
            raise ValueError(f"{self.name}: rois hold 4 coordinates per batch index")
        if np.any(t.count.out != t.count.batch * t.PH * t.PW * t.width):
            raise ValueError(f"{self.name}: the output block holds K x PH x PW rows of `width` channels")

    def code_bytes(self, types):
        return 1024  # assumption: a worker loop nest with a bilinear sampler (~1 KiB of code)


@ipu.register
class RoiAlign(_RoiAlignBase):
    name = "RoiAlign"
    fields = (Field("in", IN), Field("rois", IN), Field("batch", IN), Field("out", OUT))

    def kernel(self):
        return _roi_align

    def cycles(self, types, cnt, fp, ip, target):
        return roi_align_cycles(cnt, ip)

    def reference(self, x, rois, batch_index, output_size, spatial_scale, sampling_ratio):
        return reference(x, rois, batch_index, output_size, spatial_scale, sampling_ratio)


@ipu.register
class RoiAlignGrad(_RoiAlignBase):
    name = "RoiAlignGrad"
    fields = (Field("in", OUT), Field("rois", IN), Field("batch", IN), Field("out", IN))

    def kernel(self):
        return _roi_align_grad

    def cycles(self, types, cnt, fp, ip, target):
        return roi_align_grad_cycles(cnt, ip, self.table(types, cnt).type.in_)

    def reference(self, dy, x_shape, rois, batch_index, output_size, spatial_scale, sampling_ratio):
        """The input gradient by finite linearity: RoiAlign is linear in x, so each input element's
        gradient is <dy, RoiAlign(e_i)>; computed through the forward reference's weights."""
        x_shape = tuple(x_shape)
        dy = np.asarray(dy, np.float64)
        dx = np.zeros(x_shape)
        for idx in np.ndindex(*x_shape):
            e = np.zeros(x_shape)
            e[idx] = 1.0
            dx[idx] = np.sum(reference(e, rois, batch_index, output_size, spatial_scale, sampling_ratio) * dy)
        return dx


# the columns of both vertices' tables, by name, for the kernels and cost models (the gradient's
# fields have the forward's names, in the forward's order)
F, FP, IP = RoiAlign.F, RoiAlign.FP, RoiAlign.IP
assert list(RoiAlignGrad.F) == list(F)
