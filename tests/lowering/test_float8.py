"""float8 through Session on a small simulated IPU: the pow2-scaled casts over every code in both
directions, matmul_pow2scaled and conv(_transpose)_pow2scaled against NumPy through ml_dtypes,
float8 host I/O (encoded bytes), tile memory of one byte per element, and the errors: bad scales
and dtypes, scales out of range at run time, gradients."""
import ml_dtypes
import numpy as np
import pytest

import ipu
import popxl
import popxl.ops as ops
from popxl import fp8_utils as fu

from helpers import run_popxl
from test_conv_pool import conv_ref, conv_transpose_ref

F8 = {"float8_143": (popxl.float8_143, ml_dtypes.float8_e4m3fnuz),
      "float8_152": (popxl.float8_152, ml_dtypes.float8_e5m2fnuz)}
RNG = np.random.default_rng(14)


def _codes(name):
    return np.arange(256, dtype=np.uint8).view(F8[name][0].as_numpy())


def _decode(x8, scale=0):
    """float64 values of a float8 host array through ml_dtypes, times 2**scale."""
    ml = F8[x8.dtype.names[0]][1]
    return x8.view(np.uint8).view(ml).astype(np.float64) * 2.0 ** scale


def _same_bits(got, ref):
    nan = np.isnan(ref)
    np.testing.assert_array_equal(np.isnan(got), nan)
    u = f"u{got.itemsize}"
    np.testing.assert_array_equal(got[~nan].view(u), ref[~nan].view(u))


@pytest.mark.parametrize("name", list(F8))
@pytest.mark.parametrize("out", [popxl.float16, popxl.float32])
@pytest.mark.parametrize("shape", [(256,), (16, 16)])
def test_cast_from_fp8_every_code(name, out, shape):
    codes = _codes(name).reshape(shape)
    scales = [-32, -1, 0, 3, 31]
    res, _ = run_popxl(lambda x, *s: [ops.pow2scale_cast_from_fp8(x, si, out) for si in s],
                       [codes] + [np.int32(s) for s in scales])
    for s, got in zip(scales, res):
        with np.errstate(over="ignore"):
            ref = _decode(codes, s).astype(out.as_numpy())
        assert got.dtype == out.as_numpy() and got.shape == shape
        _same_bits(got, ref)


@pytest.mark.parametrize("name", list(F8))
@pytest.mark.parametrize("src", [np.float16, np.float32])
def test_cast_to_fp8_every_code_and_a_sweep(name, src):
    """Every float8 value (decoded, so exactly representable), the ties between them, overflow,
    subnormals and NaN, and random values at several magnitudes: bits equal ml_dtypes' casts."""
    vals = _decode(_codes(name))
    mids = (vals[1:127] + vals[2:128]) / 2  # ties between neighbours (round to even)
    extra = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e9, -1e9, 1e-9])
    with np.errstate(over="ignore"):
        x = np.concatenate([vals, mids, -mids, extra, RNG.normal(size=97) * 30, RNG.normal(size=89) * 1e-3]).astype(src)
    scales = [-4, 0, 2]
    res, _ = run_popxl(lambda t, *s: [ops.pow2scale_cast_to_fp8(t, si, F8[name][0]) for si in s],
                       [x] + [np.int32(s) for s in scales])
    for s, got in zip(scales, res):
        assert got.dtype == F8[name][0].as_numpy()
        ref = fu.host_pow2scale_cast_to_fp8(x, F8[name][0], s)
        np.testing.assert_array_equal(got.view(np.uint8), ref.view(np.uint8), err_msg=f"scale {s}")
        # and ml_dtypes directly
        with np.errstate(all="ignore"):
            direct = (x.astype(np.float64) * 2.0 ** s).astype(F8[name][1]).view(np.uint8)
        np.testing.assert_array_equal(got.view(np.uint8), direct)


def test_3_1_spellings_are_the_same_ops():
    x = RNG.normal(size=(3, 5)).astype(np.float32)
    a, b = run_popxl(lambda t, s: [ops.pow2scale_then_cast(t, s, popxl.float8_152),
                                   ops.pow2scale_cast_to_fp8(t, s, popxl.float8_152)], [x, np.int32(1)])[0]
    np.testing.assert_array_equal(a.view(np.uint8), b.view(np.uint8))
    back = run_popxl(lambda t, s: ops.cast_then_pow2scale(t, s, popxl.float32), [a, np.int32(-1)])[0]
    np.testing.assert_array_equal(back, _decode(a, -1).astype(np.float32))
    assert popxl.utils.host_pow2scale_then_cast(x, popxl.float8_152, 1).tobytes() == a.tobytes()
    np.testing.assert_array_equal(popxl.utils.host_cast_then_pow2scale(a, popxl.float32, -1), back)


def _half_ulp_close(got, ref64):
    """got (float16) within one float16 ulp of the exact float64 result (float32 accumulation)."""
    ref = ref64.astype(np.float16)
    ulp = np.spacing(np.abs(ref)).astype(np.float64)
    assert got.dtype == np.float16
    assert np.all(np.abs(got.astype(np.float64) - ref64) <= ulp + 1e-6 * np.abs(ref64)), \
        np.max(np.abs(got.astype(np.float64) - ref64) / np.maximum(ulp, 1e-30))


@pytest.mark.parametrize("lhs_shape,rhs_shape", [((1, 1), (1, 1)), ((7, 13), (13, 5)), ((3, 4, 31), (31, 9)),
                                                 ((2, 5, 8), (2, 8, 3)), ((11,), (11, 2)), ((6, 17), (17,))])
@pytest.mark.parametrize("fmts", [("float8_143", "float8_143"), ("float8_152", "float8_143")])
def test_matmul_pow2scaled(lhs_shape, rhs_shape, fmts):
    a = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=lhs_shape), F8[fmts[0]][0], 2)
    b = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=rhs_shape), F8[fmts[1]][0], 0)
    for s in (-3, 0, 2):
        got, _ = run_popxl(lambda x, y, sc: ops.matmul_pow2scaled(x, y, sc), [a, b, np.int32(s)])
        _half_ulp_close(got, np.matmul(_decode(a), _decode(b)) * 2.0 ** s)


def test_matmul_pow2scaled_on_a_gc200_sized_split():
    # enough work to be split over many tiles (k split too): the partials' reduction is exercised
    a = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=(64, 300)), popxl.float8_143, 0)
    b = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=(300, 48)), popxl.float8_152, 0)
    got, _ = run_popxl(lambda x, y, sc: ops.matmul_pow2scaled(x, y, sc), [a, b, np.int32(-4)], target="small:64")
    _half_ulp_close(got, _decode(a) @ _decode(b) / 16)


@pytest.mark.parametrize("shape,wshape,stride,pads,dilation,groups", [
    ((1, 3, 5, 5), (4, 3, 3, 3), (1, 1), (0, 0, 0, 0), (1, 1), 1),
    ((2, 4, 6, 5), (4, 2, 3, 2), (2, 1), (1, 0, 1, 1), (1, 2), 2),
])
def test_conv_pow2scaled(shape, wshape, stride, pads, dilation, groups):
    x = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=shape), popxl.float8_143, 1)
    w = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=wshape), popxl.float8_152, 0)
    got, _ = run_popxl(lambda a, b, s: ops.conv_pow2scaled(a, b, s, stride=stride, padding=pads, dilation=dilation,
                                                           groups=groups), [x, w, np.int32(-1)])
    _half_ulp_close(got, conv_ref(_decode(x), _decode(w), stride, pads, dilation, groups) / 2)


def test_conv_transpose_pow2scaled():
    shape, wshape, stride, pads, dilation, groups, out_pad = (2, 4, 3, 5), (4, 2, 3, 2), (2, 1), (1, 0, 1, 1), (1, 1), 2, (1, 0)
    x = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=shape), popxl.float8_152, 0)
    w = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=wshape), popxl.float8_143, 0)
    got, _ = run_popxl(lambda a, b, s: ops.conv_transpose_pow2scaled(a, b, s, stride=stride, padding=pads,
                                                                     dilation=dilation, groups=groups,
                                                                     output_padding=out_pad), [x, w, np.int32(3)])
    _half_ulp_close(got, conv_transpose_ref(_decode(x), _decode(w), stride, pads, dilation, groups, out_pad) * 8)


# -- host I/O and memory ----------------------------------------------------------------------------

def test_variables_and_streams_take_and_give_encoded_bytes():
    data = RNG.normal(size=(4, 6)) * 10
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(data, popxl.float8_143, log2_scale=-1, nan_on_overflow=False, name="w8")
        s_in = popxl.h2d_stream((4, 6), popxl.float8_152, name="x8")
        x = ops.host_load(s_in)
        one = popxl.constant(0, popxl.int32)
        y = ops.pow2scale_cast_from_fp8(x, one, popxl.float32) + ops.pow2scale_cast_from_fp8(v, one, popxl.float32)
        s_out = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(s_out, y)
    x8 = fu.host_pow2scale_cast_to_fp8(data, popxl.float8_152)
    with popxl.Session(ir, "ipu_model") as sess:
        got_v = sess.get_tensor_data(v)
        assert got_v.dtype == popxl.float8_143.as_numpy()
        np.testing.assert_array_equal(got_v.view(np.uint8),
                                      fu.host_pow2scale_cast_to_fp8(data, popxl.float8_143, -1, False).view(np.uint8))
        out = sess.run({s_in: x8})[s_out]
        np.testing.assert_array_equal(out, (_decode(x8) + _decode(got_v)).astype(np.float32))
        out_u8 = sess.run({s_in: x8.view(np.uint8)})[s_out]  # plain uint8 codes are accepted too
        np.testing.assert_array_equal(out, out_u8)
        with pytest.raises(TypeError, match="host_pow2scale_cast_to_fp8"):
            sess.run({s_in: data.astype(np.float32)})
        sess.write_variable_data(v, np.zeros((4, 6), np.uint8))
        assert sess.get_tensor_data(v).view(np.uint8).sum() == 0
        with pytest.raises(TypeError, match="encoded bytes"):
            sess.write_variable_data(v, np.zeros((4, 6), np.float32))


def test_float8_takes_one_byte_per_element_on_the_tile():
    g = ipu.Graph(ipu.small_target(2))
    x8 = g.add_variable("x8", (1000,), ipu.FLOAT8_143)
    h = g.add_variable("h", (1000,), ipu.FLOAT16)
    g.set_tile_mapping(x8, 0)
    g.set_tile_mapping(h, 1)
    exe = ipu.compile(g, ipu.Sequence())
    assert exe.plan.categories["variables"].tolist() == [1000, 2000]


# -- errors ---------------------------------------------------------------------------------------

def test_bad_scales_and_dtypes_are_rejected():
    ir = popxl.Ir()
    with ir.main_graph:
        x32 = popxl.variable(np.ones((2, 3), np.float32))
        x8 = popxl.variable(np.ones((2, 3)), popxl.float8_143)
        w8 = popxl.variable(np.ones((3, 2)), popxl.float8_152)
        s = popxl.constant(0, popxl.int32)
        with pytest.raises(ValueError, match="scalar"):
            ops.pow2scale_cast_to_fp8(x32, popxl.constant([0, 1], popxl.int32), popxl.float8_143)
        with pytest.raises(TypeError, match="int32"):
            ops.pow2scale_cast_to_fp8(x32, popxl.constant(0, popxl.int16), popxl.float8_143)
        with pytest.raises(TypeError, match="int32"):
            ops.matmul_pow2scaled(x8, w8, popxl.constant(0.0, popxl.float32))
        with pytest.raises(TypeError, match="Tensor"):
            ops.matmul_pow2scaled(x8, w8, 0)
        with pytest.raises(TypeError, match="float8"):
            ops.matmul_pow2scaled(x32, w8, s)
        with pytest.raises(TypeError, match="float8_143 or popxl.float8_152"):
            ops.pow2scale_cast_to_fp8(x32, s, popxl.float16)
        with pytest.raises(TypeError, match="float16 or float32"):
            ops.pow2scale_cast_to_fp8(popxl.variable(np.ones(2, np.int32)), s, popxl.float8_143)
        with pytest.raises(TypeError, match="must be popxl.float8_143 or popxl.float8_152"):
            ops.pow2scale_cast_from_fp8(x32, s, popxl.float16)
        with pytest.raises(TypeError, match="pow2scale_cast_to_fp8"):
            ops.cast(x32, popxl.float8_143)
        with pytest.raises(TypeError, match="pow2scale_cast_from_fp8"):
            ops.cast(x8, popxl.float32)
        with pytest.raises(TypeError, match="float8"):
            ops.add(x8, x8)
        with pytest.raises(TypeError, match="float8"):
            ops.matmul(x8, w8)
        with pytest.raises(ValueError, match="scalar"):
            ops.conv_pow2scaled(popxl.variable(np.ones((1, 1, 3, 3)), popxl.float8_143),
                                popxl.variable(np.ones((1, 1, 2, 2)), popxl.float8_143),
                                popxl.constant([1], popxl.int32))
    with pytest.raises(RuntimeError, match="range"):
        fu.host_pow2scale_cast_to_fp8(np.ones(2), popxl.float8_143, 32)
    with pytest.raises(RuntimeError, match="float8_143 or popxl.float8_152"):
        fu.host_pow2scale_cast_to_fp8(np.ones(2), popxl.float16)
    with pytest.raises(RuntimeError, match="float8 array"):
        fu.host_pow2scale_cast_from_fp8(np.ones(2, np.float32), popxl.float32)


def _build(which, s):
    if which == "cast_to":
        return ops.pow2scale_cast_to_fp8(popxl.variable(np.ones((3, 4), np.float32)), s, popxl.float8_143)
    if which == "cast_from":
        return ops.pow2scale_cast_from_fp8(popxl.variable(np.ones((3, 4)), popxl.float8_143), s, popxl.float16)
    if which == "matmul":
        return ops.matmul_pow2scaled(popxl.variable(np.ones((3, 4)), popxl.float8_143),
                                     popxl.variable(np.ones((4, 2)), popxl.float8_143), s)
    return ops.conv_pow2scaled(popxl.variable(np.ones((1, 2, 4, 4)), popxl.float8_152),
                               popxl.variable(np.ones((3, 2, 2, 2)), popxl.float8_143), s)


def _run_with_scale(which, scale, check):
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().throwIfLog2ScaleTensorNotInRange = check
    with ir.main_graph:
        s = popxl.variable(scale, popxl.int32, name="log2_scale")
        y = _build(which, s)
        st = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(st, y)
    with popxl.Session(ir, "ipu_model") as sess:
        return sess.run()[st]


@pytest.mark.parametrize("which", ["cast_to", "cast_from", "matmul", "conv"])
def test_scale_out_of_range_raises_poplar_application_runtime_error(which, monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
    for scale in (-50, 32):
        with pytest.raises(popxl.errors.poplar_application_runtime_error, match=r"\[-32, 32\)"):
            _run_with_scale(which, scale, True)
    # unchecked, the 6-bit metadata field wraps: 33 acts as -31
    wrapped = _run_with_scale(which, 33, False)
    same = _run_with_scale(which, -31, False)
    assert wrapped.tobytes() == same.tobytes()


def test_poplar_application_runtime_error_is_popart_s_and_an_ipu_application_error(monkeypatch):
    import popart

    err = popxl.errors.poplar_application_runtime_error
    assert popart.poplar_application_runtime_error is err  # what PopXL's float8 tests catch
    assert issubclass(err, popart.poplar_runtime_error) and issubclass(err, popart.poplar_exception)
    assert issubclass(err, ipu.ApplicationRuntimeError) and issubclass(err, RuntimeError)
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    with pytest.raises(popart.poplar_application_runtime_error):
        _run_with_scale("cast_from", 100, True)


def test_no_gradients_through_float8_ops():
    def fwd(a):
        s = popxl.constant(0, popxl.int32)
        return ops.pow2scale_cast_from_fp8(ops.pow2scale_cast_to_fp8(a, s, popxl.float8_143), s, popxl.float32)

    def fwd_matmul(a):
        s = popxl.constant(0, popxl.int32)
        w8 = ops.pow2scale_cast_to_fp8(popxl.graph_input((3, 2), popxl.float32, "w"), s, popxl.float8_152)
        return ops.matmul_pow2scaled(ops.pow2scale_cast_to_fp8(a, s, popxl.float8_143), w8, s)

    for fn in (fwd, fwd_matmul):
        ir = popxl.Ir()
        graph = ir.create_graph(fn, popxl.TensorSpec((2, 3), popxl.float32))
        with pytest.raises(RuntimeError, match="not supported for training"):
            popxl.transforms.autodiff(graph)

    def fwd_conv(op, wshape):
        def fn(a):
            s = popxl.constant(0, popxl.int32)
            w8 = ops.pow2scale_cast_to_fp8(popxl.graph_input(wshape, popxl.float32, "w"), s, popxl.float8_143)
            return op(ops.pow2scale_cast_to_fp8(a, s, popxl.float8_152), w8, s)
        return fn

    for op, wshape in ((ops.conv_pow2scaled, (2, 3, 2, 2)), (ops.conv_transpose_pow2scaled, (3, 2, 2, 2))):
        ir = popxl.Ir()
        graph = ir.create_graph(fwd_conv(op, wshape), popxl.TensorSpec((1, 3, 4, 4), popxl.float32))
        with pytest.raises(RuntimeError, match=f"not supported for training: autodiff reached {op.__name__}"):
            popxl.transforms.autodiff(graph)


class _TorchLike:
    """What popxl reads of a torch.Tensor (torch is not a dependency): detach().cpu().numpy()."""

    def __init__(self, a):
        self._a = np.asarray(a)

    def detach(self):
        return self

    def cpu(self):
        return self

    def numpy(self):
        return self._a


def test_torch_tensors_are_host_data_for_float8():
    x = RNG.normal(size=(3, 4)).astype(np.float32) * 40
    want = fu.host_pow2scale_cast_to_fp8(x, popxl.float8_143, -2, False)
    got = fu.host_pow2scale_cast_to_fp8(_TorchLike(x), popxl.float8_143, -2, False)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(_TorchLike(x), popxl.float8_143, log2_scale=-2, nan_on_overflow=False)
        c = popxl.constant(_TorchLike(x), popxl.float8_152, log2_scale=1)
    assert v._data.tobytes() == want.tobytes()
    assert c._data.tobytes() == fu.host_pow2scale_cast_to_fp8(x, popxl.float8_152, 1).tobytes()


# -- data movement: float8 elements move whole ----------------------------------------------------

MOVES = {
    "reshape": (lambda t: ops.reshape(t, (6, 4)), lambda a: a.reshape(6, 4)),
    "transpose": (lambda t: ops.transpose(t), lambda a: a.T),
    "slice": (lambda t: ops.slice(t, [1, 2], [3, 5]), lambda a: a[1:3, 2:5]),
    "concat": (lambda t: ops.concat([t, t], 1), lambda a: np.concatenate([a, a], 1)),
    "split": (lambda t: ops.split(t, 2, 1)[1], lambda a: a[:, 3:]),
    "gather": (lambda t: ops.gather(t, popxl.constant(np.array([3, 0, 3], np.int32))), lambda a: a[[3, 0, 3]]),
    "dynamic_slice": (lambda t: ops.dynamic_slice(t, popxl.constant(np.array([1], np.uint32)), [0], [2], True),
                      lambda a: a[1:3]),
    "init_zero": (lambda t: ops.init((5,), popxl.float8_143),
                  lambda a: np.zeros(5, np.uint8)),
}


@pytest.mark.parametrize("name", list(MOVES))
def test_float8_data_movement(name):
    x = fu.host_pow2scale_cast_to_fp8(RNG.normal(size=(4, 6)), popxl.float8_143)
    build, ref = MOVES[name]
    got, _ = run_popxl(build, [x])
    assert got.dtype == x.dtype
    np.testing.assert_array_equal(got.view(np.uint8), ref(x.view(np.uint8)))


def test_print_tensor_prints_float8_values(capsys):
    x = fu.host_pow2scale_cast_to_fp8(np.array([1.0, -2.5, 0.125]), popxl.float8_152)
    run_popxl(lambda t: ops.print_tensor(t, "f8"), [x])
    err = capsys.readouterr().err  # Poplar's PrintTensor writes to standard error
    assert err.startswith("f8: [") and "-2.5" in err and "0.125" in err and "1.0" in err


def test_host_fp8_mse_scale_picks_a_scale_that_fits_the_data():
    for mag, fmt in ((1e-3, popxl.float8_143), (1e3, popxl.float8_143), (1e-4, popxl.float8_152)):
        x = (RNG.normal(size=2000) * mag).astype(np.float32)
        exact = fu.host_fp8_mse_scale_pb(x, fmt)
        hist = fu.host_fp8_mse_scale(x, fmt)
        errs = {}
        for s in range(-31, 32):
            back = fu.host_pow2scale_cast_from_fp8(fu.host_pow2scale_cast_to_fp8(x, fmt, s, False), popxl.float64, -s)
            errs[s] = float(np.mean((back - x) ** 2))
        assert errs[exact] == min(errs.values())
        # the histogram estimate keeps the data in range and within 10x of the best error
        assert np.isfinite(fu.host_pow2scale_cast_from_fp8(fu.host_pow2scale_cast_to_fp8(x, fmt, hist), popxl.float32)).all()
        assert errs[hist] <= 10 * errs[exact], (mag, hist, exact)
        assert -31 <= hist <= 31


def _session_result(build, replication=1):
    ir = popxl.Ir(replication=replication)
    with ir.main_graph:
        y = build()
        o = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(o, y)
    with popxl.Session(ir, "ipu_model") as sess:
        return sess.run()[o]


def test_float8_across_replicas_and_streaming_memory(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    x = fu.host_pow2scale_cast_to_fp8(np.arange(8.0).reshape(2, 4), popxl.float8_143)
    got = _session_result(lambda: ops.collectives.replicated_all_gather(popxl.variable(x, popxl.float8_143)), 2)
    assert got.dtype == x.dtype
    both = np.tile(x.view(np.uint8).reshape(-1), 2)  # every replica gathers both replicas' copies
    np.testing.assert_array_equal(got.view(np.uint8).reshape(2, -1), np.stack([both, both]))

    def remote():
        buf = popxl.remote_buffer((2, 4), popxl.float8_143, 1)
        popxl.remote_variable(x, buf, 0, popxl.float8_143)
        return ops.remote_load(buf, 0)

    np.testing.assert_array_equal(_session_result(remote).view(np.uint8), x.view(np.uint8))
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        v = popxl.variable(x, popxl.float8_143)
        with pytest.raises(TypeError, match="cannot reduce"):
            ops.collectives.replicated_all_reduce(v)
        with pytest.raises(TypeError, match="cannot reduce"):
            ops.collectives.replicated_reduce_scatter(v)
