"""Cost models of UnaryOp and BinaryOp (poplibs' popops estimators and op tables)."""
from __future__ import annotations

import numpy as np

import ipu

from ._costs import SUPERVISOR_OVERHEAD, ceil_div, op_perf_table, perf_loop_cycles, type_key, vector_width

INT_TYPES = (ipu.INT32, ipu.UINT32, ipu.INT16, ipu.UINT16, ipu.INT8, ipu.UINT8)


def _perf_key(t) -> str:
    """poplibs' op tables have int entries only; narrower and unsigned integers run the same C++
    loops (one element per iteration), so they cost as int (derived)."""
    return "int" if t in INT_TYPES else type_key(t)

# ------------------------------------------------------------------------------------------------
# cost tables
#
# Entries are poplibs' OpPerformanceInfo (`_costs.OpPerf`: cyclesPerLoop, naturalVectorWidth,
# loopUnrollFactor), copied as numbers from the SDK 3.x tables unaryOpPerfInfo / binaryOpPerfInfo /
# broadcastOpPerfInfo in lib/popops/popopsCycleEstimators.hpp. Type keys are poplibs' (float,
# half, int, bool). Entries marked "derived" have no poplibs counterpart; the derivation is given.

_UNARY_PERF = op_perf_table({
    ("negate", "float"): (2, False, 2), ("negate", "half"): (2, False, 4), ("negate", "int"): (2, False, 0),
    ("abs", "float"): (1, False, 0), ("abs", "half"): (1, False, 0), ("abs", "int"): (2, False, 0),
    ("exp", "float"): (6, False, 2), ("exp", "half"): (4, False, 4),
    ("log", "float"): (12, False, 2), ("log", "half"): (4, False, 4),
    ("log1p", "float"): (180, True, 0), ("log1p", "half"): (180, True, 0),
    ("sqrt", "float"): (10, False, 2), ("sqrt", "half"): (23, False, 4),
    ("rsqrt", "float"): (8, False, 2), ("rsqrt", "half"): (19, False, 4),
    ("square", "float"): (2, False, 2), ("square", "half"): (2, False, 4), ("square", "int"): (1, True, 0),
    ("relu", "float"): (3, False, 2), ("relu", "half"): (3, False, 4),
    ("relu", "int"): (2, False, 0),  # derived: a max with 0, like ABSOLUTE int (2 per element)
    ("tanh", "float"): (12, False, 2), ("tanh", "half"): (4, False, 4),
    ("sigmoid", "float"): (12, False, 2), ("sigmoid", "half"): (6, False, 4),
    ("sin", "float"): (2300, False, 0), ("sin", "half"): (26, False, 1),
    ("cos", "float"): (2300, False, 0), ("cos", "half"): (26, False, 1),
    ("tan", "float"): (5100, False, 1), ("tan", "half"): (5700, False, 1),
    ("asin", "float"): (102, False, 0), ("asin", "half"): (102, False, 0),
    ("floor", "float"): (2, True, 0), ("floor", "half"): (2, True, 0),
    ("ceil", "float"): (2, True, 0), ("ceil", "half"): (2, True, 0),
    ("round", "float"): (2, True, 0), ("round", "half"): (2, True, 0),
    ("trunc", "float"): (2, True, 0), ("trunc", "half"): (2, True, 0),  # derived: as FLOOR (rounding mode)
    ("sign", "float"): (5, True, 0), ("sign", "half"): (5, True, 0), ("sign", "int"): (5, False, 0),
    ("isnan", "float"): (3, True, 0), ("isnan", "half"): (3, True, 0),
    ("isinf", "float"): (3, True, 0), ("isinf", "half"): (5, True, 0),
    ("isfinite", "float"): (5, True, 0), ("isfinite", "half"): (5, True, 0),
    ("logical_not", "bool"): (17, False, 0),
    # derived: LOGICAL_NOT exists for bool only; other inputs cost the same per element
    ("logical_not", "float"): (17, False, 0), ("logical_not", "half"): (17, False, 0),
    ("logical_not", "int"): (17, False, 0),
    ("reciprocal", "float"): (6, False, 2), ("reciprocal", "half"): (15, False, 4),  # INVERSE
    ("expm1", "float"): (4, False, 0), ("expm1", "half"): (5, True, 0),
    ("erf", "float"): (18, False, 1), ("erf", "half"): (16, False, 1),
    # derived: GELU_ERF = ERF plus 3 cycles per element (x / sqrt 2, 1 + erf, 0.5 x multiply)
    ("geluerf", "float"): (21, False, 1), ("geluerf", "half"): (19, False, 1),
})

_BINARY_PERF = op_perf_table({
    ("add", "float"): (1, True, 0), ("add", "half"): (1, True, 0), ("add", "int"): (7, False, 1),
    ("sub", "float"): (1, True, 0), ("sub", "half"): (1, True, 0), ("sub", "int"): (7, False, 1),
    ("mul", "float"): (1, True, 0), ("mul", "half"): (1, True, 0), ("mul", "int"): (7, False, 1),
    ("div", "float"): (10, False, 2), ("div", "half"): (21, False, 4), ("div", "int"): (277, False, 1),
    ("pow", "float"): (312, False, 1), ("pow", "half"): (325, False, 1),
    ("pow", "int"): (35, False, 1),  # derived: ~5 squarings of MULTIPLY int (7) for 32-bit exponents
    ("max", "float"): (4, False, 2), ("max", "half"): (4, False, 4), ("max", "int"): (7, False, 1),
    ("min", "float"): (4, False, 2), ("min", "half"): (4, False, 4), ("min", "int"): (7, False, 1),
    # REMAINDER
    ("fmod", "float"): (133, False, 2), ("fmod", "half"): (300, False, 4), ("fmod", "int"): (292, False, 1),
    # derived: REMAINDER plus a sign test and add (4 cycles) per loop
    ("rem", "float"): (137, False, 2), ("rem", "half"): (304, False, 4), ("rem", "int"): (296, False, 1),
    ("atan2", "float"): (272, False, 2), ("atan2", "half"): (578, False, 4),
    ("equal", "float"): (14, False, 4), ("equal", "half"): (9, False, 4), ("equal", "int"): (22, False, 4),
    ("equal", "bool"): (6, False, 4),
    ("not_equal", "float"): (20, False, 4), ("not_equal", "half"): (11, False, 4),
    ("not_equal", "int"): (22, False, 4), ("not_equal", "bool"): (5, False, 4),
    ("less", "float"): (14, False, 4), ("less", "half"): (9, False, 4), ("less", "int"): (22, False, 4),
    ("less", "bool"): (28, False, 4),
    ("less_equal", "float"): (14, False, 4), ("less_equal", "half"): (9, False, 4),
    ("less_equal", "int"): (26, False, 4), ("less_equal", "bool"): (28, False, 4),
    ("greater", "float"): (14, False, 4), ("greater", "half"): (9, False, 4),
    ("greater", "int"): (22, False, 4), ("greater", "bool"): (31, False, 4),
    ("greater_equal", "float"): (14, False, 4), ("greater_equal", "half"): (9, False, 4),
    ("greater_equal", "int"): (26, False, 4), ("greater_equal", "bool"): (28, False, 4),
    ("logical_and", "bool"): (5, False, 4), ("logical_or", "bool"): (5, False, 4),
})

_BROADCAST_PERF = op_perf_table({
    ("add", "float"): (1, True, 0), ("add", "half"): (1, True, 0), ("add", "int"): (6, False, 1),
    ("sub", "float"): (1, True, 0), ("sub", "half"): (1, True, 0), ("sub", "int"): (6, False, 1),
    ("mul", "float"): (1, True, 0), ("mul", "half"): (1, True, 0), ("mul", "int"): (6, False, 1),
    ("div", "float"): (6, False, 2), ("div", "half"): (8, False, 2), ("div", "int"): (277, False, 1),
    ("pow", "float"): (312, False, 1), ("pow", "half"): (325, False, 1),
    ("pow", "int"): (30, False, 1),  # derived: ~5 squarings of broadcast MULTIPLY int (6)
    ("max", "float"): (3, False, 2), ("max", "half"): (3, False, 4), ("max", "int"): (6, False, 1),
    ("min", "float"): (3, False, 2), ("min", "half"): (3, False, 4), ("min", "int"): (6, False, 1),
    ("fmod", "float"): (93, False, 2), ("fmod", "half"): (225, False, 4), ("fmod", "int"): (280, False, 1),
    # derived: REMAINDER plus a sign test and add (4 cycles) per loop
    ("rem", "float"): (97, False, 2), ("rem", "half"): (229, False, 4), ("rem", "int"): (284, False, 1),
    ("atan2", "float"): (272, False, 2), ("atan2", "half"): (578, False, 4),
    ("equal", "float"): (12, False, 4), ("equal", "half"): (8, False, 4), ("equal", "int"): (16, False, 4),
    ("equal", "bool"): (14, False, 4),
    ("not_equal", "float"): (18, False, 4), ("not_equal", "half"): (10, False, 4),
    ("not_equal", "int"): (16, False, 4), ("not_equal", "bool"): (4, False, 4),
    ("less", "float"): (12, False, 4), ("less", "half"): (8, False, 4), ("less", "int"): (16, False, 4),
    ("less", "bool"): (16, False, 4),
    ("less_equal", "float"): (12, False, 4), ("less_equal", "half"): (8, False, 4),
    ("less_equal", "int"): (20, False, 4), ("less_equal", "bool"): (16, False, 4),
    ("greater", "float"): (12, False, 4), ("greater", "half"): (8, False, 4),
    ("greater", "int"): (16, False, 4), ("greater", "bool"): (12, False, 4),
    ("greater_equal", "float"): (12, False, 4), ("greater_equal", "half"): (8, False, 4),
    ("greater_equal", "int"): (20, False, 4), ("greater_equal", "bool"): (12, False, 4),
    ("logical_and", "bool"): (4, False, 4), ("logical_or", "bool"): (4, False, 4),
})
# derived: LOGICAL_AND / LOGICAL_OR exist for bool only; other input types cost the same
for _t in ("float", "half", "int"):
    for _op in ("logical_and", "logical_or"):
        _BINARY_PERF[(_op, _t)] = _BINARY_PERF[(_op, "bool")]
        _BROADCAST_PERF[(_op, _t)] = _BROADCAST_PERF[(_op, "bool")]

# popnn NonLinearity1D ops: cycles of one op on one (vector) element.
# GELU: getNonLinearityOpCycles in lib/popnn/PerformanceEstimation.hpp (10 float, 5 half; poplibs
# calls these placeholders). SWISH: derived, SIGMOID (5 float, 2 half, same table) + 1 multiply.
_NONLINEARITY_OP_CYCLES = {("gelu", "float"): 10, ("gelu", "half"): 5,
                           ("swish", "float"): 6, ("swish", "half"): 3}


COST_TABLES = {"_UNARY_PERF": _UNARY_PERF, "_BINARY_PERF": _BINARY_PERF, "_BROADCAST_PERF": _BROADCAST_PERF,
               "_NONLINEARITY_OP_CYCLES": _NONLINEARITY_OP_CYCLES}


def cost_rows(op: str) -> list:
    """(table name, key, entry) of every cost table row of a UnaryOp / BinaryOp op (by its name
    in UNARY_OPS / BINARY_OPS): what `python -m popxl.op_table <op>` lists."""
    return [(name, key, value) for name, table in COST_TABLES.items() for key, value in table.items() if key[0] == op]


def _external(op: str, tk: str) -> bool:
    """hasExternalCodelet: the assembly fast path of add / sub / mul on float and half."""
    return tk in ("float", "half") and op in ("add", "sub", "mul")


def nonlinearity_1d_cycles(n, op: str, t, workers: int = 6):
    """popnn NonLinearity1D (gelu, swish) MultiVertex, tile cycles.

    Source: popnnCycleEstimators.cpp nonLinearity1DCycleEstimator: 9 supervisor cycles plus 6 x a
    worker's cycles; a worker spends 3 (load state) + 5 (split work) + 2 (worker id) + 2 (alignment)
    + 5 (remainder setup) + 3 (pointer offsets) cycles, then for its ceil(vectors / 6) vectors
    2 + op + (vectors - 1) x op + 1 + op, then the remainder: float 3 + (2 + op if odd); half
    2 + 1 + (2 + op if n & 2) + 1 + (3 + op if n & 1). poplibs writes the first sum as
    `3 + isNonInPlaceSwish ? 1 : 0 + 5 + ...`, which C++ parses as a conditional that drops every
    term; we use the sum the comments describe.
    """
    tk = type_key(t)
    op_c = _NONLINEARITY_OP_CYCLES[(op, tk)]
    vw = vector_width(t)
    n = np.asarray(n, np.int64)
    vectors = n // vw
    rem = n % vw
    vpw = ceil_div(vectors, workers)
    worker = 3 + 5 + 2 + 2 + 5 + 3 + np.where(vpw > 0, 2 + op_c + (vpw - 1) * op_c + 1 + op_c, 0)
    if tk == "float":
        worker = worker + 3 + np.where(rem & 1, 2 + op_c, 0)
    else:
        worker = worker + 2 + 1 + np.where(rem & 2, 2 + op_c, 0) + 1 + np.where(rem & 1, 3 + op_c, 0)
    return 9 + workers * worker


def unary_cycles(n, op: str, t, workers: int = 6):
    """Tile cycles of one UnaryOp vertex over n elements of type t (the input's type).

    Source: poplibs SDK 3.x popopsCycleEstimators.cpp, UnaryOp1D (MultiVertex):
    basicOpSupervisorOverhead (11) + 9 + 6 x (17 + innerLoop(ceil(n / 6))) with a 33-cycle worker
    base for EXPONENT, innerLoop from unaryOpPerfInfo with 4 cycles of loop overhead per loop.
    gelu and swish are popnn non-linearities (NonLinearity1D, `nonlinearity_1d_cycles`).
    """
    if op in ("gelu", "swish"):
        return nonlinearity_1d_cycles(n, op, t, workers)
    perf = _UNARY_PERF[(op, _perf_key(t))]
    per_worker = ceil_div(n, workers)
    base = 33 if op == "exp" else 17
    inner = perf_loop_cycles(per_worker, perf, vector_width(t), 4, basic_loop=True)
    return SUPERVISOR_OVERHEAD + 9 + workers * (base + inner)


def binary_cycles(n, op: str, t, broadcast, workers: int = 6):
    """Tile cycles of one BinaryOp vertex over n elements of input type t.

    Source: poplibs SDK 3.x popopsCycleEstimators.cpp.
    BinaryOp1D (MultiVertex): 11 + 6 x (29 float / 26 other + innerLoop(ceil(n / 6))), innerLoop
    from binaryOpPerfInfo; natural-vector entries add 2 cycles of loop overhead on the assembly
    fast path (add/sub/mul of float/half), else 5.
    BroadcastScalar1D (one operand has 1 element): 11 + 6 x (20 + loops), loops from
    broadcastOpPerfInfo; natural-vector entries add 1 cycle (fast path) or 4.
    """
    tk = _perf_key(t)
    vw = vector_width(t)
    n = np.asarray(n, np.int64)
    per_worker = ceil_div(n, workers)
    ext = _external(op, tk)
    full = SUPERVISOR_OVERHEAD + workers * ((29 if tk == "float" else 26)
                                            + perf_loop_cycles(per_worker, _BINARY_PERF[(op, tk)], vw, 2 if ext else 5))
    bcast = SUPERVISOR_OVERHEAD + workers * (20 + perf_loop_cycles(per_worker, _BROADCAST_PERF[(op, tk)], vw,
                                                                   1 if ext else 4))
    return np.where(np.asarray(broadcast, bool), bcast, full)
