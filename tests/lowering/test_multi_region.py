"""Multi-region vertices (poplibs' 2D vertices: each field a vector of regions, one vertex per
worker context covering many regions): the split of a tile's regions between workers
(poplibs splitRegionsBetweenWorkers), their results against NumPy, and their cost: vertex state
that grows by a region's pointers, not by a vertex per region, and cycles as poplibs' estimator
sums them (the vertex's fixed part once, then each region)."""
import numpy as np
import pytest

import ipu
from codelets.select import clamp_cycles
from popxl.lowering.blocks import worker_regions

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
