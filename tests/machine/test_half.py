"""ipu.half, the one float16 module: the scalar load / store and the run converters the codelets
use give the same bits as each other and as NumPy, NaNs (and their sign) included."""
import numpy as np
from numba import njit

import ipu
from ipu.half import f32_to_half_bits, half_bits_to_f32


@njit
def _by_load(view):
    out = np.empty(view.size, np.float32)
    for i in range(view.size):
        out[i] = ipu.load(view, i)
    return out


@njit
def _by_store(view, x):
    for i in range(x.size):
        ipu.store(view, i, x[i])


def _specials():
    bits = np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF800001, 0x7FFFFFFF, 0xFFFFFFFF, 0x7FA00000,
                     0x7F800000, 0xFF800000, 0x00000000, 0x80000000, 0x477FF000, 0xC77FF000, 0x33000000,
                     0xB3000001, 0x387FF000, 0x38800000], np.uint32)
    return bits.view(np.float32)


def test_narrowing_keeps_the_sign_of_nan_on_every_path():
    x = _specials()
    run = np.empty(x.size, np.uint16)
    f32_to_half_bits(x, run)
    scalar = np.zeros(x.size, np.uint16)
    _by_store(scalar.view(ipu.FLOAT16.storage), x)
    with np.errstate(invalid="ignore", over="ignore"):
        numpy_bits = x.astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(run, scalar)
    nan = np.isnan(x)
    np.testing.assert_array_equal(run[~nan], numpy_bits[~nan])
    # NaN -> the quiet NaN of the same sign (NumPy also keeps part of the payload; the IPU's
    # conversion, like ours, produces the canonical quiet NaN)
    np.testing.assert_array_equal(run[nan], np.where(np.signbit(x[nan]), 0xFE00, 0x7E00).astype(np.uint16))
    assert (numpy_bits[nan] & 0x8000 == run[nan] & 0x8000).all()


def test_widening_every_half_agrees_on_every_path():
    bits = np.arange(65536, dtype=np.uint16)
    run = np.empty(bits.size, np.float32)
    half_bits_to_f32(bits, run)
    scalar = _by_load(bits.view(ipu.FLOAT16.storage))
    expect = bits.view(np.float16).astype(np.float32)
    nan = np.isnan(expect)
    np.testing.assert_array_equal(run.view(np.uint32), expect.view(np.uint32))
    np.testing.assert_array_equal(scalar[~nan].view(np.uint32), expect[~nan].view(np.uint32))
    assert np.isnan(scalar[nan]).all()
    np.testing.assert_array_equal(np.signbit(scalar[nan]), np.signbit(expect[nan]))


def test_a_negative_nan_through_float16_kernels_stays_negative():
    """The NaN-sign bug of issue 18: float16 kernels (through the run converter) turned -NaN into
    +NaN while ipu.store and the NumPy references keep the sign."""
    import codelets  # noqa: F401  (registers the built-in codelets)
    from codelets.elementwise import UNARY_OPS

    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (4,), "float16")
    y = g.add_variable("y", (4,), "float16")
    g.set_tile_mapping(x, 0)
    g.set_tile_mapping(y, 0)
    cs = g.add_compute_set("relu")
    g.add_vertex(cs, "UnaryOp", 0, **{"in": x, "out": y}, op=UNARY_OPS["relu"])  # relu passes NaN through
    e = ipu.Engine(ipu.compile(g, ipu.Execute(cs)))
    data = np.array([0x7E00, 0xFE00, 0xBE00, 0x4000], np.uint16).view(np.float16)  # +NaN, -NaN, -1.5, 2
    e.write_tensor(x, data)
    e.run()
    out = e.read_tensor(y).view(np.uint16)
    ref = ipu.get_codelet("UnaryOp").reference(data, "relu").view(np.uint16)
    assert out.tolist() == [0x7E00, 0xFE00, 0x0000, 0x4000]
    np.testing.assert_array_equal(out & 0x8000, ref & 0x8000)
