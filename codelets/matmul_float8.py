"""The float8 AMP block: out[m, n] = (a[m, k] @ b[k, n]) x 2**log2_scale, a and b float8 (either
format each), out the float32 partials the matmul plan reduces (`MatMulReducePartials`, which
rounds to the float16 result).

The counterpart of poplin's quarter ConvPartial1x1Out on the Mk2 Bow-era IPU (IPU21 with float8,
as in the C600 card): the AMP takes float8 activations and weights with their metadata scale.
Numerics: products of two float8 values are exact in float32 (at most 4 x 4 significant bits)
and the power-of-two scale is exact, so the kernel decodes both blocks through the 256-entry
tables, multiplies in float32 (BLAS) and scales. PopART asks for half partials on this path; we
keep float32 partials like every other matmul here (at least as accurate; noted in the docs).

Cost: the float8 AMP does twice the half AMP's multiply-accumulates per cycle: Graphcore quotes
the C600 (Mk2 IPU with FP8 support) at 560 TFLOPS float8 against 280 TFLOPS float16 (C600
product brief, 2022; the C600 datasheet describes the card), i.e. 256 FLOP/cycle/tile against
128. We model it as poplin's half 1x1 AMP vertex (`matmul_block_cycles`) with 32 input channels
per group instead of 16 (`amp_geometry(..., float8=True)`): the same 4 cycles per output position
and weight-load cycles (32 one-byte weights per conv unit), half partials' zeroing. Plus 6
cycles to read the scale and set the metadata register, and the range check when asked.
"""
from __future__ import annotations

import numpy as np
from numba import njit

import ipu
from ipu import IN, INOUT, Codelet, Field

from ._sgemm import gemm_rows, gemm_scratch
from .cast_float8 import SCALE_SETUP_CYCLES, decode_table, effective_scale
from .matmul import matmul_block_cycles

_FLOAT8 = (ipu.FLOAT8_143, ipu.FLOAT8_152)


@njit(cache=True)
def _decode_block(view, table, start, count):
    codes = view[start:start + count].view(np.uint8)
    out = np.empty(count, np.float32)
    for i in range(count):
        out[i] = table[codes[i]]
    return out


@njit(cache=True)
def _matmul_float8_kernel(views, off, cnt, fp, ip):
    av = views[F.a]
    bv = views[F.b]
    sv = views[F.log2_scale]
    ov = views[F.out]
    ta = decode_table(av)
    tb = decode_table(bv)
    scratch = gemm_scratch()
    for v in range(off.shape[0]):
        m = ip[v, IP.m]
        k = ip[v, IP.k]
        n = ip[v, IP.n]
        if m == 0 or n == 0:
            continue
        s = effective_scale(np.int64(sv[off[v, F.log2_scale]]), ip[v, IP.check_range] != 0)
        dst = ov[off[v, F.out]:off[v, F.out] + m * n].reshape(m, n)
        if k == 0:
            dst[:, :] = 0.0
            continue
        a = _decode_block(av, ta, off[v, F.a], m * k)
        b = _decode_block(bv, tb, off[v, F.b], k * n)
        gemm_rows(a, 0, b, 0, ov, off[v, F.out], m, k, n, False, scratch)
        f = np.float32(2.0 ** s)  # exact: s in [-32, 32)
        for i in range(m):
            for j in range(n):
                dst[i, j] *= f


@ipu.register
class MatMulBlockPow2Scaled(Codelet):
    """out[m, n] = (a[m, k] @ b[k, n]) x 2**log2_scale; a, b float8, out float32 partials;
    params m, k, n, check_range."""

    name = "MatMulBlockPow2Scaled"
    fields = (Field("a", IN), Field("b", IN), Field("log2_scale", IN), Field("out", INOUT))
    int_params = ("m", "k", "n", "check_range")
    supervisor = True
    takes_float8 = True
    allowed_types = (_FLOAT8, _FLOAT8, (ipu.INT32,), (ipu.FLOAT32,))

    def kernel(self):
        return _matmul_float8_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        m, k, n = t.m, t.k, t.n
        if np.any(m < 0) or np.any(k < 0) or np.any(n < 0):
            raise ValueError("MatMulBlockPow2Scaled: m, k and n must be >= 0")
        c = t.count
        bad = (c.a != m * k) | (c.b != k * n) | (c.out != m * n) | (c.log2_scale != 1)
        if np.any(bad):
            v = int(np.flatnonzero(bad)[0])
            raise ValueError(f"MatMulBlockPow2Scaled: vertex {v} has m, k, n = {m[v]}, {k[v]}, {n[v]} but its "
                             f"fields hold a {c.a[v]}, b {c.b[v]}, log2_scale {c.log2_scale[v]}, out {c.out[v]} "
                             "elements (need m*k, k*n, 1, m*n)")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        amp = matmul_block_cycles(t.m, t.k, t.n, False, False, target, float8=True)
        return amp + SCALE_SETUP_CYCLES

    def code_bytes(self, types):
        return 1536  # as MatMulBlock: the ConvPartial1x1Out supervisor + worker code (assumption)

    def state_bytes(self):
        return super().state_bytes() + 36  # the per-worker worklists, as MatMulBlock

    def reference(self, a_codes, b_codes, log2_scale):
        from .float8 import host_decode
        a = host_decode(np.asarray(a_codes).view(np.uint8), np.asarray(a_codes).dtype)
        b = host_decode(np.asarray(b_codes).view(np.uint8), np.asarray(b_codes).dtype)
        return (a @ b * 2.0 ** log2_scale).astype(np.float32)


F, IP = MatMulBlockPow2Scaled.F, MatMulBlockPow2Scaled.IP  # the kernel's columns, by name
