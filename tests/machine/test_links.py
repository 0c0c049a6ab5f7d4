"""The IPU-Link wiring between the IPUs of a replica (ipu/links.py) and what a cross-IPU copy costs."""
import math

import numpy as np
import pytest

import ipu
from ipu import costs, links


def test_ladder_neighbours_of_an_ipu_m2000():
    t = ipu.GC200.with_ipus(4)
    share = 2.0  # every neighbour pair: one cable of 2 IPU-Links (gc-iputraffictest's rung pair)
    assert links.neighbours(t, 0) == {1: share, 2: share}
    assert links.neighbours(t, 3) == {1: share, 2: share}
    assert links.links_between(t, 0, 3) == 0
    assert links.route(t, 0, 3) in ([(0, 1), (1, 3)], [(0, 2), (2, 3)])
    # 16 IPUs: the rails close into rings, every IPU has three neighbours
    t16 = ipu.GC200.with_ipus(16)
    assert sorted(links.neighbours(t16, 0)) == [1, 2, 14]
    assert len(links.route(t16, 0, 8)) == 4


def test_c600_cards_in_a_ring_of_two_link_cables():
    t = ipu.C600.with_ipus(8)
    assert links.neighbours(t, 0) == {1: 2.0, 7: 2.0}
    assert len(links.route(t, 0, 4)) == 4


def _copy_cycles(t, src_tiles, dst_tiles, nbytes):
    src = np.asarray(src_tiles, np.int64)
    dst = np.asarray(dst_tiles, np.int64)
    nb = np.asarray(nbytes, np.int64)
    tile, extra = costs.exchange_tile_cycles(src, dst, np.arange(src.size, dtype=np.int64) * 1 << 20, nb, t)
    return int(tile.max()) + extra


def test_cross_ipu_copy_takes_the_slower_of_tiles_and_links():
    t = ipu.GC200.with_ipus(2)
    T = t.tiles_per_ipu
    per_tile = 64 * 1024
    src = np.arange(T)
    nbytes = np.full(T, per_tile)
    total = _copy_cycles(t, src, src + T, nbytes)
    link = math.ceil(T * per_tile / (2 * t.ipu_link_bytes_per_cycle())) + t.exchange_overhead_cycles
    tiles = per_tile // 4 + t.exchange_overhead_cycles
    assert link > tiles
    assert total == link + t.inter_ipu_sync_cycles()  # overlapped: max, not sum
    # one IPU pair's bandwidth: 2 links x 16 GB/s x 0.85 = 27.2 GB/s (measured: 26.5)
    seconds = (total - t.inter_ipu_sync_cycles()) / t.clock_hz
    assert T * per_tile / seconds == pytest.approx(2 * 16e9 * 0.85, rel=0.01)


def test_traffic_through_an_intermediate_ipu_shares_its_links():
    t = ipu.GC200.with_ipus(4)
    T = t.tiles_per_ipu
    src = np.arange(T)
    nb = np.full(T, 64 * 1024)
    one = _copy_cycles(t, src, src + T, nb)          # IPU 0 -> 1, neighbours
    far = _copy_cycles(t, src, src + 3 * T, nb)      # IPU 0 -> 3: two hops at the same bundle rate
    assert far == one
    # half of IPU 0's tiles to IPU 1, half to IPU 3: the route to 3 either shares the 0-1 bundle
    # (then it carries everything) or leaves over 0-2 (then each bundle carries half)
    h = T // 2
    split = _copy_cycles(t, src, np.where(src < h, src + T, src + 3 * T), nb)
    if links.route(t, 0, 3)[0] == (0, 1):
        assert split == one
    else:
        assert split < 0.6 * one


def test_ring_order_crosses_only_neighbour_links():
    for t in (ipu.GC200.with_ipus(16), ipu.GC200.with_ipus(4), ipu.C600.with_ipus(8)):
        order = links.ring_order(t)
        assert sorted(order) == list(range(t.ipus))
        for a, b in zip(order, order[1:] + order[:1]):
            assert links.links_between(t, a, b) == 2.0
    assert links.ring_order(ipu.GC200.with_ipus(8)) == [0, 2, 4, 6, 7, 5, 3, 1]


def test_a_ring_hop_and_a_copy_price_the_same_links():
    """One link model: a collective's ring hop between the two IPUs of an IPU-M2000 rung costs
    what a copy of the same bytes between them costs on the links (a ring of two sends both halves
    of the chunk to its one neighbour)."""
    from ipu import collectives as col

    t = ipu.GC200.with_ipus(2)
    chunk = 1 << 20
    hop = col.ring_link_cycles(ipu.GC200, [[0, 1]], [chunk])
    copy = links.link_phase_cycles([0], [1], [chunk], t)
    assert hop == copy == math.ceil(chunk / (2 * t.ipu_link_bytes_per_cycle()))
    # four replicas on an IPU-M2000: the ring 0-2-3-1 uses neighbour links only, half a chunk each
    # way on each: a quarter of the copy's time for the same chunk... per direction, half
    four = col.ring_link_cycles(ipu.GC200, [[0, 1, 2, 3]], [chunk])
    assert four == math.ceil(chunk / 2 / (2 * t.ipu_link_bytes_per_cycle()))
