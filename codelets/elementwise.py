"""Element-wise codelets: UnaryOp (in -> out) and BinaryOp (a, b -> out), popops style.

Fields and types
----------------
UnaryOp:  fields `in` (IN), `out` (OUT); int parameter `op` (a `UnaryOpCode`; names in `UNARY_OPS`).
BinaryOp: fields `a` (IN), `b` (IN), `out` (OUT); int parameter `op` (a `BinaryOpCode`; names in `BINARY_OPS`).

Element types: float32, float16, int32 and bool. `out` has the input's type, except for the
predicates (isnan, isinf, isfinite, logical_not) and the comparisons / logical ops, whose `out`
is bool. `out` may be the very same elements as `in` / `a` (in-place); partially overlapping
connections are not supported. In BinaryOp either input may have a single element, broadcast
over the other (popops BroadcastScalar1D: `x * 0.5`); otherwise all counts are equal.

Numerics
--------
float32 is computed in float32 (IEEE, no fast-math; tanh, also inside gelu, is codelets/_tanh.py's
correctly rounded float32 tanh, which vectorises); float16 is loaded into float32, computed
there and rounded once to half (round to nearest even). int32 wraps (two's complement) on
overflow; integer division and fmod truncate toward zero as C does, rem takes the divisor's sign
(Python / NumPy `%`), and dividing an integer by zero gives 0 (the IPU's software division
leaves it undefined). max/min propagate NaN (NumPy maximum/minimum); round is half to even
(numpy.rint, ONNX Round); gelu is the tanh approximation (popnn GELU, PopXL `ops.gelu`), geluerf
the exact erf form. Logical ops treat any non-zero (and NaN) as true.

Cost models
-----------
See `unary_cycles` / `binary_cycles`: poplibs SDK 3.x estimators (popopsCycleEstimators.cpp
UnaryOp1D / BinaryOp1D / BroadcastScalar1D, with the per-op tables of popopsCycleEstimators.hpp;
popnnCycleEstimators.cpp NonLinearity1D for gelu and swish). Both are MultiVertex (supervisor)
vertices: they occupy the 6 workers of their tile and their cycles are tile cycles.

Kernels (the op codes and the Numba loops) are in codelets/elementwise_kernels.py.
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np

import ipu
from ipu import Codelet

from .elementwise_costs import INT_TYPES, binary_cycles, nonlinearity_1d_cycles, unary_cycles  # noqa: F401
from .elementwise_kernels import (BINARY_FIELDS, BINARY_NAMES, BINARY_OPS, OP_PARAMS, UNARY_FIELDS,  # noqa: F401
                                  UNARY_NAMES, UNARY_OPS, BinaryOpCode, UnaryOpCode, binary_kernel, unary_kernel)
from .elementwise_kernels import _GELU_C, _GELU_K, _RSQRT2  # the references use the kernels' constants

# which ops take which input kinds, and which give bool
_UNARY_INT = {"negate", "abs", "square", "relu", "sign"}  # besides logical_not
_UNARY_PRED = {"isnan", "isinf", "isfinite", "logical_not"}  # bool out
_BINARY_BOOL_OUT = {"equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
                    "logical_and", "logical_or"}
_BINARY_INT = {"add", "sub", "mul", "div", "pow", "max", "min", "fmod", "rem"}
_BINARY_FLOAT_ONLY = {"atan2"}

# ------------------------------------------------------------------------------------------------
# the codelets

_TYPES = (ipu.FLOAT32, ipu.FLOAT16, *INT_TYPES, ipu.BOOL)
_INTS = INT_TYPES


def _op_name(table: dict, names: dict, what: str, code: int) -> str:
    if code not in names:
        raise ValueError(f"{what}: op code {code} is not one of {table}")
    return names[code]


def _codes(table, names, what, op) -> list:
    codes = np.unique(np.asarray(op, np.int64))
    return [_op_name(table, names, what, int(c)) for c in codes]


# poplibs' expression op names (popops::expr::UnaryOpType / BinaryOpType, the `op` of a
# calibration row) -> ours
POPLIBS_UNARY = {"TANH": "tanh", "EXPONENT": "exp", "LOGARITHM": "log", "SQRT": "sqrt", "RSQRT": "rsqrt",
                 "NEGATE": "negate", "ABSOLUTE": "abs", "SIGMOID": "sigmoid", "RELU": "relu", "SQUARE": "square",
                 "INVERSE": "reciprocal", "FLOOR": "floor", "CEIL": "ceil", "ROUND": "round", "SIGNUM": "sign",
                 "EXPONENT_MINUS_ONE": "expm1", "LOGARITHM_ONE_PLUS": "log1p", "SIN": "sin", "COS": "cos",
                 "LOGICAL_NOT": "logical_not", "IS_FINITE": "isfinite", "IS_INF": "isinf", "IS_NAN": "isnan",
                 "ERF": "erf", "GELU_ERF": "geluerf", "TAN": "tan", "ASIN": "asin"}
POPLIBS_BINARY = {"ADD": "add", "SUBTRACT": "sub", "MULTIPLY": "mul", "DIVIDE": "div", "MAXIMUM": "max",
                  "MINIMUM": "min", "POWER": "pow", "REMAINDER": "fmod", "ATAN2": "atan2", "EQUAL": "equal",
                  "NOT_EQUAL": "not_equal", "LESS_THAN": "less", "LESS_THAN_EQUAL": "less_equal",
                  "GREATER_THAN": "greater", "GREATER_THAN_EQUAL": "greater_equal", "LOGICAL_AND": "logical_and",
                  "LOGICAL_OR": "logical_or"}


@ipu.register
class UnaryOp(Codelet):
    """out = op(in), element by element; op from UNARY_OPS."""

    name = "UnaryOp"
    fields = UNARY_FIELDS
    int_params = OP_PARAMS
    template_params = OP_PARAMS  # popops UnaryOp1DSupervisor<UnaryOpType op, T>: one instantiation per op
    supervisor = True
    allowed_types = (_TYPES, _TYPES)
    poplibs_vertices = ("popops::UnaryOp1DSupervisor", "popops::UnaryOp1D")

    def kernel(self):
        return unary_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        tin, tout = t.type.in_, t.type.out
        if np.any(t.count.in_ != t.count.out):
            raise ValueError("UnaryOp: in and out must have the same number of elements")
        for name in _codes(UNARY_OPS, UNARY_NAMES, "UnaryOp", t.op):
            if name in _UNARY_PRED:
                if tout != ipu.BOOL:
                    raise TypeError(f"UnaryOp {name}: out must be bool, not {tout.name}")
                if name != "logical_not" and not tin.is_float:
                    raise TypeError(f"UnaryOp {name}: in must be float32 or float16, not {tin.name}")
                continue
            if tout != tin:
                raise TypeError(f"UnaryOp {name}: out must have in's type {tin.name}, not {tout.name}")
            if tin == ipu.BOOL or (tin in _INTS and name not in _UNARY_INT):
                kinds = "float32 or float16" + (" or an integer type" if name in _UNARY_INT else "")
                raise TypeError(f"UnaryOp {name}: in must be {kinds}, not {tin.name}")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        out = np.zeros(cnt.shape[0], np.int64)
        for code in np.unique(t.op):
            sel = t.op == code
            out[sel] = unary_cycles(t.count.in_[sel], UNARY_NAMES[int(code)], t.type.in_, target.worker_contexts)
        return out

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        op = UNARY_OPS[POPLIBS_UNARY[params["op"]]]
        return ipu.Vertex({"in": t, "out": t}, {"in": n, "out": n}, {"op": int(op)})

    def code_bytes(self, types):
        # popops UnaryOp1D assembly/C++ worker code plus the supervisor stub: ~0.5 KiB (assumption,
        # the order of the ScaledAdd codelet)
        return 512

    def reference(self, x, op):
        """NumPy: the same arithmetic (float32 for float inputs, rounded once for float16)."""
        name = op if isinstance(op, str) else UNARY_NAMES[int(op)]
        return unary_reference(np.asarray(x), name)


@ipu.register
class BinaryOp(Codelet):
    """out = a (op) b, element by element; op from BINARY_OPS; a or b may be a 1-element scalar."""

    name = "BinaryOp"
    fields = BINARY_FIELDS
    int_params = OP_PARAMS
    template_params = OP_PARAMS  # popops BinaryOp1DSupervisor<BinaryOpType op, T>: one instantiation per op
    supervisor = True
    allowed_types = (_TYPES, _TYPES, _TYPES)
    poplibs_vertices = ("popops::BinaryOp1DSupervisor", "popops::BinaryOp1D", "popops::BroadcastScalar1DSupervisor",
                        "popops::BroadcastScalar1D")

    def kernel(self):
        return binary_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        ta, tb, tout = t.type.a, t.type.b, t.type.out
        if ta != tb:
            raise TypeError(f"BinaryOp: a is {ta.name} but b is {tb.name}; cast one of them first")
        n = t.count.out
        for k, f in ((t.count.a, "a"), (t.count.b, "b")):
            bad = (k != n) & (k != 1)
            if np.any(bad):
                raise ValueError(f"BinaryOp: {f} must have out's number of elements or 1 (a broadcast scalar)")
        if np.any((n == 0) & ((t.count.a != 0) | (t.count.b != 0))):
            raise ValueError("BinaryOp: an empty out needs empty inputs")
        for name in _codes(BINARY_OPS, BINARY_NAMES, "BinaryOp", t.op):
            if name in _BINARY_BOOL_OUT:
                if tout != ipu.BOOL:
                    raise TypeError(f"BinaryOp {name}: out must be bool, not {tout.name}")
                continue
            if tout != ta:
                raise TypeError(f"BinaryOp {name}: out must have the inputs' type {ta.name}, not {tout.name}")
            if ta == ipu.BOOL or (ta in _INTS and name not in _BINARY_INT):
                kinds = "float32 or float16" + (" or an integer type" if name in _BINARY_INT else "")
                raise TypeError(f"BinaryOp {name}: inputs must be {kinds}, not {ta.name}")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        out = np.zeros(cnt.shape[0], np.int64)
        n = t.count.out
        bcast = (t.count.a != n) | (t.count.b != n)
        for code in np.unique(t.op):
            sel = t.op == code
            out[sel] = binary_cycles(n[sel], BINARY_NAMES[int(code)], t.type.a, bcast[sel], target.worker_contexts)
        return out

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        op = BINARY_OPS[POPLIBS_BINARY[params["op"]]]
        k = 1 if vertex.startswith("popops::BroadcastScalar1D") else n
        return ipu.Vertex({"a": t, "b": t, "out": t}, {"a": n, "b": k, "out": n}, {"op": int(op)})

    def code_bytes(self, types):
        # popops BinaryOp1D / BroadcastScalar1D code: ~0.5 KiB (assumption, as UnaryOp)
        return 512

    def reference(self, a, b, op):
        """NumPy: the same arithmetic, with NumPy broadcasting of a 1-element operand."""
        name = op if isinstance(op, str) else BINARY_NAMES[int(op)]
        return binary_reference(np.asarray(a), np.asarray(b), name)


# ------------------------------------------------------------------------------------------------
# NumPy references


def _erf32(x):
    """erf in x's precision (float32, or float64 for the upcast reference interpreter)."""
    from scipy.special import erf

    return erf(x).astype(x.dtype)


def _compute_type(dt: np.dtype):
    """float arithmetic runs in float32 (float16 rounded once at the end); float64 input (the
    reference interpreter's upcast mode, for finite differences) stays float64."""
    return np.float64 if dt == np.float64 else np.float32


def unary_reference(x: np.ndarray, name: str) -> np.ndarray:
    dt = x.dtype
    if name in _UNARY_PRED:
        with np.errstate(invalid="ignore"):
            if name == "isnan":
                return np.isnan(x)
            if name == "isinf":
                return np.isinf(x)
            if name == "isfinite":
                return np.isfinite(x)
            return x == 0
    if dt.kind in "iu":
        v = x.astype(np.int64)
        r = {"negate": lambda: -v, "abs": lambda: np.abs(v), "square": lambda: v * v,
             "relu": lambda: np.maximum(v, 0), "sign": lambda: np.sign(v)}[name]()
        return r.astype(dt)
    ft = _compute_type(dt)
    v = x.astype(ft)
    f1, fh = ft(1), ft(0.5)
    with np.errstate(all="ignore"):
        fn = {
            "negate": lambda: -v, "abs": lambda: np.abs(v), "exp": lambda: np.exp(v), "log": lambda: np.log(v),
            "log1p": lambda: np.log1p(v), "sqrt": lambda: np.sqrt(v), "rsqrt": lambda: f1 / np.sqrt(v),
            "square": lambda: v * v, "relu": lambda: np.where(v > 0, v, np.where(np.isnan(v), v, np.float32(0))),
            "gelu": lambda: fh * v * (f1 + np.tanh(_GELU_K * (v + _GELU_C * v * v * v))),
            "geluerf": lambda: fh * v * (f1 + _erf32(v * _RSQRT2)),
            "tanh": lambda: np.tanh(v), "sigmoid": lambda: f1 / (f1 + np.exp(-v)),
            "swish": lambda: v / (f1 + np.exp(-v)), "sin": lambda: np.sin(v), "cos": lambda: np.cos(v),
            "floor": lambda: np.floor(v), "ceil": lambda: np.ceil(v), "round": lambda: np.rint(v),
            "trunc": lambda: np.trunc(v), "sign": lambda: np.sign(v), "reciprocal": lambda: f1 / v,
            "expm1": lambda: np.expm1(v), "erf": lambda: _erf32(v), "tan": lambda: np.tan(v),
            "asin": lambda: np.arcsin(v),
        }
        r = np.asarray(fn[name](), ft)
        return r.astype(dt)


def binary_reference(a: np.ndarray, b: np.ndarray, name: str) -> np.ndarray:
    dt = a.dtype
    if name in _BINARY_BOOL_OUT:
        if dt.kind == "f":
            a, b = a.astype(_compute_type(dt)), b.astype(_compute_type(dt))
        compare: dict[str, Callable[[np.ndarray, np.ndarray], np.ndarray]] = {
            "equal": np.equal, "not_equal": np.not_equal, "less": np.less, "less_equal": np.less_equal,
            "greater": np.greater, "greater_equal": np.greater_equal,
            "logical_and": lambda x, y: (x != 0) & (y != 0),
            "logical_or": lambda x, y: (x != 0) | (y != 0)}
        with np.errstate(invalid="ignore"):
            return compare[name](a, b)
    if dt.kind in "iu":
        x, y = np.broadcast_arrays(a.astype(np.int64), b.astype(np.int64))
        safe = np.where(y == 0, 1, y)
        if name == "add":
            r = x + y
        elif name == "sub":
            r = x - y
        elif name == "mul":
            r = x * y
        elif name == "div":
            q = np.abs(x) // np.abs(safe)
            r = np.where((x < 0) != (y < 0), -q, q)
        elif name in ("fmod", "rem"):
            r = np.abs(x) % np.abs(safe)
            r = np.where(x < 0, -r, r)
            if name == "rem":
                r = np.where((r != 0) & ((r < 0) != (y < 0)), r + y, r)
        elif name == "pow":
            r = np.array([_int_pow(int(p), int(q)) for p, q in zip(x.ravel(), y.ravel())], np.int64).reshape(x.shape)
        elif name == "max":
            r = np.maximum(x, y)
        elif name == "min":
            r = np.minimum(x, y)
        else:
            raise KeyError(name)
        if name in ("div", "fmod", "rem"):
            r = np.where(y == 0, 0, r)
        return (r & 0xFFFFFFFF).astype(np.uint32).view(np.int32).astype(dt) if dt == np.int32 else r.astype(dt)
    ft = _compute_type(dt)
    x, y = a.astype(ft), b.astype(ft)
    with np.errstate(all="ignore"):
        r = {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide, "pow": np.power,
             "max": np.maximum, "min": np.minimum, "fmod": np.fmod, "rem": np.remainder,
             "atan2": np.arctan2}[name](x, y)
        return np.asarray(r, ft).astype(dt)


def _int_pow(base: int, e: int) -> int:
    if e < 0:
        return 1 if base == 1 else ((-1) ** (e & 1) if base == -1 else 0)
    r = pow(base, e, 1 << 64)
    return r - (1 << 64) if r >= (1 << 63) else r
