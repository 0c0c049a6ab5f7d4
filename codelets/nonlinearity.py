"""NonLinearityGrad: the gradient of an activation function in one vertex (popnn NonLinearityGrad1D).

inGrad = outGrad x f'(t), element by element, where t is the forward output for the functions
whose derivative follows from it (relu, sigmoid, tanh, clip: poplibs' `nonlinearity_derivative`
reads `out`) and the forward input for those whose derivative needs it (hard_sigmoid, swish, gelu:
PopART's GeluGradOpx passes the forward input as popnn's `out`).
One vertex instead of the comparison, cast and multiply (or subtract and multiply) ops the
derivative would otherwise take: what PopART's *GradOpx do with popnn's NonLinearityGrad vertices
or a fused popops expression.

    relu          f' = 1 if y > 0 else 0
    clip(lo, hi)  f' = 1 if lo < y < hi else 0 (from the output: the same mask as PyTorch's
                  hardtanh_backward, which passes the gradient where lo < x < hi)
    sigmoid       f' = y (1 - y)
    tanh          f' = 1 - y y
    hard_sigmoid  f' = alpha if 0 < alpha x + beta < 1 else 0 (from the input)
    swish         f' = s (1 + x (1 - s)), s = sigmoid(x) (from the input)
    gelu          f' = (1 + u + (1 - u u) x k (1 + 3 c x x)) / 2, u = tanh(k x (1 + c x x)),
                  k = sqrt(2 / pi), c = 0.044715: the derivative of the tanh approximation that the
                  forward gelu computes (popnn NonLinearity.hpp gelu_gradient; from the input)

float32 is computed in float32; float16 is widened, computed in float32 and rounded once.
Cost: popnnCycleEstimators.cpp NonLinearityGrad1D (a MultiVertex: 9 supervisor cycles plus 6 x a
worker's 3 + 5 + 2 + 3 + 3 + 3 + 1 set-up cycles, 4 + (vectors - 1) x op + 1 for its vectors,
float 2 + 2 (+ op + 1 for an odd element), half 2 + 2 (+ op + 2) + 2 (+ op + 4)), with the op
cycles of getNonLinearityOpCycles (popnn PerformanceEstimation.hpp: relu 1, sigmoid 5 / 2,
tanh 5 / 1 for float / half). clip and hard_sigmoid are two compares and a select (derived: 2);
swish is the sigmoid plus its multiplies (derived: sigmoid + 2); gelu is getNonLinearityOpCycles'
GELU (10 / 5, the same table's forward gelu cycles: poplibs has one table for both).
"""
from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field
from ipu.half import load, store

from ._costs import ceil_div, type_key, vector_width


class NonLinearityGradCode(IntEnum):
    RELU = 0
    SIGMOID = 1
    TANH = 2
    CLIP = 3
    HARD_SIGMOID = 4
    SWISH = 5
    GELU = 6


GRAD_OPS = {m.name.lower(): int(m) for m in NonLinearityGradCode}
GRAD_NAMES = {v: k for k, v in GRAD_OPS.items()}
# whether the op reads the forward input (else the forward output)
READS_INPUT = {"hard_sigmoid", "swish", "gelu"}

_OP_CYCLES = {("relu", "float"): 1, ("relu", "half"): 1, ("sigmoid", "float"): 5, ("sigmoid", "half"): 2,
              ("tanh", "float"): 5, ("tanh", "half"): 1, ("clip", "float"): 2, ("clip", "half"): 2,
              ("hard_sigmoid", "float"): 2, ("hard_sigmoid", "half"): 2, ("swish", "float"): 7,
              ("swish", "half"): 4, ("gelu", "float"): 10, ("gelu", "half"): 5}
_GELU_K = np.float32(0.7978845608028654)  # sqrt(2 / pi)
_GELU_C = np.float32(0.044715)


@njit(cache=True, inline="always")
def _derivative(op, t, p0, p1):
    one = np.float32(1.0)
    zero = np.float32(0.0)
    if op == 0:  # relu
        return one if t > zero else zero
    if op == 1:  # sigmoid
        return t * (one - t)
    if op == 2:  # tanh
        return one - t * t
    if op == 3:  # clip
        return one if (t > p0) and (t < p1) else zero
    if op == 4:  # hard sigmoid
        u = p0 * t + p1
        return p0 if (u > zero) and (u < one) else zero
    if op == 6:  # gelu (tanh approximation): the tanh in float64, rounded once (as the reference)
        x2 = t * t
        u = np.float32(math.tanh(np.float64(_GELU_K * t * (one + _GELU_C * x2))))
        dv = one + u + (one - u * u) * (t * _GELU_K * (one + np.float32(3.0) * _GELU_C * x2))
        return np.float32(0.5) * dv
    # swish: the sigmoid in float64, rounded once (as the reference, whatever the host's float32 exp)
    s = np.float32(1.0 / (1.0 + math.exp(-np.float64(t))))
    return s * (one + t * (one - s))


@njit(cache=True)
def _grad_kernel(views, off, cnt, fp, ip):
    g = views[F.outGrad]
    t = views[F.out]
    o = views[F.inGrad]
    for v in range(off.shape[0]):
        op = ip[v, IP.op]
        p0 = np.float32(fp[v, FP.p0])
        p1 = np.float32(fp[v, FP.p1])
        for i in range(cnt[v, F.inGrad]):
            d = _derivative(op, load(t, off[v, F.out] + i), p0, p1)
            store(o, off[v, F.inGrad] + i, load(g, off[v, F.outGrad] + i) * d)


def nonlinearity_grad_reference(g, t, op: str, p0: float = 0.0, p1: float = 0.0):
    """NumPy: the same arithmetic (float32, rounded once for float16)."""
    dt = np.asarray(g).dtype
    g32, t32 = np.asarray(g, np.float32), np.asarray(t, np.float32)
    one, zero = np.float32(1), np.float32(0)
    a, b = np.float32(p0), np.float32(p1)
    with np.errstate(over="ignore"):
        if op == "relu":
            d = np.where(t32 > zero, one, zero)
        elif op == "sigmoid":
            d = t32 * (one - t32)
        elif op == "tanh":
            d = one - t32 * t32
        elif op == "clip":
            d = np.where((t32 > a) & (t32 < b), one, zero)
        elif op == "hard_sigmoid":
            u = a * t32 + b
            d = np.where((u > zero) & (u < one), a, zero)
        elif op == "swish":
            s = (1.0 / (1.0 + np.exp(-t32.astype(np.float64)))).astype(np.float32)
            d = s * (one + t32 * (one - s))
        elif op == "gelu":
            x2 = t32 * t32
            u = np.tanh((_GELU_K * t32 * (one + _GELU_C * x2)).astype(np.float64)).astype(np.float32)
            dv = one + u + (one - u * u) * (t32 * _GELU_K * (one + np.float32(3.0) * _GELU_C * x2))
            d = np.float32(0.5) * dv
        else:
            raise ValueError(f"no non-linearity gradient {op!r}")
    return (g32 * d.astype(np.float32)).astype(dt)


def nonlinearity_grad_cycles(n, op: str, t, workers: int = 6):
    """popnn NonLinearityGrad1D tile cycles (see the module docstring)."""
    tk = type_key(t)
    op_c = _OP_CYCLES[(op, tk)]
    vw = vector_width(t)
    n = np.asarray(n, np.int64)
    vectors = n // vw
    rem = n % vw
    vpw = ceil_div(vectors, workers)
    worker = 3 + 5 + 2 + 3 + 3 + 3 + 1 + np.where(vpw > 0, 4 + (vpw - 1) * op_c + 1, 0)
    if tk == "float":
        worker = worker + 2 + 2 + np.where(rem > 0, op_c + 1, 0)
    else:
        worker = worker + 2 + 2 + np.where(rem & 2, op_c + 2, 0) + 2 + np.where(rem & 1, op_c + 4, 0)
    return 9 + workers * worker


@ipu.register
class NonLinearityGrad(Codelet):
    """inGrad = outGrad x f'(t) for the op `op` (GRAD_OPS); fp p0, p1: clip's bounds, hard sigmoid's
    alpha and beta (unused by the others)."""

    name = "NonLinearityGrad"
    fields = (Field("outGrad", IN), Field("out", IN), Field("inGrad", OUT))
    int_params = ("op",)
    template_params = ("op",)  # popnn NonLinearityGrad1D<FPType, NonLinearityType>: one instantiation each
    float_params = ("p0", "p1")
    supervisor = True
    allowed_types = ((ipu.FLOAT32, ipu.FLOAT16),) * 3
    poplibs_vertices = ("popnn::NonLinearityGrad1D",)

    def kernel(self):
        return _grad_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if len(set(types)) != 1:
            raise TypeError(f"NonLinearityGrad: outGrad, out and inGrad must share a type, not "
                            f"{[x.name for x in types]}")
        if np.any((t.count.outGrad != t.count.inGrad) | (t.count.out != t.count.inGrad)):
            raise ValueError("NonLinearityGrad: outGrad, out and inGrad must have the same number of elements")
        bad = ~np.isin(t.op, list(GRAD_NAMES))
        if np.any(bad):
            raise ValueError(f"NonLinearityGrad: op code {int(t.op[bad][0])} is not one of {GRAD_OPS}")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        out = np.zeros(cnt.shape[0], np.int64)
        for code in np.unique(t.op):
            sel = t.op == code
            out[sel] = nonlinearity_grad_cycles(t.count.inGrad[sel], GRAD_NAMES[int(code)], t.type.inGrad,
                                                target.worker_contexts)
        return out

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        op = params["op"].lower()
        if op not in GRAD_OPS:
            raise KeyError(f"NonLinearityGrad op {op!r} (one of {', '.join(GRAD_OPS)})")
        return ipu.Vertex({"outGrad": t, "out": t, "inGrad": t}, {"outGrad": n, "out": n, "inGrad": n},
                          {"op": GRAD_OPS[op], "p0": 0.0, "p1": 0.0})

    def code_bytes(self, types):
        # popnn NonLinearityGrad1D assembly (a worker loop per non-linearity and the supervisor stub):
        # ~0.5 KiB (assumption, the order of popops' UnaryOp1D)
        return 512

    def state_bytes(self):
        # NonLinearityGrad1D's fields: three ONE_PTR vectors (4 B each) and the unsigned short n (2 B,
        # 4 aligned) (popnn codelets/NonLinearityGrad1D.cpp); p0 / p1 are our clip / hard-sigmoid
        # parameters (4 B each)
        return 3 * 4 + 4 + 8

    def reference(self, g, t, op, p0=0.0, p1=0.0):
        name = op if isinstance(op, str) else GRAD_NAMES[int(op)]
        return nonlinearity_grad_reference(g, t, name, p0, p1)


F, FP, IP = NonLinearityGrad.F, NonLinearityGrad.FP, NonLinearityGrad.IP  # the kernel's columns, by name
