"""Write codelets/reference_cycles.csv: poplibs' estimates (from the transcriptions in
poplibs_estimators.py) at sizes covering each code path and a row
per codelet that poplibs has no estimator for.

    python tests/calibration/make_reference_table.py [--check]

--check: exit 1 when the shipped table differs from what this script writes (the test suite runs
that check, so the table and the transcriptions cannot drift apart).
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

import poplibs_estimators as pe  # noqa: E402

TABLE = os.path.join(ROOT, "codelets", "reference_cycles.csv")

# sizes: tiny, every remainder of 6 workers and of the vector widths, n % 6 == 0 and not, large
SIZES = (1, 2, 3, 4, 5, 6, 7, 8, 11, 12, 13, 24, 47, 48, 60, 64, 66, 96, 100, 127, 128, 255, 256, 512, 1000,
         1024, 4096)
SHORT_SIZES = (1, 3, 6, 7, 13, 48, 64, 100, 1024)

# Hardware measurements (the Mk2 ScaledAdd, tutorial 6's exchange, ...) are workloads, not single
# vertices: they live in codelets/reference_hardware.csv (python -m profiler.calibrate --hardware).

# codelets with no poplibs estimator (or no poplibs counterpart): what their model rests on
NO_ESTIMATOR = [
    ("ipu::CumSum", "float", 64, "",
     "no poplibs estimator: PopART lowers cumsum to a matmul; our CumSum vertex model is a derivation "
     "(codelets/rowwise.py cumsum_cycles)"),
    ("ipu::Median", "float", 64, "",
     "no poplibs estimator of its own: modelled as popnn ReduceMaxNClassSparse with k = n/2 (codelets/rowwise.py)"),
    ("ipu::ArgMinMaxCombine", "float", 64, "",
     "no poplibs estimator for the combine stage: derived from ReduceMaxClassSparse (codelets/rowwise.py)"),
    ("ipu::HistogramCombine", "float", 64, "",
     "no poplibs estimator: poplibs sums partial histograms with popops::reduce; derivation in codelets/histogram.py"),
    ("ipu::Copy", "float", 64, "",
     "no poplibs estimator for a plain on-tile copy vertex: modelled on BroadcastSelectorSelect's LongMemcpy "
     "(codelets/fill.py copy_cycles)"),
    ("ipu::ModifySeed", "int", 1, "",
     "no poplibs estimator: a few integer ops on the seed (codelets/rng.py)"),
    ("poprand::UniformSupervisor", "float", 64, "",
     "not scored on purpose: poplibs' UniformSupervisor estimate divides the data path's bits by 2 / 4 "
     "(vectors of 32 / 16 elements, a units slip); our RandomUniform uses 2 / 4 elements per 64-bit vector, "
     "as NormalSupervisor does (codelets/rng.py uniform_cycles)"),
    ("popops::EncodeOneHotCustomValues", "float", 64, "",
     "partly derived: poplibs' estimate is 100 cycles per index; our vertex also fills the output with the off "
     "value first (one 64-bit store per cycle, a derivation; codelets/indexing.py encode_one_hot_cycles)"),
    ("popops::Reduce", "float->float", 64, "spec=ALL_REGIONS_CONTINUOUS;op=ADD;outputs=8",
     "not scored on purpose: poplibs' getCycleEstimateReduceAllRegionsContinuous is passed numOutputsM1, one "
     "output short; our model counts every output (codelets/reduce.py reduce_cycles)"),
    ("ipu::RoiAlign", "float", 64, "",
     "no poplibs estimator: poplibs has no RoiAlign vertex; the model is a derivation (codelets/roi_align.py)"),
    ("ipu::RoiAlignGrad", "float", 64, "",
     "no poplibs estimator: poplibs has no RoiAlign vertex; the model is a derivation (codelets/roi_align.py)"),
    ("ipu::CastThenPow2Scale", "half->quart", 64, "",
     "no poplibs estimator for QUARTER: castWorkerCycles has no float8 case; derivation in codelets/cast_float8.py"),
    ("ipu::Pow2ScaleThenCast", "quart->half", 64, "",
     "no poplibs estimator for QUARTER: castWorkerCycles has no float8 case; derivation in codelets/cast_float8.py"),
]
# codelets whose model follows a poplibs estimator that is not transcribed in poplibs_estimators.py yet
NOT_TRANSCRIBED = [
    ("poplin::ConvPartial1x1Out", "quart", 64, "m=8;k=32;n=8",
     "poplin getConvPartial1x1SupervisorCycleEstimate, float8 AMP (our MatMulBlockPow2Scaled)"),
]


def _hmac_lists(cv, image, r0, rows, k, stride, pad, out_w):
    """The work lists of a forward vertex over output rows [r0, r0 + rows) (codelets/conv.py)."""
    lo = max(0, r0 * stride - pad)
    hi = min(image, (r0 + rows - 1) * stride - pad + k)
    lists, ent = cv.hmac_worklists(1, (r0, 0), (r0 + rows, out_w), (lo, 0), (hi - lo, image), (k, k),
                                   (stride, stride), (1, 1), (pad, pad), (image, image))
    return lists, ent, hi - lo


def _vmac_lists(cv, image, r0, rows, k, stride, pad, out_w):
    lo = max(0, r0 * stride - pad)
    hi = min(image, (r0 + rows - 1) * stride - pad + k)
    return cv.vmac_worklists(1, (r0, 0), (r0 + rows, out_w), (lo, 0), (hi - lo, image), (k, k),
                             (stride, stride), (1, 1), (pad, pad), (image, image))


def rows():
    out = []

    def add(vertex, dtype, n, params, cycles, source):
        out.append((vertex, dtype, n, params, "" if cycles is None else int(cycles), source))

    src = f"{pe.PE} getScaledArithmeticSupervisorCycleEstimate (constant scales, ScaledPtr64)"
    for t in ("float", "half"):
        for n in SIZES:
            add("popops::ScaledAddSupervisor", t, n, "op=ADD", pe.scaled_add(n, t), src)
    for n in SHORT_SIZES:
        add("popops::ScaledAddSupervisor", "float", n, "op=AXPLUSBY", pe.scaled_add(n, "float", "AXPLUSBY"), src)
        add("popops::ScaledAddSupervisor", "half", n, "op=AXPLUSBY", pe.scaled_add(n, "half", "AXPLUSBY"), src)
        add("popops::ScaledAddSupervisor", "int", n, "op=ADD", pe.scaled_add(n, "int"), src)

    src = f"{pe.CE} BinaryOp1D + binaryOpInnerLoopCycles"
    for op, types in (("ADD", ("float", "half", "int")), ("MULTIPLY", ("float", "half")),
                      ("DIVIDE", ("float", "half")), ("MAXIMUM", ("float", "half"))):
        for t in types:
            for n in (SIZES if op == "ADD" else SHORT_SIZES):
                add("popops::BinaryOp1D", t, n, f"op={op}", pe.binary_op_1d(n, op, t), src)
    src = f"{pe.CE} broadcastArithmetic1DCycleEstimate (BroadcastScalar1D)"
    for op, types in (("ADD", ("float", "half", "int")), ("MULTIPLY", ("float", "half")), ("DIVIDE", ("float", "half"))):
        for t in types:
            for n in SHORT_SIZES[1:]:  # n = 1 is a BinaryOp1D (nothing to broadcast)
                add("popops::BroadcastScalar1D", t, n, f"op={op}", pe.broadcast_scalar_1d(n, op, t), src)
    src = f"{pe.CE} UnaryOp1D + unaryOpInnerLoopCycles"
    for op, types in (("TANH", ("float", "half")), ("EXPONENT", ("float", "half")), ("SQRT", ("float", "half")),
                      ("NEGATE", ("float", "half", "int")), ("ABSOLUTE", ("float", "int")),
                      ("FLOOR", ("float", "half")), ("SIGNUM", ("float", "half")), ("LOGARITHM_ONE_PLUS", ("float",))):
        for t in types:
            for n in (SIZES if op == "TANH" else SHORT_SIZES):
                add("popops::UnaryOp1D", t, n, f"op={op}", pe.unary_op_1d(n, op, t), src)

    src = f"{pe.PE} getCast1DCycleEstimate + castWorkerCycles"
    for f, t in (("float", "half"), ("half", "float"), ("float", "int"), ("int", "float"), ("half", "unsigned char"),
                 ("unsigned char", "half"), ("half", "signed char")):
        for n in (SIZES if (f, t) == ("float", "half") else SHORT_SIZES):
            add("popops::Cast1D", f"{f}->{t}", n, "", pe.cast_1d(n, f, t), src)

    src = f"{pe.CE} internal::getDynamicSlice1DEstimate"
    for t in ("float", "half", "int", "unsigned char"):
        for region, sub in ((1, 1), (5, 3), (6, 1), (13, 2), (48, 4), (64, 8), (100, 1), (1024, 2)):
            add("popops::DynamicSlice1D", t, region * sub, f"regionSize={region};numSubElements={sub}",
                pe.dynamic_slice_1d(region, sub, t), src)

    src = f"{pe.PE} getFill1DCycleEstimate (_fillCycleEstimate)"
    for t in ("float", "half", "int", "unsigned char"):
        for n in (1, 2, 3, 4, 7, 16, 63, 64, 100, 1024):
            add("popops::Fill", t, n, "", pe.fill_1d(n, t), src)

    src = f"{pe.PE} getMultiSliceCycleEstimate, per worker (all offsets in range, unsorted)"
    for t in ("float", "half", "unsigned char"):
        for region, m in ((1, 1), (3, 4), (8, 10), (64, 2), (100, 7)):
            add("popops::MultiSlice", t, region * m, f"regionSize={region};numOffsets={m}",
                pe.multi_slice(region, m, t), src)

    for t, fa in (("float", True), ("half", False)):
        for m, k, n in ((1, 8, 16), (2, 16, 16), (3, 8, 16), (5, 24, 32), (6, 64, 64), (7, 100, 30), (13, 8, 16),
                        (48, 256, 64), (64, 64, 64), (100, 300, 200), (114, 104, 64), (256, 256, 256)):
            add("poplin::ConvPartial1x1Out", t, m * n, f"m={m};k={k};n={n}", pe.conv_partial_1x1(m, k, n, fa),
                pe.PL_1X1)

    for t, of in (("float", True), ("half", False)):
        for n in (1, 3, 4, 5, 8, 24, 25, 64, 100, 1000):
            for p in (1, 2, 3, 10):
                if p == 1 and of:
                    continue  # float partials into a float output: nothing to do
                add("poplin::ReduceAdd", f"float->{t}", n, f"numPartials={p}", pe.reduce_add(n, p, of), pe.PL_REDUCE)

    for t in ("float", "half", "int", "bool"):
        for n in (1, 2, 3, 4, 7, 64, 100):
            add("popops::Select", t, n, "", pe.select(n, t), f"{pe.CE} Select / selectCycles")
            if n > 1:  # with n = 1 nothing is broadcast
                add("popops::BroadcastSelect", t, n, "", pe.broadcast_select(n, t), f"{pe.CE} BroadcastSelect")
    for t in ("float", "half", "int"):
        for n in (1, 2, 3, 4, 5, 7, 64, 100):
            add("popops::Clamp", t, n, "", pe.clamp(n, t), f"{pe.CE} Clamp / clampCycles")

    for op in ("ADD", "SUBTRACT", "MULTIPLY"):
        for t in ("float", "half"):
            for cols, rows in ((1, 1), (3, 7), (8, 12), (13, 5), (24, 6), (49, 16), (100, 3)):
                for by_column in (False, True):
                    vertex = f"popops::BroadcastVectorOuterBy{'Column' if by_column else 'Row'}Supervisor"
                    add(vertex, t, cols * rows, f"op={op};columns={cols}",
                        pe.broadcast_vector_outer(cols, rows, op, t, by_column),
                        f"{pe.CE} BroadcastVectorOuterCycleEstimate")
    for t in ("float", "half"):
        for n in (1, 2, 3, 4, 7, 64, 101):
            for limits, ab in ((1, False), (4, False), (4, True), (15, True)):
                add("popops::Histogram2D", t, n, f"limits={limits};absolute={int(ab)}",
                    pe.histogram_2d(n, limits, t, ab), f"{pe.CE} Histogram2D (one region, unpacked pointers)")

    for t in ("float", "half"):
        for n in (1, 2, 3, 4, 5, 7, 64, 1000):
            add("poprand::NormalSupervisor", t, n, "", pe.normal_supervisor(n, t), f"{pe.PR} NormalSupervisor")
            add("poprand::DropoutSupervisor", t, n, "", pe.dropout_supervisor(n, t), f"{pe.PR} DropoutSupervisor")

    for t in ("float", "half", "unsigned char"):
        for region, m in ((1, 1), (3, 4), (8, 10), (64, 2), (100, 7)):
            add("popops::MultiUpdate", t, region * m, f"regionSize={region};numOffsets={m}",
                pe.multi_slice(region, m, t, is_update=True),
                f"{pe.PE} getMultiSliceCycleEstimate (isUpdate), per worker")
    for t in ("float", "half"):
        for region, m in ((1, 1), (2, 3), (3, 4), (8, 10), (64, 2), (101, 7)):
            add("popops::MultiUpdateOp", t, region * m, f"regionSize={region};numOffsets={m};op=ADD",
                pe.multi_update_op(region, m, t),
                f"{pe.PE} getMultiUpdateOpCycleEstimate (unscaled), per worker")
    for ti, to in (("float", "float"), ("half", "half"), ("half", "float"), ("float", "half"), ("int", "int")):
        for op in ("ADD", "MAX", "SQUARE_ADD", "LOG_ADD"):
            if ti == "int" and op not in ("ADD", "MAX"):
                continue
            for k in (1, 2, 3, 8, 17, 1000):
                add("popops::Reduce", f"{ti}->{to}", k, f"spec=SINGLE_INPUT;op={op};outputs=1",
                    pe.reduce_single_input(k, op, ti, to), f"{pe.RED} getCyclesEstimateForSingleInput")
            for n_out, k in ((2, 3), (4, 8), (12, 5), (100, 2)):
                add("popops::Reduce", f"{ti}->{to}", n_out * k, f"spec=STRIDED_REDUCE;op={op};outputs={n_out}",
                    pe.reduce_strided(n_out, k, op, ti, to), f"{pe.RED} getCyclesEstimateForStridedReduce")
    for t in ("float", "half", "int"):
        for n in (1, 2, 10, 1000):
            add("popnn::ReduceMaxClassSparse", t, n, "", pe.reduce_max_class_sparse(n, t),
                f"{pe.NN} ReduceMaxClassSparse (one row)")
    for n, k in ((10, 1), (10, 3), (100, 5), (1000, 8)):
        for srt in (False, True):
            add("popnn::ReduceMaxNClassSparse", "float", n, f"k={k};sorted={int(srt)}",
                pe.reduce_max_n_class_sparse(n, k, srt), f"{pe.NN} ReduceMaxNClassSparse (one row)")
    for t in ("float", "half", "int"):
        for rows, cols, mats in ((2, 2, 1), (4, 4, 1), (4, 8, 3), (8, 4, 2), (3, 5, 1), (16, 16, 1), (600, 2, 1),
                                 (64, 12, 2)):
            add("popops::Transpose2d", t, rows * cols * mats, f"rows={rows};cols={cols};matrices={mats}",
                pe.transpose_2d(rows, cols, mats, t), f"{pe.CE} Transpose2d")
    for n in (1, 2, 3, 8, 63, 1000):
        add("popops::Iota", "int", n, "", pe.iota(n, "int"), f"{pe.CE} Iota (one region)")

    # the grouped / depthwise convolution vertices over sub-fields of a (image x image) input:
    # rows [r0, r0 + rows) of the output, whole width; the work lists are the vertex's input
    from codelets import conv as cv
    for t, fa in (("float", True), ("half", False)):
        for cg, og, ig, image, r0, rows, k, stride in ((1, 1, 1, 14, 0, 14, 3, 1), (3, 1, 1, 112, 40, 3, 3, 1),
                                                       (2, 2, 3, 9, 0, 5, 5, 2), (8, 1, 1, 7, 0, 7, 5, 1),
                                                       (1, 1, 1, 56, 27, 1, 3, 2)):
            pad = k // 2
            out_w = (image + 2 * pad - k) // stride + 1
            params = (f"convGroups={cg};outGroups={og};inGroups={ig};image={image};rowStart={r0};rows={rows};"
                      f"kernel={k};stride={stride}")
            lists, ent, _ = _hmac_lists(cv, image, r0, rows, k, stride, pad, out_w)
            sizes = [[[int(ent[e, 1]) for e in lists[kf * 6 + w]] for kf in range(k * k)] for w in range(6)]
            add("poplin::ConvPartialHorizontalMac", t, rows * out_w, params,
                pe.conv_partial_hmac(sizes, cg, ig, og, rows * out_w, fa), pe.PL_HMAC)
            vl, ve = _vmac_lists(cv, image, r0, rows, k, stride, pad, out_w)
            vsizes = [[int(ve[e, 3]) - 1 for e in lst] for lst in vl]
            add("poplin::ConvPartialVerticalMac", t, rows * out_w, params,
                pe.conv_partial_vmac(vsizes, cg * og * ig, k * k, fa), pe.PL_VMAC)
    for op in ("RELU", "SIGMOID", "TANH"):
        for t in ("float", "half"):
            for n in SHORT_SIZES:
                add("popnn::NonLinearityGrad1D", t, n, f"op={op}", pe.nonlinearity_grad_1d(n, op, t), pe.PN_NL_GRAD)

    for vertex, dtype, n, params, why in NO_ESTIMATOR:
        add(vertex, dtype, n, params, None, why)
    for vertex, dtype, n, params, where in NOT_TRANSCRIBED:
        add(vertex, dtype, n, params, None, f"poplibs estimator not transcribed yet: {where}; the model cites it")
    return out


def render() -> str:
    buf = io.StringIO()
    buf.write("# Reference cycles for `python -m profiler.calibrate`. Generated by "
              "tests/calibration/make_reference_table.py from hand transcriptions of poplibs' estimators "
              "(tests/calibration/poplibs_estimators.py); do not edit by hand.\n")
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(("vertex", "dtype", "n", "params", "cycles", "source"))
    for r in rows():
        w.writerow(r)
    return buf.getvalue()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args(argv)
    text = render()
    if args.check:
        with open(TABLE, encoding="utf-8") as fh:
            same = fh.read() == text
        print("reference table up to date" if same else f"{TABLE} is out of date: run {__file__}")
        return 0 if same else 1
    with open(TABLE, "w", encoding="utf-8") as fh:
        fh.write(text)
    print(f"wrote {os.path.relpath(TABLE)} ({len(rows())} rows)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
