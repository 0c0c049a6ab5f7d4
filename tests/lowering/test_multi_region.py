"""Multi-region vertices (poplibs' 2D vertices: each field a vector of regions, one vertex per
worker context covering many regions): the split of a tile's regions between workers
(poplibs splitRegionsBetweenWorkers), their results against NumPy, and their cost: vertex state
that grows by a region's pointers, not by a vertex per region, and cycles as poplibs' estimator
sums them (the vertex's fixed part once, then each region)."""
import numpy as np
import pytest

import ipu
from codelets.select import clamp_cycles
import popxl.ops as ops
from popxl.lowering.blocks import continuous_groups, worker_regions

from helpers import run_popxl

RNG_MR = np.random.default_rng(5)


def _fragmented(g, n, run, tiles, dtype=ipu.FLOAT32, name="v"):
    """A variable of n elements in runs of `run` dealt round robin to `tiles` tiles."""
    v = g.add_variable(name, (n,), dtype, ipu.TEMPORARY)
    runs = np.full(-(-n // run), run)
    runs[-1] = n - run * (runs.size - 1)
    v.set_tile_runs(np.arange(runs.size) % tiles, runs)
    return v


@pytest.mark.parametrize("n,run,tiles,grain", [(1000, 8, 4, 2), (997, 13, 3, 2), (5, 1, 2, 4), (1, 1, 1, 2),
                                               (4096, 4096, 1, 2), (61, 7, 5, 1)])
def test_worker_regions_cover_every_element_once(n, run, tiles, grain):
    g = ipu.Graph(ipu.small_target(tiles))
    v = _fragmented(g, n, run, tiles)
    t, s, c, r = worker_regions(v, 6, grain)
    cover = np.zeros(n, np.int64)
    for a, k in zip(s, c):
        cover[a:a + k] += 1
    assert np.all(cover == 1) and np.all(c > 0)
    assert np.all(v.tile_of[s] == t) and np.all(v.tile_of[s + c - 1] == t)
    first = np.flatnonzero(r == 0)
    assert r[0] == 0 and np.all(r[1:][r[1:] > 0] == r[:-1][r[1:] > 0] + 1)
    for tile in range(tiles):
        on = t == tile
        assert np.count_nonzero(r[on] == 0) <= 6  # at most a vertex per worker context
        # each vertex holds at most ceil(grains / 6) grains (and at least 2 grains' worth may go to one)
        total = int(c[on].sum())
        per = max(-(-(-(-total // grain)) // 6), 2) * grain
        ends = np.append(first[1:], len(t))
        for a, b in zip(first, ends):
            if t[a] == tile:
                assert c[a:b].sum() <= per


def _clamp_program(n, run, tiles, multi):
    g = ipu.Graph(ipu.small_target(tiles))
    x = _fragmented(g, n, run, tiles, name="x")
    y = _fragmented(g, n, run, tiles, name="y")
    cs = g.add_compute_set("clamp")
    if multi:
        t, s, c, r = worker_regions(y, 6, 2)
        g.add_vertices(cs, "Clamp", t, {"in": (x, s, c), "out": (y, s, c)}, fp={"lo": -0.5, "hi": 0.25}, region=r)
    else:
        st, sp, t = y.pieces()
        g.add_vertices(cs, "Clamp", t, {"in": (x, st, sp - st), "out": (y, st, sp - st)},
                       fp={"lo": -0.5, "hi": 0.25})
    exe = ipu.compile(g, ipu.Execute(cs))
    eng = ipu.Engine(exe)
    data = np.random.default_rng(n).standard_normal(n).astype(np.float32)
    eng.write_tensor(x, data)
    eng.run()
    return exe, eng.read_tensor(y), data


@pytest.mark.parametrize("n,run,tiles", [(2000, 10, 2), (333, 7, 3), (64, 64, 1)])
def test_multi_region_clamp_matches_numpy_with_less_state(n, run, tiles):
    exe, got, data = _clamp_program(n, run, tiles, True)
    np.testing.assert_array_equal(got, np.clip(data, -0.5, 0.25))
    exe1, got1, _ = _clamp_program(n, run, tiles, False)
    np.testing.assert_array_equal(got1, got)
    state = exe.plan.categories["vertex_state"]
    clamp = ipu.get_codelet("Clamp")
    g = ipu.Graph(ipu.small_target(tiles))
    t, s, c, r = worker_regions(_fragmented(g, n, run, tiles), 6, 2)
    for tile in range(tiles):
        on = t == tile
        # the vertices' outer vectors and lo / hi, then two region pointers a region
        want = clamp.state_bytes() * np.count_nonzero(r[on] == 0) + clamp.region_state_bytes() * np.count_nonzero(on)
        assert state[tile] == want
    one_each = exe1.plan.categories["vertex_state"].max()  # a vertex per region
    if n // tiles // run > 6:  # more regions than workers (fewer: a region is split between them)
        assert state.max() <= one_each
    if run * 6 * 4 < n // tiles:  # 4+ regions a vertex: less than half the state of a vertex per region
        assert state.max() * 2 < one_each


def test_multi_region_cycles_follow_the_poplibs_estimator():
    """Clamp 2D: 5 + sum over regions of (6 + loop); the tile busy 6 x its slowest worker."""
    n, run, tiles = 1200, 10, 2
    exe, _, _ = _clamp_program(n, run, tiles, True)
    g = ipu.Graph(ipu.small_target(tiles))
    t, s, c, r = worker_regions(_fragmented(g, n, run, tiles), 6, 2)
    step = next(st for st in exe.steps if st.kind == "compute")
    per_region = clamp_cycles(c, ipu.FLOAT32) - 5
    vertex = np.cumsum(r == 0) - 1
    vc = np.bincount(vertex, weights=per_region).astype(np.int64) + 5
    vtile = t[r == 0]
    launch = exe.target.compute_set_launch_cycles
    for tile in range(tiles):
        assert step.tile_cycles[tile] == 6 * vc[vtile == tile].max() + launch
    assert step.vertices == np.count_nonzero(r == 0)


def test_region_rows_must_form_vertices():
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (8,), ipu.FLOAT32)
    g.set_tile_mapping(x, 0)
    cs = g.add_compute_set("cs")
    with pytest.raises(ValueError, match="multi-region"):
        g.add_vertices(cs, "UnaryOp", [0, 0], {"in": (x, [0, 4], 4), "out": (x, [0, 4], 4)}, ip={"op": 0},
                       region=[0, 1])
    with pytest.raises(ValueError, match="follow each other"):
        g.add_vertices(cs, "Clamp", [0, 0], {"in": (x, [0, 4], 4), "out": (x, [0, 4], 4)},
                       fp={"lo": 0.0, "hi": 1.0}, region=[0, 2])
    with pytest.raises(ValueError, match="follow each other"):
        g.add_vertices(cs, "Clamp", [0, 0], {"in": (x, [0, 4], 4), "out": (x, [0, 4], 4)},
                       fp={"lo": [0.0, 0.5], "hi": 1.0}, region=[0, 1])


# ------------------------------------------------------------------------------------------------
# reductions: a tile's (tile, row) groups in continuous Reduce vertices


def _groups(sizes, tiles, gap_after=()):
    """Groups of `sizes` elements laid one after another on `tiles` (a variable whose pieces break
    after the groups in `gap_after`), writing one output element each."""
    g = ipu.Graph(ipu.small_target(max(tiles) + 2))
    n = int(sum(sizes))
    src = g.add_variable("src", (n,), ipu.FLOAT32, ipu.TEMPORARY)
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(np.int64)
    src_tiles = np.repeat(np.asarray(tiles), sizes)
    for j in gap_after:  # the next group on another tile for one element: a new piece
        src_tiles[starts[j + 1]] = max(tiles) + 1
    src.tile_of[:] = src_tiles
    dst = g.add_variable("dst", (len(sizes),), ipu.FLOAT32, ipu.TEMPORARY)
    dst.tile_of[:] = tiles
    return np.asarray(tiles, np.int64), src, starts, np.asarray(sizes, np.int64), dst


@pytest.mark.parametrize("sizes,tiles,gaps", [
    ([5] * 40, [0] * 40, ()),  # one run: dealt to 6 workers
    ([5] * 13 + [3] + [5] * 4, [0] * 18, ()),  # a group of another size breaks the run
    ([7] * 10, [0] * 5 + [1] * 5, ()),  # two tiles
    ([4] * 12, [0] * 12, (5,)),  # a piece boundary of the input breaks it
    ([1], [0], ()),
])
def test_continuous_groups_share_vertices_that_cover_every_group_once(sizes, tiles, gaps):
    t, src, starts, counts, dst = _groups(sizes, tiles, gaps)
    first, n_out = continuous_groups(t, src, starts, counts, dst, np.arange(len(sizes)), 6)
    assert n_out.sum() == len(sizes) and np.all(n_out > 0)
    assert np.array_equal(first, np.cumsum(n_out) - n_out)
    s_piece = np.searchsorted(src.pieces()[0], starts, side="right")
    for a, k in zip(first, n_out):
        grp = np.arange(a, a + k)
        assert len(set(t[grp])) == 1 and len(set(counts[grp])) == 1 and len(set(s_piece[grp])) == 1
        assert np.array_equal(starts[grp], starts[a] + counts[a] * np.arange(k))  # one [k, inner] region
    for tile in set(tiles):
        on = t[first] == tile
        runs = len({(counts[a], s_piece[a]) for a in first[on]})
        assert np.count_nonzero(on) <= 6 + runs  # a vertex per worker, plus one per break


def _channel_sums(channels, batch=4, rows=6):
    """The per-channel sum and sum of squares of a batch-norm input on one tile."""
    x = RNG_MR.standard_normal((batch, channels, rows, 5)).astype(np.float32)
    out, session = run_popxl(lambda t: (ops.sum(t, axis=(0, 2, 3)), ops.sumsquare(t, axis=(0, 2, 3))), [x],
                             target="small:1")
    np.testing.assert_allclose(out[0], x.astype(np.float64).sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], (x.astype(np.float64) ** 2).sum((0, 2, 3)), rtol=1e-5, atol=1e-5)
    return session.executable


def test_channel_reductions_state_does_not_grow_with_the_channels():
    """A batch norm's per-channel sums on one tile: every channel is a (tile, row) group of the same
    size, one after another once grouped, so the reduction is a few continuous Reduce vertices
    (one per worker) whatever the channel count, where a vertex per channel grew with it."""
    few, many = _channel_sums(6), _channel_sums(96)
    reduce_vertices = lambda exe: sum(st.vertices for st in exe.steps  # noqa: E731
                                      if st.kind == "compute" and "sum" in st.name)
    assert 0 < reduce_vertices(few) == reduce_vertices(many) <= 2 * 6  # two reductions, <= 6 vertices each
    state = lambda exe: exe.plan.categories["vertex_state"][0]  # noqa: E731
    assert state(many) == state(few)  # the grouping copy and everything else: the same vertices
