"""BroadcastVectorOuter: a vector applied along the rows of a 2D region (popops'
BroadcastVectorOuterByRow / ByColumn supervisor vertices).

Fields and parameters
---------------------
`data` (IN) and `out` (OUT): one region of `rows` x `columns` elements, row-major; `B` (IN): the
vector, `B.count` >= 1 elements. Row r of out is row r of data (op) B[r mod B.count], op one of
add, sub, mul (`BinaryOpCode` values: the ops poplibs instantiates these vertices for).
`by_column` (template parameter: ByColumn vertex, the workers split each row's columns; else
ByRow, each worker takes whole rows) and `misaligned` (template parameter: rows may start off a
64-bit boundary, required when `columns` is not a multiple of the vector width) choose among
poplibs' vertex classes; neither changes the arithmetic.

This is what popops emits for a per-channel operand of an element-wise op (popnn's batch norm:
x * (gamma / std) + (beta - mean gamma / std), its gradient's k1 g - k2 x + k3): one vertex per
contiguous region of a tile whose rows share an element of the vector, not one per row.

Numerics: as BinaryOp with a broadcast scalar (the same loops, row by row): float32 in float32,
float16 widened to float32 and rounded once.

Cost model
----------
poplibs SDK 3.x popopsCycleEstimators.cpp, BroadcastVectorOuterCycleEstimate (assembly
vertices: 1 cycle of inner-loop overhead; 7 cycles a row, 25 for the misaligned variant):
a worker spends, per row it takes, 7 / 25 + basicOpLoopCycles(elements, vectorWidth,
cyclesPerLoop + 1) with cyclesPerLoop from broadcastOpPerfInfo and elements = columns (ByRow) or
ceil(columns / 6) (ByColumn); it takes ceil(rows / 6) rows (ByRow) or every row (ByColumn); tile
cycles = (15 + rows taken x that) x 6 + basicOpSupervisorOverhead (11).

Vertex state (popops broadcastCodelets.cpp field layout): data and out ONE_PTR (4 bytes each), B
a SPAN (pointer and size, 8), columns and rows shorts (2 each): 20 bytes, whatever the rows.
"""
from __future__ import annotations

import numpy as np
from numba import njit

import ipu
from ipu import IN, OUT, Codelet, Field, columns

from ._borrow import piece
from ._costs import SUPERVISOR_OVERHEAD, ceil_div, perf_loop_cycles, type_key, vector_width
from ._kernels import half_scratch
from .elementwise import binary_reference
from .elementwise_costs import _BROADCAST_PERF
from .elementwise_kernels import BINARY_NAMES, BinaryOpCode, _binary_apply, _same_float_arith

__all__ = ["BROADCAST_VECTOR_OPS", "BroadcastVectorOuter", "MAX_ROWS_COLUMNS", "broadcast_vector_outer_cycles",
           "by_column"]

FIELDS = (Field("data", IN), Field("B", IN), Field("out", OUT))
PARAMS = ("op", "by_column", "misaligned", "columns", "rows")
F = columns("BroadcastVectorOuter.F", [f.name for f in FIELDS])
P = columns("BroadcastVectorOuter.IP", PARAMS)

# the ops popops instantiates the vertices for (INSTANTIATE_VECTOR_OUTER: ADD, SUBTRACT, MULTIPLY)
BROADCAST_VECTOR_OPS = {"add": int(BinaryOpCode.ADD), "sub": int(BinaryOpCode.SUB), "mul": int(BinaryOpCode.MUL)}
# columns and rows are `short` fields of the vertex
MAX_ROWS_COLUMNS = 32767
_STATE_BYTES = 4 + 8 + 4 + 2 + 2  # data, B (SPAN), out, columns, rows


def by_column(columns, t, workers: int = 6):
    """popops' choice (ElementWise.cpp binaryOpBroadcastOuterVector): the ByColumn vertex when a
    row holds at least one vector per worker, else ByRow."""
    return np.asarray(columns, np.int64) >= workers * vector_width(t)


def broadcast_vector_outer_cycles(columns, rows, op: str, t, column_split, misaligned, workers: int = 6):
    """Tile cycles of one BroadcastVectorOuter vertex (module docstring: the poplibs estimator)."""
    columns = np.asarray(columns, np.int64)
    rows = np.asarray(rows, np.int64)
    column_split = np.asarray(column_split, bool)
    perf = _BROADCAST_PERF[(op, type_key(t))]
    elems = np.where(column_split, ceil_div(columns, workers), columns)
    per_row = np.where(np.asarray(misaligned, bool), 25, 7) + perf_loop_cycles(elems, perf, vector_width(t), 1,
                                                                               basic_loop=True)
    taken = np.where(column_split, rows, ceil_div(rows, workers))
    return (15 + taken * per_row) * workers + SUPERVISOR_OVERHEAD


@njit(cache=True, error_model="numpy")
def broadcast_vector_outer_kernel(views, off, cnt, fp, ip):
    d = views[F.data]
    b = views[F.B]
    o = views[F.out]
    longest = 0
    for v in range(off.shape[0]):
        longest = max(longest, ip[v, P.columns])
    buf = half_scratch(d, 3 * longest)  # float16: one scratch for every row
    for v in range(off.shape[0]):
        op = ip[v, P.op]
        cols = ip[v, P.columns]
        blen = cnt[v, F.B]
        for r in range(ip[v, P.rows]):
            dv = piece(d, off[v, F.data] + r * cols, cols)
            bv = piece(b, off[v, F.B] + r % blen, 1)
            ov = piece(o, off[v, F.out] + r * cols, cols)
            if _same_float_arith(op, dv, bv, ov, cols):
                continue
            _binary_apply(op, dv, bv, ov, cols, buf)


@ipu.register
class BroadcastVectorOuter(Codelet):
    """out[r, :] = data[r, :] (op) B[r mod len(B)] over a rows x columns region."""

    name = "BroadcastVectorOuter"
    fields = FIELDS
    int_params = PARAMS
    template_params = ("op", "by_column", "misaligned")  # one vertex class per op, variant, alignment
    supervisor = True
    allowed_types = ((ipu.FLOAT32, ipu.FLOAT16),) * 3
    poplibs_vertices = ("popops::BroadcastVectorOuterByRowSupervisor",
                        "popops::BroadcastVectorOuterByColumnSupervisor")

    def kernel(self):
        return broadcast_vector_outer_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if not (t.type.data == t.type.B == t.type.out):
            raise TypeError(f"BroadcastVectorOuter: data, B and out must have one type, not {t.type.data.name}, "
                            f"{t.type.B.name} and {t.type.out.name}")
        bad = sorted(set(np.unique(t.op).tolist()) - set(BROADCAST_VECTOR_OPS.values()))
        if bad:
            raise ValueError(f"BroadcastVectorOuter: op codes {bad} are not add, sub or mul "
                             f"({BROADCAST_VECTOR_OPS})")
        for name in ("columns", "rows"):
            k = getattr(t, name)
            if np.any((k < 1) | (k > MAX_ROWS_COLUMNS)):
                raise ValueError(f"BroadcastVectorOuter: {name} must be in 1..{MAX_ROWS_COLUMNS} (a short field)")
        n = t.columns * t.rows
        if np.any(t.count.data != n) or np.any(t.count.out != n):
            raise ValueError("BroadcastVectorOuter: data and out must hold rows x columns elements")
        if np.any(t.count.B < 1):
            raise ValueError("BroadcastVectorOuter: B needs at least one element")
        vw = vector_width(t.type.data)
        if np.any((t.columns % vw != 0) & (t.misaligned == 0)):
            raise ValueError(f"BroadcastVectorOuter: rows of {t.type.data.name} whose columns are not a multiple "
                             f"of {vw} start off a 64-bit boundary: set misaligned=1")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        out = np.zeros(cnt.shape[0], np.int64)
        for code in np.unique(t.op):
            sel = t.op == code
            out[sel] = broadcast_vector_outer_cycles(t.columns[sel], t.rows[sel], BINARY_NAMES[int(code)],
                                                     t.type.data, t.by_column[sel] != 0, t.misaligned[sel] != 0,
                                                     target.worker_contexts)
        return out

    def vertex_state_bytes(self, types, cnt, ip):
        return np.full(len(cnt), _STATE_BYTES, np.int64)

    def state_bytes(self):
        return _STATE_BYTES

    def code_bytes(self, types):
        # popops' BroadcastVectorOuter supervisor + worker assembly: ~0.5 KiB (assumption, the
        # order of BinaryOp's)
        return 512

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        op = BROADCAST_VECTOR_OPS[{"ADD": "add", "SUBTRACT": "sub", "MULTIPLY": "mul"}[params.get("op", "ADD")]]
        cols = int(params.get("columns", n))
        rows = max(1, n // cols)
        column_split = vertex.endswith("ByColumnSupervisor")
        return ipu.Vertex({"data": t, "B": t, "out": t}, {"data": rows * cols, "B": rows, "out": rows * cols},
                          {"op": op, "by_column": int(column_split), "misaligned": int(cols % vector_width(t) != 0),
                           "columns": cols, "rows": rows})

    def reference(self, data, B, op, columns, rows):
        """NumPy: row r of the rows x columns data (op) B[r mod len(B)]."""
        name = op if isinstance(op, str) else BINARY_NAMES[int(op)]
        data = np.asarray(data).reshape(rows, columns)
        B = np.asarray(B).reshape(-1)
        b = B[np.arange(rows) % B.size].reshape(rows, 1)
        return binary_reference(data, np.broadcast_to(b, data.shape), name).reshape(-1)

