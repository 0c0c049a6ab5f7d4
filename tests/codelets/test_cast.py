"""Cast: every pair of tile memory types, with special values, against the reference and an
independent NumPy expression; cycles against the cost model."""
import numpy as np
import pytest

import ipu
from codelets.cast import cast_cycles, cast_worker_cycles

CAST = ipu.get_codelet("Cast")
TYPES = [t.name for t in ipu.ALL_TYPES]
FLOAT_SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 255.5, -129.7, 40000.0, -40000.0,
                  70000.0, 3e9, -3e9, 1e-8]


def _source(dtype, rng, n):
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, n).astype(bool)
    if dt.kind == "f":
        x = np.concatenate([FLOAT_SPECIALS, rng.standard_normal(n - len(FLOAT_SPECIALS)) * 300])
        with np.errstate(over="ignore"):
            return x.astype(dt)
    info = np.iinfo(dt)
    x = rng.integers(info.min, int(info.max) + 1, n, dtype=np.int64)
    x[:3] = [info.min, 0, info.max]
    return x.astype(dt)


def _independent(x, out):
    """Conversions written element by element in Python."""
    out = np.dtype(out)
    res = []
    for v in x.tolist():
        if out == np.bool_:
            res.append(v != 0)
        elif out.kind in "iu":
            info = np.iinfo(out)
            if isinstance(v, float):
                if v != v:
                    r = 0
                else:
                    r = info.max if v >= info.max else (info.min if v <= info.min else int(v))
            else:
                r = int(v)
                r = (r - info.min) % (1 << out.itemsize * 8) + info.min  # wrap
            res.append(r)
        else:
            res.append(float(v))
    with np.errstate(over="ignore"):
        return np.array(res, np.float64 if out.kind == "f" else object).astype(out)


@pytest.mark.parametrize("dst", TYPES)
@pytest.mark.parametrize("src", TYPES)
def test_cast_all_pairs(src, dst, rng, cl):
    n = 97
    x = _source(src, rng, n)
    pieces = cl.layout_pieces((1, 7, 13, 76))
    run = cl.run_vertices("Cast", {"x0": (src, x, 0), "x1": (src, x, 1), "y0": (dst, n, 0), "y1": (dst, n, 1)},
                          [(t, {"in": (f"x{t}", s, k), "out": (f"y{t}", s, k)}, None) for s, k, t in pieces])
    got = np.concatenate([run.out[f"y{t}"][s:s + k] for s, k, t in pieces])
    with np.errstate(over="ignore", invalid="ignore"):
        ref = CAST.reference(x, dst)
    np.testing.assert_array_equal(got, ref)
    if not (np.dtype(src).kind in "iu" and np.dtype(dst) == np.float16):
        np.testing.assert_array_equal(got, _independent(x, dst))
    else:  # integer -> half: nearest half (inf beyond 65504)
        with np.errstate(over="ignore"):
            np.testing.assert_array_equal(got, x.astype(np.float64).astype(np.float16))
    assert got.dtype == np.dtype(dst)


def test_cast_examples(cl):
    x = np.array([2.7, -2.7, np.nan, 1e10, -1e10, 300.0, -1.0], np.float32)
    run = cl.run_vertices("Cast", {"x": ("float32", x, 0), "i": ("int32", 7, 0), "u": ("uint8", 7, 0),
                                   "h": ("float16", 7, 0)},
                          [(0, {"in": ("x", 0, 7), "out": ("i", 0, 7)}, None),
                           (0, {"in": ("x", 0, 7), "out": ("u", 0, 7)}, None),
                           (0, {"in": ("x", 0, 7), "out": ("h", 0, 7)}, None)])
    np.testing.assert_array_equal(run.out["i"], [2, -2, 0, 2 ** 31 - 1, -2 ** 31, 300, -1])
    np.testing.assert_array_equal(run.out["u"], [2, 0, 0, 255, 0, 255, 0])
    np.testing.assert_array_equal(run.out["h"], np.array([2.7, -2.7, np.nan, np.inf, -np.inf, 300, -1], np.float16))


@pytest.mark.parametrize("n", [1, 3, 4, 7, 97, 1000])
@pytest.mark.parametrize("src,dst", [("float32", "float16"), ("float16", "float32"), ("float32", "int32"),
                                     ("uint8", "float16"), ("int8", "float32"), ("float16", "uint8"),
                                     ("bool", "float32")])
def test_cast_cycles_equal_cost_model(src, dst, n, cl):
    run = cl.run_vertices("Cast", {"x": (src, n, 0), "y": (dst, n, 0)},
                          [(0, {"in": ("x", 0, n), "out": ("y", 0, n)}, None)])
    assert CAST.supervisor
    assert run.cycles == int(cast_cycles(np.array([n]), ipu.element_type(src), ipu.element_type(dst))[0])


def test_cast_cost_formula_by_hand():
    f32, f16, i32, u8 = ipu.FLOAT32, ipu.FLOAT16, ipu.INT32, ipu.UINT8
    # float -> half: 4 elements per vector at 2 cycles; 10 elements: 19 + 2 x 2 + remainder bits
    # (1 + 1 for bit 0, 1 + 2 for bit 1 with 2 left over)
    assert cast_worker_cycles(10, f32, f16) == 19 + 4 + 1 + 3
    # half -> float: 2 per vector at 1 cycle; 10 elements: 19 + 5 + 1 (bit 0, nothing left)
    assert cast_worker_cycles(10, f16, f32) == 19 + 5 + 1
    # C++ conversions: 1 element per vector at 2 cycles
    assert cast_worker_cycles(10, f32, i32) == 19 + 20
    # uint8 -> half: 4 + fill 14 + (2 - 1) x 9 + rem 2 -> 14
    assert cast_worker_cycles(10, u8, f16) == 4 + 14 + 9 + 14
    # half -> uint8 (CastToInt8.S): 4 + clamp 4 + fill 19 + (2 - 1) x 16 + rem 2 -> 21
    assert cast_worker_cycles(10, f16, u8) == 4 + 4 + 19 + 16 + 21
    # the vertex: 1000 floats -> every worker casts ceil(1000 / 6) = 167
    assert cast_cycles(1000, f32, f16) == 12 + 6 * (int(cast_worker_cycles(167, f32, f16)) + 18)
    # the audit's figure: 64 floats -> halves, poplibs getCast1DCycleEstimate = 294
    assert cast_cycles(64, f32, f16) == 294


def test_fast_half_conversions_are_exact(rng):
    """The run converters the float16 kernels use agree with NumPy on every half and on float32
    values around every rounding boundary (a NaN becomes the quiet NaN 0x7E00 of its sign, as ipu.half)."""
    from ipu.half import f32_to_half_bits, half_bits_to_f32

    allh = np.arange(65536, dtype=np.uint16)
    out = np.empty(65536, np.float32)
    half_bits_to_f32(allh, out)
    np.testing.assert_array_equal(out.view(np.uint32), allh.view(np.float16).astype(np.float32).view(np.uint32))
    bits = np.concatenate([
        rng.integers(0, 2 ** 32, 200_000, dtype=np.uint64).astype(np.uint32),
        rng.integers(0x33000000, 0x47900000, 200_000, dtype=np.uint64).astype(np.uint32),
        np.arange(0x477FE000, 0x47800100, dtype=np.uint32),  # around 65504 .. 65536
        np.arange(0x387FF000, 0x38801000, dtype=np.uint32),  # around the smallest normal
    ])
    bits = np.concatenate([bits, bits | np.uint32(0x80000000)])
    t = bits.view(np.float32)
    hb = np.empty(t.size, np.uint16)
    f32_to_half_bits(t, hb)
    with np.errstate(over="ignore", invalid="ignore"):
        ref = t.astype(np.float16).view(np.uint16)
    nan = np.isnan(t)
    np.testing.assert_array_equal(hb[nan], np.uint16(0x7E00) | (ref[nan] & np.uint16(0x8000)))
    np.testing.assert_array_equal(hb[~nan], ref[~nan])
