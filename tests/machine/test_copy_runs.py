"""Copies compiled from runs of elements (not element by element) give the same tables; views and
tile mappings keep compact forms."""
import numpy as np
import pytest

import ipu
from ipu.copytables import merge_runs, runs
from ipu.tensor import IndexRuns


def _layout(exe, v):
    return exe.layouts[v.id]


@pytest.mark.parametrize("seed", range(6))
def test_merge_runs_equals_the_element_by_element_table(seed):
    rng = np.random.default_rng(seed)
    g = ipu.Graph(ipu.small_target(7))
    a = g.add_variable("a", (23, 41), "float32")
    b = g.add_variable("b", (41, 23), "float32")
    g.map_linearly(a)
    tiles = rng.integers(0, 7, b.numel)
    tiles[rng.random(b.numel) < 0.8] = 3  # long stretches on one tile, and scattered elements
    b.tile_of = np.sort(tiles).astype(np.int32)
    views = [(a.transpose(), b), (a.reshape(41, 23)[::2], b[::2]), (a.reshape(-1)[rng.permutation(a.numel)].reshape(41, 23), b),
             (a[3:17].reshape(-1)[5:400], b.reshape(-1)[100:495])]
    exe = ipu.compile(g, ipu.Sequence(*[ipu.Copy(s, d) for s, d in views]))
    for s, d in views:
        La, Lb = _layout(exe, s.variable), _layout(exe, d.variable)
        sa, st = La.element_addresses(s.flat_index())
        da, dt = Lb.element_addresses(d.flat_index())
        old = runs(sa, da, st, dt, 4)
        new = merge_runs(La.run_addresses(*s.index_runs()), Lb.run_addresses(*d.index_runs()), 4)
        for x, y in zip(old, new):
            np.testing.assert_array_equal(x, y)


def test_long_views_keep_runs_not_elements():
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (512, 512), "float32")
    rows = x[::2]  # 256 runs of 512 elements
    assert isinstance(rows._index, IndexRuns) and rows._index.starts.size == 256
    np.testing.assert_array_equal(rows.flat_index(), np.arange(512 * 512).reshape(512, 512)[::2].reshape(-1))
    assert rows.contiguous_range() is None and x[3:5].contiguous_range() == (3 * 512, 1024)
    col = x[:, 7]  # no runs to speak of: stays an array
    assert isinstance(col._index, np.ndarray)


def test_tile_mapping_by_runs_and_compacted_after_compile():
    g = ipu.Graph(ipu.small_target(4))
    v = g.add_variable("v", (10,), "float32", category="temporary")
    v.set_tile_runs([2, 0, 3], [3, 0, 7])
    np.testing.assert_array_equal(v.tile_of, [2, 2, 2, 3, 3, 3, 3, 3, 3, 3])
    w = g.add_variable("w", (1000,), "float32")
    g.map_linearly(w)
    expect = w.tile_of.copy()
    exe = ipu.compile(g, ipu.Copy(w[:10], v))
    assert w._tile_of is None  # only its pieces are kept after compiling
    np.testing.assert_array_equal(w.tile_of, expect)
    engine = ipu.Engine(exe)
    engine.write_tensor(w, np.arange(1000, dtype=np.float32))
    engine.run()
    np.testing.assert_array_equal(engine.read_tensor(v), np.arange(10, dtype=np.float32))
    with pytest.raises(ValueError, match="cover"):
        v.set_tile_runs([0], [3])


@pytest.mark.parametrize("dtype", [np.uint8, np.uint16, np.float32, np.int64])
def test_copy_runs_copies_every_run_length_exactly(dtype):
    """copy_runs against a slice-by-slice reference: every run length from 0 to 300 bytes (the
    inlined 4-64 byte moves, the library memcpy beyond, the odd sizes below 4), at unaligned
    offsets, runs reading what earlier runs wrote, and nothing outside the runs touched."""
    from ipu.copytables import copy_runs

    rng = np.random.default_rng(7)
    isz = np.dtype(dtype).itemsize
    lengths = np.arange(0, 300 // isz + 1)
    mem = rng.integers(0, 255, 64 * 1024, dtype=np.uint8).view(dtype).copy()
    src = rng.integers(0, mem.size // 2, lengths.size)
    dst = mem.size // 2 + rng.integers(0, mem.size // 2 - lengths.max(), lengths.size)
    dst[1::7] = src[::7][:dst[1::7].size] + 1  # some runs read bytes an earlier run wrote, one element on
    ref = mem.copy()
    for s, d, n in zip(src, dst, lengths):
        if not (d < s + n and s < d + n):  # a run never overlaps its own destination
            ref[d:d + n] = ref[s:s + n].copy()
    keep = np.array([not (d < s + n and s < d + n) for s, d, n in zip(src, dst, lengths)])
    copy_runs(mem, mem, src[keep], dst[keep], lengths[keep])
    np.testing.assert_array_equal(mem, ref)
