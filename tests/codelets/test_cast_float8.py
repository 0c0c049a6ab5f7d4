"""float8 formats and casts: ml_dtypes is the reference, bit for bit.

- the formats are ml_dtypes' float8_e4m3fnuz / float8_e5m2fnuz (bias, range, NaN code);
- the kernels' rounding (codelets.float8.encode) against ml_dtypes over every float16, a sweep of
  float32 bit patterns, every float8 value and the rounding boundaries between float8 values;
- the Pow2ScaleThenCast / CastThenPow2Scale vertices over all 256 codes in every direction and
  scale, overflow (NaN or saturate), subnormals, ties, NaN; scales out of range wrap as the 6-bit
  metadata field does, or stop the program when checked;
- cycles from the cost model.
"""
import ml_dtypes
import numpy as np
import pytest

import ipu
from codelets import float8 as f8
from codelets.cast_float8 import Log2ScaleOutOfRange, float8_cast_cycles

FORMATS = ["float8_143", "float8_152"]
SCALES = [-32, -7, -1, 0, 1, 5, 31]


def test_formats_are_ml_dtypes_fnuz():
    f8.check_ml_dtypes_agree()
    assert f8.F143.max == 240.0 and f8.F152.max == 57344.0
    assert f8.F143.smallest_subnormal == 2.0 ** -10 and f8.F152.smallest_subnormal == 2.0 ** -17
    for name in FORMATS:
        v = f8.DECODE[name]
        assert np.isnan(v[0x80]) and np.isnan(v).sum() == 1  # one NaN, no infinities
        assert np.isfinite(v[np.arange(256) != 0x80]).all()
        assert v[0] == 0 and not np.signbit(v[0])


def _sweep(rng):
    halves = np.arange(65536, dtype=np.uint16).view(np.float16)
    bits = rng.integers(0, 2 ** 32, 100_000, dtype=np.uint64).astype(np.uint32).view(np.float32)
    return halves, bits


def _boundaries(name):
    """Every float8 value and the midpoints between neighbours (ties), nudged by one float32 ulp
    each way, of both signs."""
    v = np.unique(np.abs(f8.DECODE[name][~np.isnan(f8.DECODE[name])]).astype(np.float64))
    mids = (v[1:] + v[:-1]) / 2
    top = v[-1] + (v[-1] - v[-2]) / 2  # the tie above the largest value: rounds out of range
    pts = np.concatenate([v, mids, [top]]).astype(np.float32)
    near = np.concatenate([pts, np.nextafter(pts, np.float32(np.inf)), np.nextafter(pts, np.float32(0))])
    return np.concatenate([near, -near, np.array([np.nan, np.inf, -np.inf, -0.0], np.float32)])


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("nan_on_overflow", [True, False])
def test_kernel_rounding_matches_ml_dtypes(name, nan_on_overflow, rng):
    halves, bits = _sweep(rng)
    with np.errstate(all="ignore"):
        for s in SCALES:
            for x in (halves, bits, _boundaries(name), f8.DECODE[name]):
                ref = f8.host_encode(x, name, s, nan_on_overflow)
                got = f8.device_encode(x, name, s, nan_on_overflow)
                bad = np.flatnonzero(ref != got)
                assert bad.size == 0, (name, s, x[bad[:4]], ref[bad[:4]], got[bad[:4]])


def test_host_encode_semantics():
    with np.errstate(all="ignore"):
        x = np.array([300.0, -300.0, np.inf, np.nan, 1e-6, -1e-6, -0.0, 1.0 + 1 / 16, 1.0 + 3 / 16])
        nan_codes = f8.host_encode(x, "float8_143", 0, True)
        sat = f8.host_encode(x, "float8_143", 0, False)
    assert list(nan_codes[:4]) == [0x80] * 4
    assert list(sat[:4]) == [0x7F, 0xFF, 0x7F, 0x80]  # saturates; NaN stays NaN
    assert list(nan_codes[4:7]) == [0, 0, 0]  # underflow and -0 give the unsigned zero
    # 1 + 1/16 is a tie between 1 (even mantissa) and 1.125: to even; 1 + 3/16 ties up to 1.25
    assert f8.DECODE_143[nan_codes[7]] == 1.0 and f8.DECODE_143[nan_codes[8]] == 1.25


def _cast_run(cl, codelet, src, out_dtype, scale, params, sizes=(1, 7, 13, 235)):
    """One vertex per piece, pieces on tiles 0 and 1, the scale as an int32 element on each tile."""
    src = np.asarray(src)
    pieces = cl.layout_pieces(sizes)
    n = src.size
    assert n == sum(sizes)
    variables = {}
    for t in (0, 1):
        variables[f"x{t}"] = (src.dtype, src, t)
        variables[f"s{t}"] = (np.int32, np.array([scale], np.int32), t)
        variables[f"y{t}"] = (out_dtype, n, t)
    run = cl.run_vertices(codelet, variables, [
        (t, {"in": (f"x{t}", s, k), "log2_scale": (f"s{t}", 0, 1), "out": (f"y{t}", s, k)}, params)
        for s, k, t in pieces])
    out = np.empty(n, run.out["y0"].dtype)
    for s, k, t in pieces:
        out[s:s + k] = run.out[f"y{t}"][s:s + k]
    return out, run


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("out", ["float16", "float32"])
def test_from_float8_all_codes(name, out, cl):
    fmt = f8.format_of(name)
    codes = np.arange(256, dtype=np.uint8).view(fmt.numpy)
    for s in SCALES:
        got, run = _cast_run(cl, "CastThenPow2Scale", codes, out, s, {"check_range": 0}, sizes=(1, 7, 13, 235))
        with np.errstate(over="ignore"):
            ref = (np.arange(256, dtype=np.uint8).view(fmt.ml_dtype).astype(np.float64) * 2.0 ** s).astype(out)
        assert got.dtype == np.dtype(out)
        nan = np.isnan(ref)
        np.testing.assert_array_equal(np.isnan(got), nan)  # the NaN code (ml_dtypes' NaN has its sign set)
        u = f"u{got.itemsize}"
        np.testing.assert_array_equal(got[~nan].view(u), ref[~nan].view(u))


@pytest.mark.parametrize("name", FORMATS)
@pytest.mark.parametrize("src", ["float16", "float32"])
@pytest.mark.parametrize("nan_on_overflow", [1, 0])
def test_to_float8_against_ml_dtypes(name, src, nan_on_overflow, rng, cl):
    fmt = f8.format_of(name)
    # every float8 value (as src), the boundaries between them, specials, and random values
    pool = np.concatenate([f8.DECODE[name], _boundaries(name), rng.standard_normal(200) * 100,
                           rng.standard_normal(100) * 1e5, rng.standard_normal(100) * 1e-4])
    with np.errstate(over="ignore"):
        x = pool.astype(src)[:256]
        x = np.concatenate([x, pool.astype(src)[-100:]])
    sizes = (1, 7, 13, x.size - 21)
    for s in SCALES:
        got, _ = _cast_run(cl, "Pow2ScaleThenCast", x, name, s, {"nan_on_overflow": nan_on_overflow,
                                                                "check_range": 0}, sizes=sizes)
        assert got.dtype == fmt.numpy
        with np.errstate(all="ignore"):
            ref = f8.host_encode(x, name, s, bool(nan_on_overflow))
        np.testing.assert_array_equal(got.view(np.uint8), ref, err_msg=f"scale {s}")


def test_every_code_round_trips(cl):
    for name in FORMATS:
        fmt = f8.format_of(name)
        codes = np.arange(256, dtype=np.uint8).view(fmt.numpy)
        for s in (-3, 0, 4):
            vals, _ = _cast_run(cl, "CastThenPow2Scale", codes, "float32", s, {"check_range": 1})
            back, _ = _cast_run(cl, "Pow2ScaleThenCast", vals, name, -s, {"nan_on_overflow": 1, "check_range": 1})
            np.testing.assert_array_equal(back.view(np.uint8), np.arange(256, dtype=np.uint8))


def test_scale_out_of_range_wraps_or_stops(cl):
    codes = np.arange(256, dtype=np.uint8).view(f8.F143.numpy)
    wrapped, _ = _cast_run(cl, "CastThenPow2Scale", codes, "float32", 33, {"check_range": 0})
    same, _ = _cast_run(cl, "CastThenPow2Scale", codes, "float32", -31, {"check_range": 0})
    np.testing.assert_array_equal(wrapped, same)  # 6-bit signed field: 33 is -31
    for bad in (32, -33, 1000):
        with pytest.raises(Log2ScaleOutOfRange, match="out of range"):
            _cast_run(cl, "CastThenPow2Scale", codes, "float32", bad, {"check_range": 1})
        with pytest.raises(ipu.ApplicationRuntimeError):
            _cast_run(cl, "Pow2ScaleThenCast", np.ones(256, np.float16), "float8_152", bad,
                      {"nan_on_overflow": 1, "check_range": 1})


def test_other_codelets_refuse_float8(cl):
    with pytest.raises(TypeError, match="pow2scale casts"):
        cl.run_vertices("Cast", {"x": ("float8_143", 4, 0), "y": ("float32", 4, 0)},
                        [(0, {"in": ("x", 0, 4), "out": ("y", 0, 4)}, None)])
    with pytest.raises(TypeError, match="float8"):
        cl.run_vertices("CastThenPow2Scale", {"x": ("float16", 4, 0), "s": ("int32", 1, 0), "y": ("float32", 4, 0)},
                        [(0, {"in": ("x", 0, 4), "log2_scale": ("s", 0, 1), "out": ("y", 0, 4)}, {"check_range": 0})])


def test_cycles_follow_the_model(cl):
    x = np.ones(256, np.float16)
    _, run = _cast_run(cl, "Pow2ScaleThenCast", x, "float8_143", 0, {"nan_on_overflow": 1, "check_range": 0},
                       sizes=(1, 7, 13, 235))
    # tile 0 holds pieces 1, 13 and 235 (one after another), tile 1 the piece of 7
    expect0 = int(sum(float8_cast_cycles(n, ipu.FLOAT16) for n in (1, 13, 235)))
    expect1 = int(float8_cast_cycles(7, ipu.FLOAT16))
    assert int(run.step.tile_cycles[0]) == expect0 and int(run.step.tile_cycles[1]) == expect1
    assert run.cycles >= max(expect0, expect1)
    # float32 costs more than float16 (the extra float <-> half step), both grow with n
    c = float8_cast_cycles(np.array([4, 64, 1024]), ipu.FLOAT32) - float8_cast_cycles(np.array([4, 64, 1024]), ipu.FLOAT16)
    assert (c > 0).all()
    big = float8_cast_cycles(np.array([64, 6400]), ipu.FLOAT16)
    assert big[1] > 50 * big[0] / 2
