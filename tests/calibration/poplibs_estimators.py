"""poplibs' cycle estimators, transcribed by hand into plain Python for calibration.

These functions are the *reference* the simulator's cost models are checked against: they follow
the C++ of graphcore/poplibs line by line (scalar arithmetic, explicit per-worker loops, C++
unsigned integer division), deliberately written apart from the vectorised models in `codelets/`
so that a slip in one shows up as a difference. Each function names the file, version and
function it transcribes. They generate the estimator rows of codelets/reference_cycles.csv
(`python tests/calibration/make_reference_table.py`) and drive the property sweeps in
tests/calibration/test_sweeps.py.

Sources:
- PE = lib/popops/PerformanceEstimation.cpp @ 03953b1c8d81ade8843bb69e41c46f7d2437dccc;
- CE = lib/popops/popopsCycleEstimators.cpp, the MultiVertex version (UnaryOp1D / BinaryOp1D
  names, VertexPerfEstimate, 8/64-bit DynamicSlice1D), with its op tables in
  lib/popops/popopsCycleEstimators.hpp (OpPerformanceInfo with a loop unroll factor);
- PL = lib/poplin/PerformanceEstimation.hpp (ConvPartial1x1Out, ReduceAdd).
"""
from __future__ import annotations

NUM_WORKERS = 6
DATA_PATH_BITS = 64
TYPE_SIZE = {"float": 4, "half": 2, "int": 4, "unsigned int": 4, "short": 2, "unsigned short": 2,
             "char": 1, "signed char": 1, "unsigned char": 1, "bool": 1}

PE = "graphcore/poplibs lib/popops/PerformanceEstimation.cpp@03953b1c8d81ade8843bb69e41c46f7d2437dccc"
CE = "graphcore/poplibs lib/popops/popopsCycleEstimators.cpp (MultiVertex version: UnaryOp1D/BinaryOp1D)"
PL = "graphcore/poplibs lib/poplin/PerformanceEstimation.hpp"


def vector_width(t: str) -> int:
    """Target::getVectorWidth: elements of t in one 64-bit data path."""
    return DATA_PATH_BITS // (8 * TYPE_SIZE[t])


def iceil(x: int, y: int) -> int:
    return x // y + (1 if x % y else 0)


def basic_op_supervisor_overhead(scaled_ptr64: bool = False) -> int:
    """PE basicOpSupervisorOverhead."""
    return 11 + (2 if scaled_ptr64 else 0)


# --------------------------------------------------------------------------------------------
# op tables (CE .hpp): (cyclesPerLoop, naturalVectorWidth, loopUnrollFactor), the entries the
# reference table uses

UNARY_PERF = {
    ("TANH", "float"): (12, False, 2), ("TANH", "half"): (4, False, 4),
    ("EXPONENT", "float"): (6, False, 2), ("EXPONENT", "half"): (4, False, 4),
    ("SQRT", "float"): (10, False, 2), ("SQRT", "half"): (23, False, 4),
    ("NEGATE", "float"): (2, False, 2), ("NEGATE", "half"): (2, False, 4), ("NEGATE", "int"): (2, False, 0),
    ("ABSOLUTE", "float"): (1, False, 0), ("ABSOLUTE", "int"): (2, False, 0),
    ("FLOOR", "float"): (2, True, 0), ("FLOOR", "half"): (2, True, 0),
    ("SIGNUM", "float"): (5, True, 0), ("SIGNUM", "half"): (5, True, 0),
    ("IS_FINITE", "float"): (5, True, 0), ("IS_FINITE", "half"): (5, True, 0),
    ("LOGARITHM_ONE_PLUS", "float"): (180, True, 0),
}
BINARY_PERF = {
    ("ADD", "float"): (1, True, 0), ("ADD", "half"): (1, True, 0), ("ADD", "int"): (7, False, 1),
    ("MULTIPLY", "float"): (1, True, 0), ("MULTIPLY", "half"): (1, True, 0), ("MULTIPLY", "int"): (7, False, 1),
    ("DIVIDE", "float"): (10, False, 2), ("DIVIDE", "half"): (21, False, 4),
    ("MAXIMUM", "float"): (4, False, 2), ("MAXIMUM", "half"): (4, False, 4),
}
BROADCAST_PERF = {
    ("ADD", "float"): (1, True, 0), ("ADD", "half"): (1, True, 0), ("ADD", "int"): (6, False, 1),
    ("MULTIPLY", "float"): (1, True, 0), ("MULTIPLY", "half"): (1, True, 0),
    ("SUBTRACT", "float"): (1, True, 0), ("SUBTRACT", "half"): (1, True, 0),
    ("DIVIDE", "float"): (6, False, 2), ("DIVIDE", "half"): (8, False, 2),
}


def _has_external_codelet(op: str, t: str) -> bool:
    """CE hasExternalCodelet: the assembly add / subtract / multiply of float and half."""
    return t in ("float", "half") and op in ("ADD", "SUBTRACT", "MULTIPLY")


# --------------------------------------------------------------------------------------------
# element-wise MultiVertices (CE)


def unary_op_1d(n: int, op: str, t: str) -> int:
    """CE MAKE_PERF_ESTIMATOR_NAME(UnaryOp1D) with unaryOpInnerLoopCycles."""
    cpl, natural, unroll = UNARY_PERF[(op, t)]
    worker = 33 if op == "EXPONENT" else 17
    per_worker = (n + NUM_WORKERS - 1) // NUM_WORKERS
    if not natural and unroll > 0:
        inner = iceil(per_worker, unroll) * cpl
    else:
        vw = vector_width(t) if natural else 1
        inner = (cpl + 4) * (per_worker + vw - 1) // vw  # basicOpLoopCycles
    worker += inner
    return worker * NUM_WORKERS + 9 + basic_op_supervisor_overhead()


def _binary_inner(op: str, t: str, perf, n: int, overhead_ext: int, overhead_other: int) -> int:
    cpl, natural, unroll = perf
    if natural:
        per_loop = vector_width(t)
        cpl += overhead_ext if _has_external_codelet(op, t) else overhead_other
    else:
        per_loop = unroll
    return iceil(n, per_loop) * cpl


def binary_op_1d(n: int, op: str, t: str) -> int:
    """CE MAKE_PERF_ESTIMATOR_NAME(BinaryOp1D) with internal::binaryOpInnerLoopCycles (not in
    place: 2 cycles of loop overhead on the assembly fast path, else 5)."""
    worker = 29 if t == "float" else 26
    per_worker = iceil(n, NUM_WORKERS)
    worker += _binary_inner(op, t, BINARY_PERF[(op, t)], per_worker, 2, 5)
    return NUM_WORKERS * worker + basic_op_supervisor_overhead()


def broadcast_scalar_1d(n: int, op: str, t: str) -> int:
    """CE internal::broadcastArithmetic1DCycleEstimate (BroadcastScalar1D, not in place)."""
    cycles = 20
    per_worker = iceil(n, NUM_WORKERS)
    cycles += _binary_inner(op, t, BROADCAST_PERF[(op, t)], per_worker, 1, 4)
    return cycles * NUM_WORKERS + basic_op_supervisor_overhead()


def broadcast_vector_outer(columns: int, rows: int, op: str, t: str, by_column: bool) -> int:
    """CE BroadcastVectorOuterCycleEstimate (ByRow / ByColumn supervisors: 1 cycle of inner-loop
    overhead, 25 cycles a row for the misaligned variant (columns not a multiple of the vector
    width), else 7): (15 + outer loops x (row overhead + basicOpLoopCycles)) x workers +
    basicOpSupervisorOverhead."""
    cpl, natural, _ = BROADCAST_PERF[(op, t)]
    vw = vector_width(t)
    cycles = 25 if columns % vw else 7
    elems = iceil(columns, NUM_WORKERS) if by_column else columns
    cycles += (cpl + 1) * (elems + vw - 1) // vw if natural else (cpl + 1) * elems
    outer = rows if by_column else iceil(rows, NUM_WORKERS)
    return (15 + outer * cycles) * NUM_WORKERS + basic_op_supervisor_overhead()


# --------------------------------------------------------------------------------------------
# ScaledAdd (PE getScaledArithmeticSupervisorCycleEstimate)


def scaled_add(n: int, t: str, op: str = "ADD", constant: bool = True, scaled_ptr64: bool = True) -> int:
    """PE getScaledArithmeticSupervisorCycleEstimate with dataType == dataBType == t, not memory
    constrained, no forced interleaving. op: ADD or AXPLUSBY."""
    if t in ("int", "unsigned int"):
        sup = 53 + 26 * (n // 3)
        sup += 6 if n % 3 == 0 else 6 + 26 * (n % 3)
        sup += 8
        if not constant:
            sup += 6
        return sup
    vw = vector_width(t)
    total_vectors = n // vw
    remaining_elems = n % vw
    vectors_per_worker = total_vectors // NUM_WORKERS
    remaining_vectors = total_vectors % NUM_WORKERS
    per_type = 21 + (6 if scaled_ptr64 else 0)
    sup = per_type + basic_op_supervisor_overhead() + (7 if remaining_elems == 0 else 13) + 12
    if op == "AXPLUSBY" and not constant:
        raise NotImplementedError("tensor scales are not transcribed")
    if not constant:
        sup += 6
    workers = []
    if t == "float" and op == "AXPLUSBY":
        for wid in range(NUM_WORKERS):
            c = 16
            num_vectors = vectors_per_worker  # + (remainingVectors < 0): unsigned, never
            if num_vectors != 0:
                c += 6 + 3 * (num_vectors - 1)
            if wid == remaining_vectors:
                c += 1
                if remaining_elems != 0:
                    c += 5
            c += 1
            workers.append(c)
    else:
        inner = 3
        for wid in range(NUM_WORKERS):
            c = 15
            num_vectors = vectors_per_worker
            if num_vectors != 0:
                c += 6 + inner * (num_vectors - 1)
            c += 2
            if wid == remaining_vectors:
                c += 1
                if remaining_elems != 0:
                    if t == "float":
                        c += 8
                    else:
                        c += 5
                        if remaining_elems >= 2:
                            c += 7
                            if remaining_elems == 3:
                                c += 6
            c += 1
            workers.append(c)
    return sup + max(workers) * NUM_WORKERS


# --------------------------------------------------------------------------------------------
# Cast1D (PE castWorkerCycles, getCast1DCycleEstimate)


def cast_worker(n: int, f: str, t: str) -> int:
    """PE castWorkerCycles (no 64-bit types)."""
    char_float = f == "unsigned char" and t == "half"
    float_char = f == "half" and t in ("unsigned char", "signed char", "char")
    if char_float or float_char:
        def work(atom, fill, loop, r1, r2, r3):
            c = 0
            n_atom = n // atom
            if n_atom > 0:
                c += fill + (n_atom - 1) * loop
            rem = n % atom
            return c + (2, r1, r2, r3)[rem]
        clamp = 3 if f == "unsigned char" else 4
        c = 4
        if char_float:
            c += work(4, 14, 9, 12, 14, 22)
        else:
            c += clamp + work(4, 19, 16, 14, 21, 29)
        return c
    dp = DATA_PATH_BITS // 8
    from_load = dp // TYPE_SIZE[f]
    to_store = dp // TYPE_SIZE[t]
    aux = f in ("float", "half") and t in ("float", "half")
    op_vw = min(from_load * 2, to_store * 1) if aux else 1
    load_c = op_vw // min(op_vw, from_load)
    store_c = op_vw // min(op_vw, to_store)
    cpv = max(load_c, store_c) + (0 if aux else 1)
    c = 19 + cpv * (n // op_vw)
    rem = n % op_vw
    bits = (op_vw - 1).bit_length()  # ceilLog2
    for i in range(bits):
        c += 1
        if rem & (1 << i):
            c += 2
    return c


def cast_1d(n: int, f: str, t: str) -> int:
    """PE getCast1DCycleEstimate."""
    per_worker = (n + NUM_WORKERS - 1) // NUM_WORKERS
    return 12 + NUM_WORKERS * (cast_worker(per_worker, f, t) + 18)


# --------------------------------------------------------------------------------------------
# DynamicSlice1D (CE internal::getDynamicSlice1DEstimate)


def dynamic_slice_1d(region: int, sub_elements: int, t: str) -> int:
    is8 = TYPE_SIZE[t] == 1
    per_worker = (region + NUM_WORKERS - 1) // NUM_WORKERS
    vw = 4 if is8 else DATA_PATH_BITS // (16 if t == "half" else 32)
    sup = basic_op_supervisor_overhead() + 1 + 6 + 1 + 6
    copies = per_worker // vw
    worker = 72 + (70 + 2 * copies) * sub_elements if is8 else 35 + (24 + 2 * copies) * sub_elements
    return sup + worker * NUM_WORKERS


# --------------------------------------------------------------------------------------------
# Fill (PE _fillCycleEstimate, getFill1DCycleEstimate)


def fill_1d(n: int, t: str) -> int:
    if TYPE_SIZE[t] == 1:
        return 28 + n // 4 if n < 64 else 39 + n // 8
    width = DATA_PATH_BITS // (16 if t == "half" else 32)
    if t == "half":
        if n == 1:
            return 15
        if n == 2:
            return 21
        return 26 + n // width
    return 16 + n // width + 6 + (1 if n % width == 1 else 0) + 1


# --------------------------------------------------------------------------------------------
# MultiSlice (PE getMultiSliceCycleEstimate, every offset in range, unsorted, one worker)


def multi_slice(elems_per_slice: int, num_offsets: int, t: str, is_update: bool = False) -> int:
    """PE getMultiSliceCycleEstimate, returned per worker (the estimate multiplies by the worker
    count for the MultiVertex; a worker vertex here is one of those workers)."""
    size = TYPE_SIZE[t]
    if size == 1:
        vw, cpv = 4, 3
    elif size == 2:
        vw, cpv = 2, 2
    else:
        vw, cpv = DATA_PATH_BITS // (size * 8), 2
    pro = 29 if is_update else 30
    vectors = iceil(elems_per_slice, vw)
    core = num_offsets * (19 + vectors * cpv)
    return pro + core


# --------------------------------------------------------------------------------------------
# ConvPartial1x1Out, the AMP vertex (PL getConvPartial1x1SupervisorCycleEstimate, the version with
# numConvUnits and a QUARTER path; half / float activations, float partials)

PL_1X1 = f"{PL} getConvPartial1x1SupervisorCycleEstimate (numConvUnits version)"


def _conv1x1_retention(float_acts: bool, float_partials: bool, units: int):
    """PL conv1x1WorkerRetentionSavings(floatActivations, floatPartials, numConvUnits)."""
    if not float_acts and (float_partials or (not float_partials and units == 16)):
        return 7, 3
    return 0, 0


def _conv1x1_inner(worklists, zeroing: bool, float_acts: bool, float_partials: bool, units: int) -> int:
    """PL getConvPartial1x1SupervisorInnerLoopCycleEstimateHalfFloat."""
    core = 8 if float_acts else 4
    ret = _conv1x1_retention(float_acts, float_partials, units)
    zero_per = 8 if (float_acts and units == 16) else (4 if float_partials else 2)
    common = (not float_acts and units == 16) or float_partials
    max_c = 0
    min_c = 0 if len(worklists) < NUM_WORKERS else 2 ** 63
    for worker in worklists:
        c = 0
        if worker:
            e = worker[0]
            z = 1 if zeroing else 0
            if e == 0:
                c += 24 if float_acts else (20 + (1 if zeroing else 2) if common else 24)
            elif e == 1:
                c += 47 + (2 + zero_per) * z if float_acts else (
                    31 + (1 if zeroing else 2) if common else 39 + (2 + zero_per) * z)
            elif e == 2:
                c += 46 + (2 + zero_per * 2) * z if float_acts else (
                    40 + (1 if zeroing else 2) if common else 40 + (2 + zero_per * 2) * z)
            else:
                if float_acts:
                    c += 46 + (2 + zero_per * e) * z + (e - 3) * core
                elif common:
                    c += (37 if zeroing else 38) + (e - 3) * core
                else:
                    c += 41 + (2 + zero_per * e) * z + (e - 3) * core
            c -= ret[0]
        max_c = max(max_c, NUM_WORKERS * c)
        min_c = min(min_c, NUM_WORKERS * c)
    return max(max_c, min_c + 14)


def conv_partial_1x1(m: int, k: int, n: int, float_acts: bool, units: int = 16) -> int:
    """PL getConvPartial1x1SupervisorCycleEstimate for one conv group, an m-position field split
    over the workers as evenly as possible (a worker with nothing to do has an empty worklist),
    in channels in groups of 8 (float) / 16 (half), out channels in groups of `units`, float
    partials, 32 weight-load cycles per pass (units x 32 bytes at 16 B/cycle)."""
    float_partials = True
    in_chans = 8 if float_acts else 16
    n_in = iceil(k, in_chans)
    n_out = iceil(n, units)
    worklists = []
    for w in range(NUM_WORKERS):
        width = m // NUM_WORKERS + (1 if w < m % NUM_WORKERS else 0)
        worklists.append([width] if width else [])
    inner_z = _conv1x1_inner(worklists, True, float_acts, float_partials, units)
    inner_n = _conv1x1_inner(worklists, False, float_acts, float_partials, units)
    passes = iceil(units, units)
    loads = units * 32 // 16
    ret = _conv1x1_retention(float_acts, float_partials, units)
    common = 1 if ((not float_acts and units == 16) or float_partials) else 0
    n_cg = 1
    return (50 + NUM_WORKERS * (ret[0] + ret[1] * (n_in * n_cg - 1))
            + n_cg * (12 + common
                      + (n_in - 1) * (15 - common + 1 + n_out * (19 + passes * (6 + loads + inner_n)))
                      + (10 + 1 + n_out * (19 - common + passes * (7 + loads + inner_z)))))


# --------------------------------------------------------------------------------------------
# ReduceAdd of a matmul's partials (PL getReduceCycleEstimate, multi-input; estimateCastCycles)

PL_REDUCE = f"{PL} getReduceCycleEstimate (not single-input) / estimateCastCycles (one partial)"


def reduce_add(out_size: int, partials: int, out_float: bool) -> int:
    """float partials: P >= 2 the supervisor ReduceAdd; P = 1 a cast of the partials."""
    if partials == 1:
        per = (out_size + NUM_WORKERS - 1) // NUM_WORKERS
        load = (per + 2 - 1) // 2
        write = (per + (2 if out_float else 4) - 1) // (2 if out_float else 4)
        return (max(load, write) + 26) * NUM_WORKERS
    acc = 4
    in_dp = DATA_PATH_BITS // 32
    cycles = 32
    cpl = acc // min(acc, in_dp) + 1
    loops = out_size // acc
    for i in range((acc - 1).bit_length()):
        if out_size & (1 << i):
            loops += 1
    per_worker = loops // NUM_WORKERS
    if loops % NUM_WORKERS:
        if out_size & (acc - 1):
            cycles += 2 * partials + 13
        else:
            per_worker += 1
    cycles += (cpl * partials + (7 if out_float else 6)) * per_worker
    return cycles * NUM_WORKERS


# --------------------------------------------------------------------------------------------
# Select, BroadcastSelect, Clamp (CE selectCycles, BroadcastSelect, clampCycles; one region)


def select(n: int, t: str) -> int:
    """CE Select: 5 + selectCycles = 6 + basicOpLoopCycles(n, 1, 5)."""
    return 5 + 6 + 5 * (n + 1 - 1) // 1


def broadcast_select(n: int, t: str) -> int:
    """CE BroadcastSelect (both value operands scalars): 9 + 1 + per region by type size."""
    c = 9 + 1
    size = TYPE_SIZE[t]
    if size == 4:
        c += 5 + 4 * n + 3
    elif size == 2:
        c += (23 + n * 4) if n & 1 else (30 + n * 4)
    else:
        c += 40 + (n // 4) * 17 + 26
    return c


def clamp(n: int, t: str) -> int:
    """CE Clamp: 5 + clampCycles = 6 + basicOpLoopCycles(n, vw, cpv)."""
    if t == "float":
        vw, cpv = DATA_PATH_BITS // 32, 2
    elif t == "half":
        vw, cpv = DATA_PATH_BITS // 16, 2
    else:
        vw, cpv = 1, 7
    return 5 + 6 + cpv * (n + vw - 1) // vw


# --------------------------------------------------------------------------------------------
# Histogram2D (CE, one data region, unpacked pointers: getUnpackCost = 0)


def histogram_2d(n: int, limits: int, t: str, absolute: bool) -> int:
    a = 1 if absolute else 0
    count = limits + 1  # histogramCount: one more bin than limits
    vw = DATA_PATH_BITS // (32 if t == "float" else 16)
    cycles = 7
    if t == "half":
        cycles += 5
        loop = 16
        if n & 1:
            loop += 3 + a
        if n & 2:
            loop += 3 + a
        loop += (3 + a) * (n // vw)
        cycles += (loop + 6) * (count - 1)
    else:
        cycles += 3
        loop = 10
        if n & 1:
            loop += 2 + a
        loop += (3 + a) * (n // vw)
        cycles += (loop + 5) * (count - 1)
    regions = 1
    cycles += 3 + 3 * (regions - 1)
    cycles += 10 + (count - 1) * 2
    return cycles


# --------------------------------------------------------------------------------------------
# poprand (lib/poprand/poprandCycleEstimators.cpp): NormalSupervisor, DropoutSupervisor

PR = "graphcore/poplibs lib/poprand/poprandCycleEstimators.cpp"


def normal_supervisor(n: int, t: str) -> int:
    vw = DATA_PATH_BITS // (32 if t == "float" else 16)
    c = 4 + 4 * (n + vw - 1) // vw
    if t == "float":
        c += 22 * NUM_WORKERS + (3 if n % vw else 0)
    else:
        c += 24 * NUM_WORKERS + (12 if n % vw else 0)
    return c


def dropout_supervisor(n: int, t: str) -> int:
    vw = DATA_PATH_BITS // (32 if t == "float" else 16)
    c = 6 + 24 * NUM_WORKERS + 2 * (n + vw - 1) // vw
    return c + ((1 if t == "float" else 9) if n % vw else 0)


def iota(n: int, t: str) -> int:
    """CE Iota, one region: 10 + 4 + 3 per vector (getVectorWidth of the output type)."""
    vw = vector_width(t)
    return 10 + 4 + 3 * ((n + vw - 1) // vw)


def multi_update_op(elems_per_slice: int, num_offsets: int, t: str) -> int:
    """PE getMultiUpdateOpCycleEstimate, unscaled, every offset in range, unsorted, one worker's
    share (the estimate multiplies by the workers for the MultiVertex). Mk2 atomic writes are
    32-bit."""
    cycles = 3
    bpe = TYPE_SIZE[t]
    four = bpe == 4
    cycles += 29 if four else 30
    if num_offsets == 0:
        return cycles
    per_in = 11 if four else 12
    atomic = 4
    bytes_per_atom = atomic * bpe // _gcd(atomic, bpe)  # lcm
    elems_per_atom = bytes_per_atom // bpe
    if elems_per_slice % elems_per_atom:  # sub-word writes
        per_in += elems_per_slice * 20
    else:
        per_in += (elems_per_slice // elems_per_atom - 1) * 3
    return cycles + per_in * num_offsets


def _gcd(a: int, b: int) -> int:
    while b:
        a, b = b, a % b
    return a


# --------------------------------------------------------------------------------------------
# Reduce (lib/popops/reduction/CycleEstimationFunctions.cpp @ b2996457, getCycleEstimateForReduceVertex
# with the SCALAR_OUTPUT_SINGLE_INPUT and STRIDED_REDUCE specialisations, not an update)

RED = ("graphcore/poplibs lib/popops/reduction/CycleEstimationFunctions.cpp@"
       "b2996457da99ac9bffb47d04c3243e98d476aa09")


def _reduce_widths(op: str, t_in: str, strided: bool):
    """(dataPathWidth, vectorWidth, the op vector width passed on, cyclesPerOp), as
    getCycleEstimateForReduceVertex works them out."""
    size = TYPE_SIZE[t_in]
    acc = 8 if t_in == "half" else (4 if t_in == "float" else 1)
    dpw = DATA_PATH_BITS // (size * 8)
    vw = vector_width(t_in)
    if op != "LOG_ADD":
        return dpw, vw, acc, 1
    if strided:  # log-add has an assembler strided vertex
        return dpw, vw, (4 if t_in == "half" else 2), (13 if t_in == "half" else 23)
    return dpw, vw, 1, 20  # C++ scalar log-add


def reduce_single_input(k: int, op: str, t_in: str, t_out: str) -> int:
    """getCyclesEstimateForSingleInput."""
    dpw, vw, acc, cpo = _reduce_widths(op, t_in, False)
    uses_acc = op in ("ADD", "SQUARE_ADD")
    op_vw = acc if uses_acc else vw
    per_cycle = min(op_vw, dpw)
    loads = op_vw // per_cycle
    cpl = max(loads, cpo)
    per_loop = per_cycle * loads
    cycles = 1 + 2 + 6 + cpl * k // per_loop + 5 + k % per_loop + 3
    if t_out != "float":
        cycles += 5
    return cycles


def reduce_strided(n_out: int, k: int, op: str, t_in: str, t_out: str) -> int:
    """getCyclesEstimateForStridedReduce with one outer stride and a stride of n_out (the
    partials [k, n_out] row-major)."""
    dpw, vw, acc, cpo = _reduce_widths(op, t_in, True)
    uses_acc = op in ("ADD", "SQUARE_ADD")
    op_vw = acc if uses_acc else vw
    cycles = 2 + 2 + 6 + 5
    if t_in == "half":
        table = {"half": {"ADD": 7, "MAX": 7, "MIN": 7, "LOG_ADD": 7},
                 "float": {"ADD": 6, "MAX": 7, "MIN": 7, "LOG_ADD": 7}}
        post = 1 + table.get(t_out, {}).get(op, 0)
    else:
        post = (3 if op == "ADD" else 2) + (2 if t_out in ("half", "float") else 0)
    outer = 3 + post + 1 * (3 + cpo * (k - 1))
    per_loop = _gcd(min(op_vw, dpw), n_out)
    return cycles + outer * ((n_out + per_loop - 1) // per_loop)


# --------------------------------------------------------------------------------------------
# popnn (lib/popnn/popnnCycleEstimators.cpp): ReduceMaxClassSparse, ReduceMaxNClassSparse

NN = "graphcore/poplibs lib/popnn/popnnCycleEstimators.cpp"


def reduce_max_class_sparse(n: int, t: str) -> int:
    cycles = 5
    if t in ("half", "float"):
        cycles += 2 + 3 + 3 + 1 + (n - 1) * 3 + 3 + 6 + 4
    else:
        cycles += 18 + n * 6
    return cycles


def reduce_max_n_class_sparse(n: int, k: int, sorted_: bool) -> int:
    import math

    cycles = 10 + 2
    cycles += 23
    for i in range(1, k):
        cycles = int(cycles + 13 + math.log(i) * 20)
    cycles = int(cycles + (n - k) * (13 + math.log(k) * 20))
    cycles += 8 * k
    if sorted_:
        for i in range(k, 0, -1):
            cycles += 10
            cycles = int(cycles + 20 * math.log(i))
    return cycles


def transpose_2d(rows: int, cols: int, matrices: int, t: str) -> int:
    """CE Transpose2d (the version with the numSrcRows < 512 output-stride condition)."""
    rpt = 0x0FFF + 1
    if TYPE_SIZE[t] == 4:
        if rows % 2 == 0 and cols % 2 == 0 and cols // 2 < rpt and rows * (cols - 2) // 2 < 512 and rows < 512:
            return 27 + matrices * (11 + (rows // 2) * (6 + 3 * (cols // 2 - 1)))
        return 13 + matrices * (8 + cols * (5 + (rows * 4) // 2))
    if rows % 4 == 0 and cols % 4 == 0 and cols >= 8 and cols // 4 < rpt and 1 + 3 * (cols // 4) < 512:
        return 37 + matrices * (12 + (rows // 4) * (15 + 4 * (cols // 4 - 2)))
    if rows % 4 == 0 and cols == 4 and rows // 4 < rpt and 1 + 3 * (rows // 4) < 512:
        if rows == 4:
            return 32 + 15 * matrices
        return 28 + matrices * (17 + (20 + 4 * (rows // 4 - 2)))
    return 15 + matrices * (8 + cols * (5 + (rows * 5) // 2))


# --------------------------------------------------------------------------------------------
# ConvPartialHorizontalMac (PL getConvPartialHorizontalMacSupervisorCycleEstimate and the
# poplinCycleEstimators.cpp vertex estimate: zero cycles + supervisor estimate; float partials)

PL_HMAC = (f"{PL} getConvPartialHorizontalMacSupervisorCycleEstimate + poplinCycleEstimators.cpp "
           "ConvPartialHorizontalMac (zeroing)")
PL_VMAC = (f"{PL} getConvPartialVerticalMacSupervisorCycleEstimate + poplinCycleEstimators.cpp "
           "ConvPartialVerticalMac (half; float: the same loop on float pairs, a derivation)")


def _dense_dot(vector_width_acts: int, float_acts: bool, size: int) -> int:
    """PL getDenseDotProductCycles, float partials (so never half/half)."""
    acts_per_64 = 2 if float_acts else 4
    num_out = 1
    inner = (1 + 2) * num_out + 0 + 3 + 1
    i = vector_width_acts.bit_length() - 1
    while i >= 0:
        width = 1 << i
        if size % width == 0:
            per = 1 if width >= acts_per_64 else 2
            extra = num_out if width < acts_per_64 else 0
            return inner + extra + (size // width) * per
        i -= 1
    raise AssertionError


def _zero_supervisor(per_worker_elems: list, groups: int, is_float: bool) -> int:
    """PL getZeroSupervisorVertexCycleEstimate (dataPathWidth 64)."""
    width = 64 // (32 if is_float else 16)
    worst = 0
    for elems in per_worker_elems:
        vectors = (elems + width - 1) // width
        worst = max(worst, vectors + (14 if is_float else 15) - (9 if is_float else 10))
    return worst * NUM_WORKERS * groups


def conv_partial_hmac(worker_k_sizes, conv_groups: int, in_groups: int, out_groups: int, zeros_info: int,
                      float_acts: bool) -> int:
    """The ConvPartialHorizontalMac vertex estimate: worker_k_sizes[context][k] is the list of
    numConv of that context's entries for kernel position k; one input and one output channel per
    group (our vertices'), float partials."""
    zero = _zero_supervisor([(zeros_info + NUM_WORKERS - 1) // NUM_WORKERS] * NUM_WORKERS,
                            out_groups * conv_groups, True)
    overhead = 58 if float_acts else 63
    if in_groups == 0:
        return zero + overhead
    dot = _dense_dot(2 if float_acts else 4, float_acts, 1)
    used = len(worker_k_sizes)
    max_c, min_c = 0, (0 if used < NUM_WORKERS else 2 ** 63)
    for per_k in worker_k_sizes:
        c = 0
        for sizes in per_k:  # getConvPartialHorizontalMacCycleEstimate, one per kernel position
            c += 16
            for size in sizes:
                c += 7 if size == 0 else 19 + size * (7 + 1 * dot)
        c += 16  # workerNonLoopOverhead
        max_c = max(max_c, NUM_WORKERS * c)
        min_c = min(min_c, NUM_WORKERS * c)
    inner = max(max_c, min_c)
    return zero + overhead + NUM_WORKERS * 9 + conv_groups * (23 + in_groups * (15 + out_groups * (10 + inner)))


def conv_partial_vmac(worker_sizes, groups: int, kernel_size: int, float_acts: bool) -> int:
    """The ConvPartialVerticalMac vertex estimate: worker_sizes[context] lists each entry's
    numElems - 1 (what the worklists hold); `groups` independent conv groups processed
    convGroupsPerGroup at a time (4 half, 2 float), numInGroups 1, float partials."""
    lanes = 2 if float_acts else 4
    used = len(worker_sizes)
    max_c, min_c = 0, (0 if used < NUM_WORKERS else 2 ** 63)
    for sizes in worker_sizes:
        c = 19 if sizes else 0  # floatPartials ? 19 : 18, for a worker with work
        for size in sizes:
            c += 7 + 5 + 3 + 2 * max(size - 1, 0) * (lanes // lanes)
        max_c = max(max_c, NUM_WORKERS * c)
        min_c = min(min_c, NUM_WORKERS * c)
    inner = max(max_c, min_c)
    out_elems = kernel_size * lanes
    zero = 4 + (out_elems + 1) // 2
    per_worker = (out_elems + NUM_WORKERS - 1) // NUM_WORKERS
    reduction = 10 - 1 + ((7 + 2 + 2 * (NUM_WORKERS - 1)) * per_worker) // lanes
    cgg = (groups + lanes - 1) // lanes
    return 61 + 14 + 1 + cgg * (zero + 32 + 1 * (24 + inner) + reduction)


# --------------------------------------------------------------------------------------------
# popnn NonLinearityGrad1D (popnnCycleEstimators.cpp; op cycles getNonLinearityOpCycles)

PN_NL_GRAD = ("graphcore/poplibs lib/popnn/popnnCycleEstimators.cpp NonLinearityGrad1D, op cycles "
              "lib/popnn/PerformanceEstimation.hpp getNonLinearityOpCycles")
_NL_OP = {("RELU", "float"): 1, ("RELU", "half"): 1, ("SIGMOID", "float"): 5, ("SIGMOID", "half"): 2,
          ("TANH", "float"): 5, ("TANH", "half"): 1}


def nonlinearity_grad_1d(n: int, op: str, t: str) -> int:
    vw = vector_width(t)
    op_c = _NL_OP[(op, t)]
    vectors, rem = n // vw, n % vw
    vpw = (vectors + NUM_WORKERS - 1) // NUM_WORKERS
    worker = 3 + 5 + 2 + 3 + 3 + 3 + 1 + ((4 + (vpw - 1) * op_c + 1) if vpw else 0)
    if t == "float":
        worker += 2 + 2 + ((op_c + 1) if rem else 0)
    else:
        worker += 2 + 2 + ((op_c + 2) if rem & 2 else 0) + 2 + ((op_c + 4) if rem & 1 else 0)
    return 9 + worker * NUM_WORKERS
