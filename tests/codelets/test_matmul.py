"""MatMulBlock (the AMP vertex) and MatMulReducePartials: NumPy results, cycles = cost models."""
import numpy as np
import pytest

import ipu
from codelet_targets import vertex_target
from codelets.matmul import amp_geometry, matmul_block_cycles, reduce_partials_cycles

TYPES = [("float32", "float32"), ("float16", "float32"), ("float16", "float16")]
SHAPES = [(1, 1, 1), (1, 7, 1), (7, 1, 5), (5, 13, 1), (6, 8, 16), (13, 17, 19), (37, 29, 41), (64, 64, 64)]


def _one_vertex(m, k, n, dt, odt, accumulate=0, target=None):
    g = ipu.Graph(target or vertex_target(2))
    a = g.add_variable("a", (m, k), dt)
    b = g.add_variable("b", (k, n), dt)
    o = g.add_variable("o", (m, n), odt)
    for v in (a, b, o):
        g.set_tile_mapping(v, 1)
    cs = g.add_compute_set("mm")
    g.add_vertex(cs, "MatMulBlock", 1, a=a, b=b, out=o, m=m, k=k, n=n, accumulate=accumulate)
    return g, a, b, o, ipu.Execute(cs)


def _reference(av, bv, odt, init=None):
    c = av.astype(np.float32) @ bv.astype(np.float32)
    if init is not None:
        c = init.astype(np.float32) + c
    return c.astype(odt)


@pytest.mark.parametrize("dt, odt", TYPES)
@pytest.mark.parametrize("m, k, n", SHAPES)
def test_block_matches_numpy_and_cost_model(m, k, n, dt, odt):
    g, a, b, o, prog = _one_vertex(m, k, n, dt, odt)
    engine = ipu.Engine(ipu.compile(g, prog))
    rng = np.random.default_rng(m * 1000 + k * 10 + n)
    av = rng.standard_normal((m, k)).astype(dt)
    bv = rng.standard_normal((k, n)).astype(dt)
    engine.write_tensor(a, av)
    engine.write_tensor(b, bv)
    cycles = engine.run()
    got = engine.read_tensor(o)
    ref = _reference(av, bv, odt)
    if odt == "float32":
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * np.sqrt(k))
    else:  # the float32 result rounded once to half: within half an ulp of half
        np.testing.assert_allclose(got.astype(np.float32), ref.astype(np.float32), rtol=2 ** -10, atol=2 ** -14)
    model = matmul_block_cycles(m, k, n, dt == "float32", odt == "float32", g.target)
    assert cycles == int(model)  # one supervisor vertex: the step costs exactly its model


@pytest.mark.parametrize("dt, odt", TYPES)
def test_block_accumulates(dt, odt):
    m, k, n = 9, 11, 17
    g, a, b, o, prog = _one_vertex(m, k, n, dt, odt, accumulate=1)
    engine = ipu.Engine(ipu.compile(g, prog))
    rng = np.random.default_rng(3)
    av = rng.standard_normal((m, k)).astype(dt)
    bv = rng.standard_normal((k, n)).astype(dt)
    init = rng.standard_normal((m, n)).astype(odt)
    engine.write_tensor(a, av)
    engine.write_tensor(b, bv)
    engine.write_tensor(o, init)
    engine.run()
    ref = _reference(av, bv, odt, init)
    tol = 1e-5 if odt == "float32" else 2 ** -10
    np.testing.assert_allclose(engine.read_tensor(o).astype(np.float32), ref.astype(np.float32), rtol=tol, atol=tol)


def test_block_with_empty_k_writes_zeros():
    # (the empty operands are empty slices of mapped variables: an empty variable has no memory)
    g = ipu.Graph(vertex_target(1))
    a = g.add_variable("a", (1,))
    b = g.add_variable("b", (1,))
    o = g.add_variable("o", (4, 5))
    for v in (a, b, o):
        g.set_tile_mapping(v, 0)
    cs = g.add_compute_set("mm")
    g.add_vertex(cs, "MatMulBlock", 0, a=a[:0], b=b[:0], out=o, m=4, k=0, n=5, accumulate=0)
    engine = ipu.Engine(ipu.compile(g, ipu.Execute(cs)))
    engine.write_tensor(o, np.full((4, 5), 7.0, np.float32))
    cycles = engine.run()
    np.testing.assert_array_equal(engine.read_tensor(o), np.zeros((4, 5), np.float32))
    assert cycles == int(matmul_block_cycles(4, 0, 5, True, True, g.target))


def test_many_vertices_one_call_and_supervisors_add_up():
    """Several blocks on two tiles run in one kernel call; supervisor vertices on a tile run one
    after another, so a tile's time is the sum of its vertices' models."""
    target = vertex_target(2)
    g = ipu.Graph(target)
    shapes = [(3, 5, 7), (16, 8, 16), (1, 1, 1), (20, 33, 9)]
    tiles = [0, 0, 1, 1]
    rng = np.random.default_rng(0)
    data = []
    cs = g.add_compute_set("mm")
    for i, ((m, k, n), t) in enumerate(zip(shapes, tiles)):
        a = g.add_variable(f"a{i}", (m, k))
        b = g.add_variable(f"b{i}", (k, n))
        o = g.add_variable(f"o{i}", (m, n))
        for v in (a, b, o):
            g.set_tile_mapping(v, t)
        g.add_vertex(cs, "MatMulBlock", t, a=a, b=b, out=o, m=m, k=k, n=n, accumulate=0)
        data.append((a, b, o, rng.standard_normal((m, k)).astype(np.float32),
                     rng.standard_normal((k, n)).astype(np.float32)))
    engine = ipu.Engine(ipu.compile(g, ipu.Execute(cs)))
    for a, b, _, av, bv in data:
        engine.write_tensor(a, av)
        engine.write_tensor(b, bv)
    cycles = engine.run()
    for a, b, o, av, bv in data:
        np.testing.assert_allclose(engine.read_tensor(o), av @ bv, rtol=1e-5, atol=1e-6)
    per = [int(matmul_block_cycles(m, k, n, True, True, target)) for m, k, n in shapes]
    assert cycles == max(per[0] + per[1], per[2] + per[3])


def test_cost_model_poplibs_values_and_peak():
    t = ipu.GC200
    # getConvPartial1x1SupervisorCycleEstimate by hand for a 64 x 64 x 64 float block: 8 input
    # groups of 8, 4 output groups of 16, workers with 11 / 10 positions (4 / 2 workers):
    # zeroing inner = 6 x (46 + (2 + 8 x 11) + 8 x 8) = 1200, else 6 x (46 + 64) = 660;
    # 50 + 12 + 1 + 7 x (15 + 4 x (19 + 6 + 32 + 660)) + 11 + 4 x (18 + 7 + 32 + 1200) = 25,283
    assert int(matmul_block_cycles(64, 64, 64, True, True, t)) == 25283
    # large blocks approach (never beat) the AMP peak: 16 float / 64 half MACs per tile cycle
    for float_acts, macs_per_cycle in ((True, 16), (False, 64)):
        m = k = n = 480
        c = int(matmul_block_cycles(m, k, n, float_acts, True, t))
        ideal = m * k * n / macs_per_cycle
        assert ideal < c < 1.15 * ideal
    assert amp_geometry(False, t)["units"] == 16 and amp_geometry(False, ipu.GC2)["units"] == 8
    # more positions per worker cost more; channels are padded to whole groups
    assert matmul_block_cycles(60, 64, 64, True, True, t) > matmul_block_cycles(30, 64, 64, True, True, t)
    assert matmul_block_cycles(30, 57, 64, True, True, t) == matmul_block_cycles(30, 64, 64, True, True, t)
    assert matmul_block_cycles(30, 64, 50, True, True, t) == matmul_block_cycles(30, 64, 64, True, True, t)


def test_block_rejects_wrong_sizes_and_types():
    g = ipu.Graph(vertex_target(1))
    a = g.add_variable("a", (4, 5))
    b = g.add_variable("b", (5, 6))
    o = g.add_variable("o", (4, 6))
    h = g.add_variable("h", (4, 6), "float16")
    for v in (a, b, o, h):
        g.set_tile_mapping(v, 0)
    cs = g.add_compute_set("mm")
    with pytest.raises(ValueError, match="need m\\*k"):
        g.add_vertex(cs, "MatMulBlock", 0, a=a, b=b, out=o, m=4, k=5, n=5, accumulate=0)
    with pytest.raises(TypeError):
        g.add_vertex(cs, "MatMulBlock", 0, a=a, b=b, out=h, m=4, k=5, n=6, accumulate=0)


@pytest.mark.parametrize("odt", ["float32", "float16"])
@pytest.mark.parametrize("num, length", [(0, 5), (1, 7), (2, 1), (3, 13), (5, 64), (8, 101), (33, 8), (33, 7), (20, 26),
                                         (4, 31), (2, 16), (32, 1)])
def test_reduce_partials(num, length, odt):
    g = ipu.Graph(vertex_target(1))
    p = g.add_variable("p", (max(num * length, 1),))
    o = g.add_variable("o", (length,), odt)
    g.set_tile_mapping(p, 0)
    g.set_tile_mapping(o, 0)
    cs = g.add_compute_set("red")
    g.add_vertex(cs, "MatMulReducePartials", 0, partials=p[:num * length], out=o, num_partials=num)
    engine = ipu.Engine(ipu.compile(g, ipu.Execute(cs)))
    pv = np.random.default_rng(num).standard_normal(max(num * length, 1)).astype(np.float32)
    engine.write_tensor(p, pv)
    engine.write_tensor(o, np.full(length, 3.0, odt))
    cycles = engine.run()
    ref = ipu.get_codelet("MatMulReducePartials").reference(pv[:num * length], num, length, odt)
    # the sums are defined in order (p = 0, 1, ... from 0, in float32, rounded once): exact
    np.testing.assert_array_equal(engine.read_tensor(o).astype(np.float32), ref.astype(np.float32))
    assert cycles == int(reduce_partials_cycles(length, num, odt == "float32"))


@pytest.mark.parametrize("odt", ["float32", "float16"])
@pytest.mark.parametrize("num, length", [(1, 7), (2, 1), (3, 13), (8, 101), (33, 8), (5, 12)])
def test_reduce_half_partials(num, length, odt):
    """float16 partials (PopXL's partials_type float16): widened exactly, summed in float32 in
    order, rounded once; charged poplin's half-partials ReduceAdd estimate."""
    g = ipu.Graph(vertex_target(1))
    p = g.add_variable("p", (num * length,), "float16")
    o = g.add_variable("o", (length,), odt)
    g.set_tile_mapping(p, 0)
    g.set_tile_mapping(o, 0)
    cs = g.add_compute_set("red")
    g.add_vertex(cs, "MatMulReducePartials", 0, partials=p, out=o, num_partials=num)
    engine = ipu.Engine(ipu.compile(g, ipu.Execute(cs)))
    pv = np.random.default_rng(num).standard_normal(num * length).astype(np.float16)
    engine.write_tensor(p, pv)
    cycles = engine.run()
    ref = ipu.get_codelet("MatMulReducePartials").reference(pv, num, length, odt)
    np.testing.assert_array_equal(engine.read_tensor(o).astype(np.float32), ref.astype(np.float32))
    assert cycles == int(reduce_partials_cycles(length, num, odt == "float32", partials_float=False))


def test_reduce_half_partials_cost_poplibs_value():
    # getReduceCycleEstimate(712 outputs, 8 half partials -> half): accumulator vectors of 8, 89
    # loops (712 = 8 x 89, no remainder bits) over 6 workers = 15 per worker, (3 x 8 + 8) x 15 + 32
    # = 512, x 6 workers; one partial is a cast reading 4 halves a cycle
    assert int(reduce_partials_cycles(712, 8, False, partials_float=False)) == 3072
    assert int(reduce_partials_cycles(712, 1, False, partials_float=False)) == 6 * (-(-119 // 4) + 26)


def test_reduce_cost_model_poplibs_value():
    # getReduceCycleEstimate(712 outputs, 8 partials, float -> float): 178 loops of 4 over 6
    # workers = 30 per worker, (3 x 8 + 7) x 30 + 32 = 962, x 6 workers
    assert int(reduce_partials_cycles(712, 8, True)) == 5772


def _half_test_values():
    """float32 values around every float16: each half, the midpoints to its neighbours (ties) and
    one float32 ulp either side of them, the overflow and underflow boundaries, specials, randoms."""
    h = np.arange(0, 0x7C00, dtype=np.uint16).view(np.float16).astype(np.float64)
    mids = (h[:-1] + h[1:]) / 2
    mids32 = mids.astype(np.float32)
    vals = [h.astype(np.float32), mids32, np.nextafter(mids32, np.float32(np.inf)),
            np.nextafter(mids32, np.float32(0)),
            np.array([65504, 65519.99, 65520, 65536, 1e30, 2 ** -24, 2 ** -25, 2 ** -25 * 1.0000001,
                      2 ** -26, 1e-30, 0.0, np.inf, np.nan], np.float32)]
    rnd = np.random.default_rng(0)
    vals.append((rnd.standard_normal(200_000) * 10.0 ** rnd.integers(-9, 6, 200_000)).astype(np.float32))
    v = np.concatenate(vals)
    return np.concatenate([v, -v])


def test_half_conversions_are_exactly_ipu_load_and_store():
    from numba import njit

    from codelets.matmul import _narrow_half, _widen_half

    @njit
    def by_load(view):
        out = np.empty(view.size, np.float32)
        for i in range(view.size):
            out[i] = ipu.load(view, i)
        return out

    @njit
    def by_store(view, x):
        for i in range(x.size):
            ipu.store(view, i, x[i])

    bits = np.arange(65536, dtype=np.uint16)
    view = bits.view(ipu.FLOAT16.storage)
    wide = _widen_half(view, 0, bits.size)
    expect = bits.view(np.float16).astype(np.float32)
    same = (wide.view(np.uint32) == expect.view(np.uint32)) | (np.isnan(wide) & np.isnan(expect))
    assert same.all()
    np.testing.assert_array_equal(wide, by_load(view))

    x = _half_test_values()
    mine = np.zeros(x.size, np.uint16)
    _narrow_half(mine.view(ipu.FLOAT16.storage), 0, x)
    theirs = np.zeros(x.size, np.uint16)
    by_store(theirs.view(ipu.FLOAT16.storage), x)
    with np.errstate(over="ignore"):
        numpy_bits = x.astype(np.float16).view(np.uint16)
    nan = np.isnan(x)
    np.testing.assert_array_equal(mine[~nan], numpy_bits[~nan])
    np.testing.assert_array_equal(mine, theirs)  # NaNs too: the quiet NaN of the same sign
    assert np.isnan(mine[nan].view(np.float16)).all()
    np.testing.assert_array_equal(mine[nan] & 0x8000, numpy_bits[nan] & 0x8000)


# ------------------------------------------------------------------------------------------------
# small blocks: summed in place (codelets/_sgemm.py), in the order OpenBLAS's kernels use for them

_products = {}


def _product(path: str):
    """A compiled caller of gemm_rows (path "gemm": small blocks in place) or of sgemm_rows."""
    if path not in _products:
        from numba import njit

        from codelets._sgemm import gemm_rows, gemm_scratch, sgemm_rows

        if path == "gemm":
            @njit
            def run(a, b, c, m, k, n, acc):
                gemm_rows(a, 1, b, 2, c, 3, m, k, n, acc, gemm_scratch())
        else:
            @njit
            def run(a, b, c, m, k, n, acc):
                sgemm_rows(a, 1, b, 2, c, 3, m, k, n, acc, gemm_scratch())
        _products[path] = run
    return _products[path]


def _operands(rng, m, k, n):
    # blocks at offsets 1, 2, 3 of longer arrays, with one element past each end
    a = rng.standard_normal(m * k + 2).astype(np.float32)
    b = rng.standard_normal(k * n + 3).astype(np.float32)
    c = rng.standard_normal(m * n + 4).astype(np.float32)
    return a, b, c


def _small_shapes(rng, count):
    from codelets._sgemm import SMALL_DEPTH, SMALL_ROWS

    edges = [(1, 1, 1), (SMALL_ROWS, SMALL_DEPTH, 1), (1, SMALL_DEPTH, 130), (2, 8, 64), (3, 8, 65), (2, 1, 200)]
    # at most 16 wide: rows in vectors masked past n (each lane count, one vector and two)
    edges += [(m, k, n) for m in range(1, SMALL_ROWS + 1) for n in (1, 2, 7, 8, 9, 10, 15, 16) for k in (1, 5, 33)]
    return edges + [(int(rng.integers(1, SMALL_ROWS + 1)), int(rng.integers(1, SMALL_DEPTH + 1)),
                     int(rng.integers(1, 150))) for _ in range(count)]


def _wide_shapes(rng, count):
    """16-wide blocks: every row count to 40 (each panel pattern) at awkward depths, then random."""
    from codelets._sgemm import SMALL_DEPTH, WIDE

    edges = [(m, k, WIDE) for m in range(1, 41) for k in (1, 7, 8, 9, 23)]
    edges += [(12, SMALL_DEPTH, WIDE), (35, SMALL_DEPTH - 1, WIDE), (128, 112, WIDE)]
    return edges + [(int(rng.integers(1, 140)), int(rng.integers(1, SMALL_DEPTH + 1)), WIDE) for _ in range(count)]


def _fma_chain(x, y):
    """Per output, float32 fused multiply-adds over k in order from 0: each step x*y + acc is
    exact in float64 (a 48-bit product plus a float32), rounded once to float32 (a double
    rounding that could differ needs the float64 sum on a float32 midpoint: about 2^-29 a step)."""
    acc = np.zeros(x.shape[0:1] + y.shape[1:], np.float32)
    for kk in range(x.shape[1]):
        acc = (x[:, kk:kk + 1].astype(np.float64) * y[kk].astype(np.float64) + acc).astype(np.float32)
    return acc


def _two_chain_sum(x, y):
    """Per output: one chain over the even k below the last multiple of 8 and the k from there on,
    one over the odd k below it, then the first plus the second (each step as in _fma_chain)."""
    q8 = x.shape[1] - x.shape[1] % 8
    first = list(range(0, q8, 2)) + list(range(q8, x.shape[1]))
    second = list(range(1, q8, 2))
    return _fma_chain(x[:, first], y[first]) + _fma_chain(x[:, second], y[second])


def _wide_rows_reference(x, y):
    """The 16-wide order: rows in panels of 12, 8, 4, 2, 1; the first 6 rows of a 12-panel and the
    rows of 8- and 4-panels two chains, the others one."""
    m = x.shape[0]
    two, i = [], 0
    for panel in (12, 8, 4, 2, 1):
        while m - i >= panel:
            two += [r < 6 for r in range(12)] if panel == 12 else [panel in (8, 4)] * panel
            i += panel
            if panel != 12:
                break
    one, both = _fma_chain(x, y), _two_chain_sum(x, y)
    return np.where(np.array(two)[:, None], both, one)


@pytest.mark.parametrize("accumulate", [False, True])
@pytest.mark.parametrize("shapes,reference,seed", [
    (_small_shapes, _fma_chain, 7),  # 1-3 rows: each output one chain over k in order
    (_wide_shapes, _wide_rows_reference, 17),  # 16 wide: sgemm's panels of rows
], ids=["small", "wide"])
def test_in_place_blocks_sum_in_sgemm_order(shapes, reference, seed, accumulate):
    rng = np.random.default_rng(seed + accumulate)
    run = _product("gemm")
    for m, k, n in shapes(rng, 60 if shapes is _small_shapes else 40):
        a, b, c = _operands(rng, m, k, n)
        got = c.copy()
        run(a, b, got, m, k, n, accumulate)
        sums = reference(a[1:1 + m * k].reshape(m, k), b[2:2 + k * n].reshape(k, n))
        old = c[3:3 + m * n].reshape(m, n)
        want = (old + sums) if accumulate else (sums + np.float32(0.0))
        np.testing.assert_array_equal(got[3:3 + m * n].reshape(m, n).view(np.uint32), want.view(np.uint32),
                                      err_msg=f"m, k, n = {m}, {k}, {n}")
        # nothing outside the block is touched
        np.testing.assert_array_equal(got[:3], c[:3])
        np.testing.assert_array_equal(got[3 + m * n:], c[3 + m * n:])


def test_small_block_zero_sum_is_positive_zero():
    # every product -0.0 (or an underflow to -0.0): the stored sum is +0.0, as sgemm's add into
    # its zeroed output gives
    a = np.array([0.0, -1e-30, -1e-30], np.float32)
    b = np.array([0.0, 0.0, 1e-30, 1e-30], np.float32)
    c = np.full(5, 7.0, np.float32)
    _product("gemm")(a, b, c, 1, 2, 1, False)
    assert c[3] == 0.0 and not np.signbit(c[3])


def test_small_blocks_same_bits_as_this_hosts_sgemm():
    """Where the host's sgemm sums small and 16-wide blocks in the same order (OpenBLAS's Haswell /
    Zen kernels do, for k <= 320), the in-place paths give its bits: a host whose library orders
    them otherwise (another kernel, another library) is skipped after a probe."""
    from ipu.blas import single_threaded_kernel_blas

    rng = np.random.default_rng(11)
    small, blas = _product("gemm"), _product("sgemm")
    a, b, c = _operands(rng, 1, 1, 1)
    small(a, b, c, 1, 1, 1, False), blas(a, b, c, 1, 1, 1, False)  # compiled: SciPy's BLAS is loaded
    probe = [(3, 40, 24), (1, 8, 10), (2, 300, 17), (32, 40, 16), (35, 57, 16)]
    with single_threaded_kernel_blas.limited(1):  # as in a run: a threaded sgemm splits rows otherwise
        _compare_with_sgemm(rng, small, blas, probe, probe + _small_shapes(rng, 200) + _wide_shapes(rng, 100))


def _compare_with_sgemm(rng, small, blas, probe, shapes):
    for i, (m, k, n) in enumerate(shapes):
        for accumulate in (False, True):
            a, b, c = _operands(rng, m, k, n)
            mine, theirs = c.copy(), c.copy()
            small(a, b, mine, m, k, n, accumulate)
            blas(a, b, theirs, m, k, n, accumulate)
            same = np.array_equal(mine.view(np.uint32), theirs.view(np.uint32))
            if i < len(probe) and not same:
                pytest.skip("this host's sgemm sums small blocks in another order")
            assert same, f"m, k, n = {m}, {k}, {n}, accumulate {accumulate}"
            np.testing.assert_allclose(mine, theirs, rtol=1e-5, atol=1e-5 * np.sqrt(k))
