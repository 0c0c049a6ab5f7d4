"""Reduce: out[j] = reduction of k input elements, for each of the vertex's outputs (popops
reduction vertices).

Fields `in` (IN) and `out` (OUT); int parameters:

- `op`: a `ReduceOpCode` (names in `REDUCE_OPS`: sum, max, min, prod, sum_squares, abs_sum, log_sum_exp,
  logical_and, logical_or);
- `inner`: k, the number of elements reduced into each output;
- `layout`: how `in` (count = out count x k) is laid out:
  * `ROWS` (0): `in` is [n_out, k], row-major; each output reduces a contiguous row of k
    elements (reduce over the last axis; poplibs ContinuousReduce / single-input reduce);
  * `PARTIALS` (1): `in` is [k, n_out]; output j reduces in[0, j], in[1, j], ... in[k-1, j]
    (sum k partial results, each a contiguous run of n_out; poplibs StridedReduce).
  With one output the two layouts are the same.

Types: float32 or float16 in, with float32 or float16 out (float16 partials accumulate in
float32, and a float32 out keeps them as partials); int32 in and out (sum, max, min, prod;
wrapping); bool in and out (logical_and, logical_or, max = any, min = all).

Accumulation (floats): everything is accumulated in float32 and rounded once to out's type.
ROWS: element i of a row goes to accumulator lane i % 8 (8 interleaved float32 accumulators,
like the IPU's vector accumulators), each lane adds its elements in order, and the lanes are then
combined in order lane 0 + lane 1 + ... + lane 7. PARTIALS: each output adds its k partials in
order. prod works the same way with products. max / min propagate NaN. log_sum_exp is
m + log(sum(exp(x - m))) with m the maximum (m itself when m is infinite or NaN). k = 0 gives the
op's identity (0, 1, -inf, +inf, True, False).

Cost: poplibs SDK 3.x lib/popops/reduction/CycleEstimationFunctions.cpp (see `reduce_cycles`).
Reduce vertices are worker vertices: up to 6 run at once on a tile; cycles are thread cycles.
"""
from __future__ import annotations

import math
from enum import IntEnum

import numpy as np
from numba import carray, njit, types
from numba.extending import overload

import ipu
from ipu import IN, OUT, Codelet, Field

from ._borrow import borrow, piece
from ._by_address import by_address
from ._costs import ceil_div
from ._kernels import from_f32, half_scratch, widen_into


class ReduceOpCode(IntEnum):
    """The `op` parameter (the kernels compare with the members; Numba folds them to constants)."""
    SUM = 0
    MAX = 1
    MIN = 2
    PROD = 3
    SUM_SQUARES = 4
    ABS_SUM = 5
    LOG_SUM_EXP = 6
    LOGICAL_AND = 7
    LOGICAL_OR = 8


R = ReduceOpCode
REDUCE_OPS = {m.name.lower(): int(m) for m in ReduceOpCode}  # op name -> code
REDUCE_NAMES = {v: k for k, v in REDUCE_OPS.items()}
ROWS, PARTIALS = 0, 1
LANES = 8

_F0 = np.float32(0.0)
_F1 = np.float32(1.0)
_FINF = np.float32(np.inf)
# Constant arguments of the helpers below, as NumPy integers: a Python int literal passed to a
# Numba function compiles a version of it for that value (Literal[int]), a compile each. _lane_sum
# keeps its modes literal on purpose: a version per mode sums 20% faster (k = 37)
_ZERO, _ONE = np.int64(0), np.int64(1)

_INT_OPS = {"sum", "max", "min", "prod"}
_BOOL_OPS = {"logical_and", "logical_or", "max", "min"}

# ------------------------------------------------------------------------------------------------
# kernels


@njit(cache=True, error_model="numpy")
def _lane_sum(x, base, k, lanes, mode):
    """Sum (mode 0), sum of squares (1) or sum of |x| (2) of x[base:base+k] in 8 float32 lanes."""
    for j in range(LANES):
        lanes[j] = _F0
    m = k - k % LANES
    if mode == 0:
        for i in range(0, m, LANES):
            for j in range(LANES):
                lanes[j] += x[base + i + j]
        for i in range(m, k):
            lanes[i - m] += x[base + i]
    elif mode == 1:
        for i in range(0, m, LANES):
            for j in range(LANES):
                v = x[base + i + j]
                lanes[j] += v * v
        for i in range(m, k):
            v = x[base + i]
            lanes[i - m] += v * v
    else:
        for i in range(0, m, LANES):
            for j in range(LANES):
                lanes[j] += abs(x[base + i + j])
        for i in range(m, k):
            lanes[i - m] += abs(x[base + i])
    acc = lanes[0]
    for j in range(1, LANES):
        acc += lanes[j]
    return acc


@njit(cache=True, error_model="numpy")
def _lane_prod(x, base, k, lanes):
    for j in range(LANES):
        lanes[j] = _F1
    m = k - k % LANES
    for i in range(0, m, LANES):
        for j in range(LANES):
            lanes[j] *= x[base + i + j]
    for i in range(m, k):
        lanes[i - m] *= x[base + i]
    acc = lanes[0]
    for j in range(1, LANES):
        acc *= lanes[j]
    return acc


@njit(cache=True, error_model="numpy")
def _max_run(x, base, k, step):
    """NaN-propagating maximum of x[base], x[base + step], ... (k elements); -inf if k == 0."""
    acc = -_FINF
    for i in range(k):
        v = x[base + i * step]
        if v > acc or v != v:
            acc = v
            if v != v:
                break
    return acc


@njit(cache=True, error_model="numpy")
def _min_run(x, base, k, step):
    acc = _FINF
    for i in range(k):
        v = x[base + i * step]
        if v < acc or v != v:
            acc = v
            if v != v:
                break
    return acc


def _reduce_float(op, layout, xp, rp, n, k, lanesp):
    """Reduce float32 x (n outputs x k) into float32 r[:n] (lanes: LANES float32 of scratch);
    compiled once, called by address (_reduce_f32)."""
    x = carray(xp, n * k)
    r = carray(rp, n)
    lanes = carray(lanesp, LANES)
    if layout == ROWS or n == 1:
        for j in range(n):
            base = j * k
            if op == R.SUM:
                r[j] = _lane_sum(x, base, k, lanes, 0)
            elif op == R.SUM_SQUARES:
                r[j] = _lane_sum(x, base, k, lanes, 1)
            elif op == R.ABS_SUM:
                r[j] = _lane_sum(x, base, k, lanes, 2)
            elif op == R.PROD:
                r[j] = _lane_prod(x, base, k, lanes)
            elif op == R.MAX:
                r[j] = _max_run(x, base, k, _ONE)
            elif op == R.MIN:
                r[j] = _min_run(x, base, k, _ONE)
            elif op == R.LOG_SUM_EXP:
                m = _max_run(x, base, k, _ONE)
                if m == _FINF or m == -_FINF or m != m:
                    r[j] = m
                else:
                    t = np.empty(k, np.float32)
                    for i in range(k):
                        t[i] = math.exp(x[base + i] - m)
                    r[j] = m + math.log(_lane_sum(t, _ZERO, k, lanes, 0))
        return
    # PARTIALS: in is [k, n]; add the k partials of each output in order
    if op == R.MAX or op == R.MIN or op == R.LOG_SUM_EXP:
        for j in range(n):
            if op == R.MIN:
                r[j] = _min_run(x, j, k, n)
            else:
                r[j] = _max_run(x, j, k, n)
        if op == R.LOG_SUM_EXP:
            s = np.zeros(n, np.float32)
            for p in range(k):
                for j in range(n):
                    s[j] += math.exp(x[p * n + j] - r[j])
            for j in range(n):
                m = r[j]
                if not (m == _FINF or m == -_FINF or m != m):
                    r[j] = m + math.log(s[j])
        return
    init = _F1 if op == R.PROD else _F0
    for j in range(n):
        r[j] = init
    for p in range(k):
        b = p * n
        if op == R.SUM:
            for j in range(n):
                r[j] += x[b + j]
        elif op == R.SUM_SQUARES:
            for j in range(n):
                v = x[b + j]
                r[j] += v * v
        elif op == R.ABS_SUM:
            for j in range(n):
                r[j] += abs(x[b + j])
        elif op == R.PROD:
            for j in range(n):
                r[j] *= x[b + j]


@njit(cache=True)
def _reduce_int(op, layout, x, o, n, k):
    """int32: wrapping sum / prod (accumulated in int64, whose low 32 bits are the same), max, min."""
    rows = layout == ROWS or n == 1
    for j in range(n):
        if op == R.SUM or op == R.PROD:
            acc = np.int64(0) if op == R.SUM else np.int64(1)
        elif op == R.MAX:
            acc = np.int64(-2 ** 31)
        else:
            acc = np.int64(2 ** 31 - 1)
        for i in range(k):
            v = np.int64(x[j * k + i] if rows else x[i * n + j])
            if op == R.SUM:
                acc += v
            elif op == R.PROD:
                acc *= v
            elif op == R.MAX:
                acc = max(acc, v)
            else:
                acc = min(acc, v)
        o[j] = acc


@njit(cache=True)
def _reduce_bool(op, layout, x, o, n, k):
    """bool: logical_and / min = all, logical_or / max = any."""
    rows = layout == ROWS or n == 1
    for j in range(n):
        want_any = op == R.LOGICAL_OR or op == R.MAX
        acc = not want_any
        for i in range(k):
            v = x[j * k + i] if rows else x[i * n + j]
            if want_any and v:
                acc = True
                break
            if not want_any and not v:
                acc = False
                break
        o[j] = acc


_F32P = types.CPointer(types.float32)
_reduce_f32 = by_address("ipu_sim_reduce_float32",
                         types.void(types.int64, types.int64, _F32P, _F32P, types.int64, types.int64, _F32P),
                         _reduce_float, error_model="numpy")


def _reduce_apply(op, layout, x, o, n, k, scratch):  # pragma: no cover - replaced by the Numba overload
    raise NotImplementedError


@overload(_reduce_apply)
def _reduce_apply_ov(op, layout, x, o, n, k, scratch):
    dt = x.dtype
    if isinstance(dt, types.Record):  # float16 in: to float32 first
        def impl(op, layout, x, o, n, k, scratch):
            lanes, r, wide = scratch
            widen_into(x, n * k, wide)
            _reduce_f32(op, layout, wide, r, n, k, lanes)
            from_f32(r, o, n)
        return impl
    if dt == types.float32:
        def impl2(op, layout, x, o, n, k, scratch):
            lanes, r, _ = scratch
            _reduce_f32(op, layout, x, r, n, k, lanes)
            from_f32(r, o, n)
        return impl2
    if isinstance(dt, types.Boolean):
        return lambda op, layout, x, o, n, k, scratch: _reduce_bool(op, layout, x, o, n, k)
    return lambda op, layout, x, o, n, k, scratch: _reduce_int(op, layout, x, o, n, k)


@njit(cache=True, error_model="numpy")
def _reduce_kernel(views, off, cnt, fp, ip):
    """Every Reduce vertex, with one set of scratch arrays for the whole call (lanes, the float32
    results, a float16 input widened) instead of new ones per vertex."""
    x = views[F.in_]
    o = views[F.out]
    most_out = 0
    most_in = 0
    for v in range(off.shape[0]):
        most_out = max(most_out, cnt[v, F.out])
        most_in = max(most_in, cnt[v, F.out] * ip[v, IP.inner])
    lanes = np.empty(LANES, np.float32)
    r = np.empty(most_out, np.float32)
    wide = half_scratch(x, most_in)
    for v in range(off.shape[0]):
        n = cnt[v, F.out]
        k = ip[v, IP.inner]
        _reduce_apply(ip[v, IP.op], ip[v, IP.layout], piece(x, off[v, F.in_], n * k), piece(o, off[v, F.out], n), n, k,
                      (lanes, borrow(r, 0, n), wide))


# ------------------------------------------------------------------------------------------------
# cost model

# our ops as poplibs popops::Operation. abs_sum has no poplibs op (popops reduces |x| as a
# SQUARE_ADD-like accumulating op with a different pre-op); derived: costed as SQUARE_ADD.
_POPLIBS_OP = {"sum": "ADD", "max": "MAX", "min": "MIN", "prod": "MUL", "sum_squares": "SQUARE_ADD",
               "abs_sum": "SQUARE_ADD", "log_sum_exp": "LOG_ADD", "logical_and": "LOGICAL_AND",
               "logical_or": "LOGICAL_OR"}


def _params(t):
    """(dataPathWidth in elements, vectorWidth, accVectorWidth) of partials type t, as
    getCycleEstimateForReduceVertex computes them."""
    size = t.itemsize
    dpw = 64 // (size * 8)
    vw = max(1, 8 // size)
    acc = 8 if t == ipu.FLOAT16 else (4 if t == ipu.FLOAT32 else 1)
    return dpw, vw, acc


def reduce_cycles(n_out, k, op: str, layout, t_in, t_out) -> np.ndarray:
    """Thread cycles of one Reduce vertex with n_out outputs of k elements each.

    Source: poplibs lib/popops/reduction/CycleEstimationFunctions.cpp @ b2996457; the
    specialisation follows our layout:

    - one output (SCALAR_OUTPUT_SINGLE_INPUT, getCyclesEstimateForSingleInput):
      3 + 6 + cyclesPerLoop x k / elemsPerLoop + 5 + k % elemsPerLoop + 3 (+ 5 if out is not
      float), elemsPerLoop the op vector width (accumulator width 4 float / 8 half for sum-like
      ops, else the vector width, log-add included), cyclesPerLoop = max(loads per loop, cyclesPerOp);
    - ROWS, several outputs (ALL_REGIONS_CONTINUOUS, getCycleEstimateReduceAllRegionsContinuous):
      cyclesPerOp x n_out x (k / min(accWidth, dataPathWidth)) + (2 if k is odd) + 12 x n_out
      + 10 + 7 (poplibs passes numOutputsM1 as the output count, one output short: a deliberate
      deviation, we count all n_out outputs; the calibration table leaves this path unscored);
    - PARTIALS (STRIDED_REDUCE with stride n_out, getCyclesEstimateForStridedReduce):
      4 + 11 + ceil(n_out / gcd(min(opWidth, dataPathWidth), n_out)) x (3 + post + 3 +
      cyclesPerOp x (k - 1)), post the loop-exit and store cycles of its tables;
    - logical_and / logical_or have only C++ vertices (the DEFAULT path): 7 + 24 +
      per output 8 + per partials region 22 + 25 x its size (one region of k for ROWS, k regions
      of 1 for PARTIALS).

    cyclesPerOp is 1, except log_sum_exp (LOG_ADD): 20 in the C++ (scalar) vertices, 23 float /
    13 half per vector in the strided assembly.
    """
    n_out = np.asarray(n_out, np.int64)
    k = np.asarray(k, np.int64)
    layout = np.asarray(layout, np.int64)
    pop = _POPLIBS_OP[op]
    dpw, vw, acc_w = _params(t_in)
    if pop in ("LOGICAL_AND", "LOGICAL_OR"):
        rows = 7 + 24 + n_out * (8 + 22 + 25 * k)
        parts = 7 + 24 + n_out * (8 + k * (22 + 25))
        return np.where((layout == ROWS) | (n_out == 1), rows, parts)
    uses_acc = pop in ("ADD", "SQUARE_ADD")
    is_log = pop == "LOG_ADD"

    # single input: no assembly log-add, the C++ vertex at 20 cycles per op; log-add is not an
    # accumulator op, so the single-input estimate takes the vector width for it
    op_w = acc_w if uses_acc else vw
    cpo = 20 if is_log else 1
    elems_per_cycle = min(op_w, dpw)
    loads = op_w // elems_per_cycle
    cpl = max(loads, cpo)
    epl = elems_per_cycle * loads
    single = 3 + 6 + (cpl * k) // epl + 5 + k % epl + 3 + (0 if t_out == ipu.FLOAT32 else 5)
    cont_w = min(1 if is_log else acc_w, dpw)
    continuous = cpo * n_out * (k // cont_w) + np.where(k % 2 == 1, 2, 0) + 12 * n_out + 10 + 7

    # strided: assembly log-add on vectors
    s_op_w = (4 if t_in == ipu.FLOAT16 else 2) if is_log else (acc_w if uses_acc else vw)
    s_cpo = (13 if t_in == ipu.FLOAT16 else 23) if is_log else 1
    if t_in == ipu.FLOAT16:
        store = {("ADD", "float16"): 7, ("ADD", "float32"): 6, ("MAX", "float16"): 7, ("MAX", "float32"): 7,
                 ("MIN", "float16"): 7, ("MIN", "float32"): 7, ("LOG_ADD", "float16"): 7,
                 ("LOG_ADD", "float32"): 7}.get((pop, t_out.name), 0)  # missing entries are 0 (std::map [])
        post = 1 + store
    else:
        post = (3 if pop == "ADD" else 2) + (2 if t_out in (ipu.FLOAT16, ipu.FLOAT32) else 0)
    outer = 3 + post + 3 + s_cpo * np.maximum(k - 1, 0)
    epl_s = np.gcd(min(s_op_w, dpw), np.maximum(n_out, 1))
    strided = 4 + 11 + outer * ceil_div(n_out, epl_s)

    return np.where(n_out == 1, single, np.where(layout == ROWS, continuous, strided)).astype(np.int64)


# ------------------------------------------------------------------------------------------------
# the codelet

_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)


@ipu.register
class Reduce(Codelet):
    """out[j] = op over the k elements of output j (layout ROWS: in is [n_out, k]; PARTIALS:
    in is [k, n_out])."""

    name = "Reduce"
    fields = (Field("in", IN), Field("out", OUT))
    int_params = ("op", "inner", "layout")
    # popops Reduce<ReduceOp, PartialsType, OutType, isUpdate, ReductionSpecialisation>: the operation
    # and the layout (specialisation) are the class's template parameters, not vertex state
    template_params = ("op", "layout")
    supervisor = False
    allowed_types = ((*_FLOATS, ipu.INT32, ipu.BOOL), (*_FLOATS, ipu.INT32, ipu.BOOL))
    poplibs_vertices = ("popops::Reduce",)

    def kernel(self):
        return _reduce_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        tin, tout = t.type.in_, t.type.out
        k = t.inner
        if np.any(k < 0):
            raise ValueError("Reduce: inner (the number of elements per output) must be >= 0")
        if np.any(t.count.in_ != t.count.out * k):
            v = int(np.flatnonzero(t.count.in_ != t.count.out * k)[0])
            raise ValueError(
                f"Reduce: in has {t.count.in_[v]} elements but out has {t.count.out[v]} with inner={k[v]}; in must "
                f"hold out count x inner elements")
        if np.any((t.layout != ROWS) & (t.layout != PARTIALS)):
            raise ValueError("Reduce: layout must be ROWS (0: in is [n_out, k]) or PARTIALS (1: in is [k, n_out])")
        codes = np.unique(t.op)
        for c in codes:
            if int(c) not in REDUCE_NAMES:
                raise ValueError(f"Reduce: op code {int(c)} is not one of {REDUCE_OPS}")
            name = REDUCE_NAMES[int(c)]
            if tin in _FLOATS:
                if tout not in _FLOATS:
                    raise TypeError(f"Reduce {name}: float input needs a float32 or float16 out, not {tout.name}")
                if name in ("logical_and", "logical_or"):
                    raise TypeError(f"Reduce {name}: takes bool data, not {tin.name}")
            elif tin == ipu.INT32:
                if tout != ipu.INT32 or name not in _INT_OPS:
                    raise TypeError(f"Reduce {name}: int32 data supports {sorted(_INT_OPS)} into int32 out")
            else:
                if tout != ipu.BOOL or name not in _BOOL_OPS:
                    raise TypeError(f"Reduce {name}: bool data supports {sorted(_BOOL_OPS)} into bool out")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        out = np.zeros(cnt.shape[0], np.int64)
        for c in np.unique(t.op):
            sel = t.op == c
            out[sel] = reduce_cycles(t.count.out[sel], t.inner[sel], REDUCE_NAMES[int(c)], t.layout[sel], t.type.in_,
                                     t.type.out)
        return out

    # poplibs' reduction operations (popops::Operation, a calibration row's `op`) and the layouts of
    # its reduction specialisations (`spec`) -> ours
    POPLIBS_OPS = {"ADD": "sum", "MAX": "max", "MIN": "min", "MUL": "prod", "SQUARE_ADD": "sum_squares",
                   "LOG_ADD": "log_sum_exp"}
    POPLIBS_SPECS = {"SINGLE_INPUT": ROWS, "ALL_REGIONS_CONTINUOUS": ROWS, "STRIDED_REDUCE": PARTIALS}

    def calibration_vertex(self, vertex, types, n, params):
        if len(types) != 2:
            raise KeyError("a reduction's dtype is IN->OUT, e.g. half->float")
        n_out = int(params.get("outputs", 1))
        if n % max(n_out, 1):
            raise KeyError(f"n ({n}) must be outputs x partials per output")
        return ipu.Vertex(dict(zip(self.field_names, types)), {"in": n, "out": n_out},
                          {"op": REDUCE_OPS[self.POPLIBS_OPS[params["op"]]], "inner": n // max(n_out, 1),
                           "layout": self.POPLIBS_SPECS[params.get("spec", "SINGLE_INPUT")]})

    def code_bytes(self, types):
        # popops reduction vertices (assembly accumulate loops + C++ fallbacks): ~0.75 KiB
        # (assumption)
        return 768

    def reference(self, x, op, n_out, layout=ROWS, out_dtype=None):
        name = op if isinstance(op, str) else REDUCE_NAMES[int(op)]
        return reduce_reference(np.asarray(x), name, int(n_out), int(layout),
                                np.dtype(out_dtype) if out_dtype is not None else np.asarray(x).dtype)


# ------------------------------------------------------------------------------------------------
# NumPy reference


def _lanes_sum_np(m: np.ndarray) -> np.ndarray:
    """The kernel's 8-lane float32 sum of each row of m (rows, k), bit for bit."""
    rows, k = m.shape
    kp = -(-k // LANES) * LANES
    p = np.zeros((rows, kp), np.float32)
    p[:, :k] = m
    lanes = np.cumsum(p.reshape(rows, kp // LANES, LANES), axis=1, dtype=np.float32)[:, -1, :] if kp else \
        np.zeros((rows, LANES), np.float32)
    return np.cumsum(lanes, axis=1, dtype=np.float32)[:, -1]


def _lanes_prod_np(m: np.ndarray) -> np.ndarray:
    rows, k = m.shape
    kp = -(-k // LANES) * LANES
    p = np.ones((rows, kp), np.float32)
    p[:, :k] = m
    lanes = np.cumprod(p.reshape(rows, kp // LANES, LANES), axis=1, dtype=np.float32)[:, -1, :] if kp else \
        np.ones((rows, LANES), np.float32)
    return np.cumprod(lanes, axis=1, dtype=np.float32)[:, -1]


def _nan_max(m: np.ndarray, axis: int) -> np.ndarray:
    if m.shape[axis] == 0:
        shape = list(m.shape)
        del shape[axis]
        return np.full(shape, -np.inf, np.float32)
    return np.max(m, axis=axis)


def _nan_min(m: np.ndarray, axis: int) -> np.ndarray:
    if m.shape[axis] == 0:
        shape = list(m.shape)
        del shape[axis]
        return np.full(shape, np.inf, np.float32)
    return np.min(m, axis=axis)


def reduce_reference(x: np.ndarray, name: str, n_out: int, layout: int, out: np.dtype) -> np.ndarray:
    """NumPy: the kernel's arithmetic (accumulation order included) for one vertex."""
    k = x.size // n_out if n_out else 0
    if x.dtype == np.bool_:
        m = x.reshape(n_out, k) if layout == ROWS or n_out == 1 else x.reshape(k, n_out).T
        if name in ("logical_or", "max"):
            return np.asarray(m.any(axis=1))
        return np.asarray(m.all(axis=1))
    if x.dtype.kind in "iu":
        m = x.astype(np.int64).reshape(n_out, k) if layout == ROWS or n_out == 1 else \
            x.astype(np.int64).reshape(k, n_out).T
        if name == "sum":
            r = m.sum(axis=1)
        elif name == "prod":
            r = np.ones(n_out, np.int64)
            for i in range(k):  # wrapping product, column by column
                r = r * m[:, i]
        elif name == "max":
            r = m.max(axis=1) if k else np.full(n_out, -2 ** 31)
        else:
            r = m.min(axis=1) if k else np.full(n_out, 2 ** 31 - 1)
        return (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32)
    v = x.astype(np.float32)
    with np.errstate(all="ignore"):
        if layout == ROWS or n_out == 1:
            m = v.reshape(n_out, k)
            if name == "sum":
                r = _lanes_sum_np(m)
            elif name == "sum_squares":
                r = _lanes_sum_np(m * m)
            elif name == "abs_sum":
                r = _lanes_sum_np(np.abs(m))
            elif name == "prod":
                r = _lanes_prod_np(m)
            elif name == "max":
                r = _nan_max(m, 1)
            elif name == "min":
                r = _nan_min(m, 1)
            else:  # log_sum_exp
                mx = _nan_max(m, 1)
                s = _lanes_sum_np(np.exp(m - mx[:, None]).astype(np.float32))
                r = np.where(np.isfinite(mx), mx + np.log(s), mx)
        else:
            m = v.reshape(k, n_out)
            if name in ("sum", "sum_squares", "abs_sum"):
                t = m if name == "sum" else (m * m if name == "sum_squares" else np.abs(m))
                r = np.cumsum(t, axis=0, dtype=np.float32)[-1] if k else np.zeros(n_out, np.float32)
            elif name == "prod":
                r = np.cumprod(m, axis=0, dtype=np.float32)[-1] if k else np.ones(n_out, np.float32)
            elif name == "max":
                r = _nan_max(m, 0)
            elif name == "min":
                r = _nan_min(m, 0)
            else:
                mx = _nan_max(m, 0)
                e = np.exp(m - mx[None, :]).astype(np.float32)
                s = np.cumsum(e, axis=0, dtype=np.float32)[-1] if k else np.zeros(n_out, np.float32)
                r = np.where(np.isfinite(mx), mx + np.log(s), mx)
    return np.asarray(r, np.float32).astype(out)


F, IP = Reduce.F, Reduce.IP  # the kernel's columns, by name
