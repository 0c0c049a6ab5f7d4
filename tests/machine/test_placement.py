"""ipu.placement (the memory planner's first fit) against the plain scan it speeds up: the same
address for every piece, on random pieces with one or several segments (a function's temporaries,
one segment per call), always-live pieces and empty ones."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ipu.placement import place


def _segments_meet(ss, se, a, b):
    return any(ss[i] <= se[j] and ss[j] <= se[i] for i in a for j in b)


def reference_place(order, tile, size, seg_ptr, ss, se, num_tiles):
    """The plain first-fit scan: always-live pieces stacked from 0, then each piece at the lowest
    address between the placed pieces that are still live and whose segments meet its own."""
    addr = np.zeros(len(size), np.int64)
    peak = np.zeros(num_tiles, np.int64)
    segs = [range(seg_ptr[p], seg_ptr[p + 1]) for p in range(len(size))]
    placed = {}  # tile -> [(addr, size, piece)]
    for p in order:
        t = tile[p]
        plist = placed.setdefault(t, [])
        if ss[segs[p][0]] < 0:
            addr[p] = sum(size[q] for q in [x[2] for x in plist])
            plist.append((addr[p], size[p], p))
            peak[t] = max(peak[t], addr[p] + size[p])
            continue
        floor = sum(sz for a, sz, q in plist if ss[segs[q][0]] < 0)
        first = ss[segs[p][0]]
        live = [(a, sz, q) for a, sz, q in sorted(plist, key=lambda x: x[0])
                if ss[segs[q][0]] >= 0 and se[segs[q][-1]] >= first and _segments_meet(ss, se, segs[p], segs[q])]
        cur = floor
        for a, sz, q in live:
            if a - cur >= size[p]:
                break
            cur = max(cur, a + sz)
        addr[p] = cur
        plist.append((cur, size[p], p))
        peak[t] = max(peak[t], cur + size[p])
    return addr, peak


def random_pieces(rng, num_tiles, n, calls):
    """Pieces of a main program with a function called `calls` times: main pieces have one
    segment (some spanning several calls), the function's temporaries one per call (its window
    shifted to each call)."""
    call_at = np.sort(rng.choice(np.arange(20, 400, 25), calls, replace=False))
    tiles, sizes, starts, ends, counts = [], [], [], [], []
    for _ in range(n):
        kind = rng.random()
        tiles.append(int(rng.integers(num_tiles)))
        sizes.append(int(rng.choice([0, 8, 16, 24, 64, 136, 512])))
        if kind < 0.1:  # always live
            starts.append([-1]); ends.append([500])
        elif kind < 0.55 or calls == 0:
            a = int(rng.integers(0, 480)); b = a + int(rng.integers(0, 60 if rng.random() < 0.7 else 400))
            starts.append([a]); ends.append([b])
        else:
            a = int(rng.integers(0, 20)); b = a + int(rng.integers(0, 4))
            starts.append([c + a for c in call_at]); ends.append([c + b for c in call_at])
        counts.append(len(starts[-1]))
    seg_ptr = np.concatenate(([0], np.cumsum(counts)))
    ss = np.concatenate([np.array(x, np.int64) for x in starts])
    se = np.concatenate([np.array(x, np.int64) for x in ends])
    tile = np.array(tiles, np.int64)
    size = np.array(sizes, np.int64)
    first = ss[seg_ptr[:-1]]
    order = np.lexsort((-size, first, tile))
    return order, tile, size, seg_ptr, ss, se


@pytest.mark.parametrize("seed", range(16))
@pytest.mark.parametrize("calls", [0, 1, 3, 7])
def test_placement_matches_the_plain_scan(seed, calls):
    rng = np.random.default_rng(seed)
    num_tiles = 3
    args = random_pieces(rng, num_tiles, int(rng.integers(1, 400)), calls)
    got = place(*args, num_tiles)
    want = reference_place(*args, num_tiles)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def test_placement_of_nothing():
    z = np.zeros(0, np.int64)
    addr, peak = place(z, z, z, np.zeros(1, np.int64), z, z, 4)
    assert addr.size == 0 and peak.tolist() == [0, 0, 0, 0]


def test_no_call_patterns_when_every_piece_has_one_segment():
    from ipu.placement import _patterns

    ss = np.array([-1, 0, 3, 5], np.int64)
    pid, least = _patterns(np.arange(5, dtype=np.int64), ss, ss + 2)
    assert pid.tolist() == [-1] * 4 and least.size == 0
    assert pid.dtype == least.dtype == np.int64


def test_many_pieces_live_at_once_split_the_active_list():
    """More live pieces on a tile than one block of the active list holds (blocks split, and
    pieces are then dropped from the middle blocks)."""
    rng = np.random.default_rng(1)
    n = 700
    tile = np.zeros(n, np.int64)
    size = rng.choice([8, 16, 40], n).astype(np.int64)
    ss = np.sort(rng.integers(0, 300, n)).astype(np.int64)
    se = ss + rng.integers(0, 250, n)
    seg_ptr = np.arange(n + 1, dtype=np.int64)
    order = np.lexsort((-size, ss, tile))
    got = place(order, tile, size, seg_ptr, ss, se, 1)
    want = reference_place(order, tile, size, seg_ptr, ss, se, 1)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1][0] == want[1][0]


@pytest.mark.parametrize("calls", [0, 3])
def test_thousands_of_live_pieces_on_a_tile_match_the_plain_scan(calls):
    """Enough pieces live at once on a tile that the active list has dozens of blocks (so whole
    groups of blocks are passed by their summaries), with and without a function's dormant pieces."""
    rng = np.random.default_rng(7 + calls)
    n = 1500
    call_at = np.array([300, 900, 1500])[:calls]
    tiles, sizes, starts, ends = [], [], [], []
    for _ in range(n):
        tiles.append(0)
        sizes.append(int(rng.choice([8, 16, 24, 64, 136])))
        if calls and rng.random() < 0.3:
            a = int(rng.integers(0, 20)); b = a + int(rng.integers(0, 4))
            starts.append([c + a for c in call_at]); ends.append([c + b for c in call_at])
        else:
            a = int(rng.integers(0, 2000)); b = a + int(rng.integers(0, 1500 if rng.random() < 0.8 else 40))
            starts.append([a]); ends.append([b])
    args = _as_arrays(tiles, sizes, starts, ends)
    got = place(*args, 1)
    want = reference_place(*args, 1)
    np.testing.assert_array_equal(got[0], want[0])
    assert got[1][0] == want[1][0]


def recomputed_pieces(rng, num_tiles, n, calls):
    """Pieces of a training step with recomputation: forward temporaries (one short segment),
    checkpoints (one segment from the forward pass to the backward pass), recomputed activations
    (a forward segment, then a second one from their rerun in the backward pass to their gradient
    use, the backward pass visiting the layers in reverse), backward temporaries, and, with
    `calls`, a function's temporaries (one segment per call, in both passes)."""
    fwd, bwd = 400, 800  # the backward pass runs over [fwd, bwd)
    call_at = np.sort(rng.choice(np.arange(20, fwd - 30, 17), calls, replace=False)) if calls else []
    tiles, sizes, starts, ends = [], [], [], []
    for _ in range(n):
        kind = rng.random()
        tiles.append(int(rng.integers(num_tiles)))
        sizes.append(int(rng.choice([0, 8, 16, 24, 64, 136, 512])))
        a = int(rng.integers(0, fwd - 10))
        back = bwd - a - int(rng.integers(1, 10))  # the layer's place in the backward pass
        if kind < 0.05:
            seg = [(-1, bwd)]
        elif kind < 0.4:
            seg = [(a, a + int(rng.integers(0, 8)))]
        elif kind < 0.5:
            seg = [(a, back)]
        elif kind < 0.8:
            e = a + int(rng.integers(0, 6))
            re = max(back - int(rng.integers(1, 40)), e + 2)  # rerun, then used until the gradient op
            seg = [(a, e), (re, re + int(rng.integers(0, max(back - re, 0) + 3)))]
            if rng.random() < 0.2:  # rerun twice (a third segment)
                seg.append((back + 5, back + 5 + int(rng.integers(0, 4))))
        elif kind < 0.9 or not calls:
            b = int(rng.integers(fwd, bwd - 1))
            seg = [(b, b + int(rng.integers(0, 30)))]
        else:
            w0 = int(rng.integers(0, 10))
            w1 = w0 + int(rng.integers(0, 5))
            seg = [(c + w0, c + w1) for c in call_at] + [(bwd - c - 10 + w0, bwd - c - 10 + w1) for c in call_at[::-1]]
        starts.append([x for x, _ in seg])
        ends.append([y for _, y in seg])
    return _as_arrays(tiles, sizes, starts, ends)


def _as_arrays(tiles, sizes, starts, ends):
    """The planner's arguments for pieces given as lists (each piece's segment starts and ends),
    visited as the compiler orders them: by tile, first start, then size, largest first."""
    seg_ptr = np.concatenate(([0], np.cumsum([len(x) for x in starts]))).astype(np.int64)
    ss = np.concatenate([np.array(x, np.int64) for x in starts])
    se = np.concatenate([np.array(x, np.int64) for x in ends])
    tile = np.array(tiles, np.int64)
    size = np.array(sizes, np.int64)
    order = np.lexsort((-size, ss[seg_ptr[:-1]], tile))
    return order, tile, size, seg_ptr, ss, se


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("calls", [0, 3])
def test_recomputed_pieces_match_the_plain_scan(seed, calls):
    """Two-segment (and some three-segment) pieces of unequal lengths: each dormant piece is
    judged by its next segment, and blocks are passed by their summaries of those."""
    rng = np.random.default_rng(100 + seed)
    args = recomputed_pieces(rng, 2, int(rng.integers(50, 1200)), calls)
    got = place(*args, 2)
    want = reference_place(*args, 2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@given(st.data())
@settings(max_examples=150, deadline=None)
def test_any_segments_match_the_plain_scan(data):
    """Any sorted disjoint segments per piece (one to four of them, equal lengths or not, shared
    call patterns or not), sizes with ties: the planner's first fit is the plain scan's."""
    n = data.draw(st.integers(1, 90))
    num_tiles = data.draw(st.integers(1, 3))
    horizon = data.draw(st.sampled_from([8, 40, 300]))
    windows = [(0, 3, 9), (1, 2, 7, 15), (0, 20)]  # call start offsets shared by several pieces
    tiles, sizes, starts, ends = [], [], [], []
    for _ in range(n):
        tiles.append(data.draw(st.integers(0, num_tiles - 1)))
        sizes.append(data.draw(st.sampled_from([0, 8, 16, 24, 40, 64])))
        kind = data.draw(st.integers(0, 3))
        if kind == 0:
            seg = [(-1, horizon)]
        elif kind == 1:  # a call pattern: one window shifted by shared offsets
            offs = data.draw(st.sampled_from(windows))
            a = data.draw(st.integers(0, horizon))
            w = data.draw(st.integers(0, 4))
            seg = [(a + o * 5, a + o * 5 + w) for o in offs]
            seg = [s for k, s in enumerate(seg) if k == 0 or s[0] > seg[k - 1][1]]
        else:
            cuts = sorted(data.draw(st.lists(st.integers(0, horizon), min_size=2, max_size=8)))
            seg = [(cuts[k], cuts[k + 1]) for k in range(0, len(cuts) - 1, 2)]
            seg = [s for k, s in enumerate(seg) if k == 0 or s[0] > seg[k - 1][1]]
        starts.append([x for x, _ in seg])
        ends.append([y for _, y in seg])
    args = _as_arrays(tiles, sizes, starts, ends)
    got = place(*args, num_tiles)
    want = reference_place(*args, num_tiles)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


def _repeat_pieces(args, rng):
    """Each piece followed by up to four copies of itself (same tile, size and segments), as a
    variable's pieces on one tile are: the planner places such runs at once."""
    order, tile, size, seg_ptr, ss, se = args
    copies = np.where(rng.random(len(size)) < 0.5, rng.integers(1, 5, len(size)), 0) + 1
    idx = np.repeat(np.arange(len(size)), copies)
    counts = np.diff(seg_ptr)[idx]
    ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    segs = np.concatenate([np.arange(seg_ptr[q], seg_ptr[q + 1]) for q in idx]).astype(np.int64)
    tile, size, ss, se = tile[idx], size[idx], ss[segs], se[segs]
    return np.lexsort((-size, ss[ptr[:-1]], tile)), tile, size, ptr, ss, se


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("recomputed", [False, True])
def test_runs_of_equal_pieces_match_the_plain_scan(seed, recomputed):
    rng = np.random.default_rng(200 + seed)
    make = recomputed_pieces if recomputed else random_pieces
    args = _repeat_pieces(make(rng, 2, int(rng.integers(20, 400)), int(rng.choice([0, 3]))), rng)
    got = place(*args, 2)
    want = reference_place(*args, 2)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])
