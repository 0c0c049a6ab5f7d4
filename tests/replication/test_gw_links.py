"""Collectives whose groups leave an IPU-POD64 rack cross GW-Links (ipu/collectives.py): the ring
edges between racks go through the IPU-Gateways' 100 Gbit/s ports, shared by the rings crossing
at each IPU-M2000. Groups within a rack cost what they always did."""
import math

import numpy as np
import pytest

import ipu
from ipu import collectives as col

T = ipu.small_target(64)
NUMEL = 64 * 1024  # float32, 256 KiB: the links, not the tiles' exchange ports, set the pace


def _exchange_cycles(groups, target=T, kind="all_reduce"):
    n = len(groups[0])
    tb = np.full(target.num_tiles, NUMEL * 4 // target.num_tiles, np.int64)
    steps = col.plan(kind, "add", n, tb, tb, NUMEL * 4, NUMEL * 4, 4, True, target, groups=groups)
    x = [s for s in steps if s.kind == "exchange"]
    return x[0].cycles, x[0].name, len(x)


def test_groups_inside_a_rack_use_ipu_links_only():
    groups = ipu.replica_groups(64)  # one group of the 64 IPUs of one IPU-POD64
    cyc, name, _ = _exchange_cycles(groups)
    assert "GW-Links" not in name
    assert cyc == _exchange_cycles(groups)[0] == col.plan("all_reduce", "add", 64, *[np.full(64, 4096, np.int64)] * 2,
                                                         NUMEL * 4, NUMEL * 4, 4, True, T)[1].cycles
    assert not col.spans_racks(groups, 1) and col.gw_port_load(groups, 1, [1000]) == 0


def test_one_ring_over_two_racks():
    """128 replicas in one ring: two edges cross (63 -> 64, 127 -> 0); each crossing port carries half a
    chunk, at 100 Gbit/s x 0.85 against the IPU-Links' half chunk each way over 2 x 128 Gbit/s x 0.85."""
    groups = ipu.replica_groups(128)
    cyc, name, hops = _exchange_cycles(groups)
    assert "IPU-Links + GW-Links" in name and hops == 2 * 127
    chunk = -(-NUMEL * 4 // 128)
    gw = 100e9 / 8 * 0.85 / T.clock_hz
    ipu_links = 4 * 128e9 / 8 * 0.85 / T.clock_hz
    assert col.gw_port_load(groups, 1, [chunk]) == chunk / 2
    assert cyc == T.exchange_overhead_cycles + max(math.ceil(chunk / 2 / gw), math.ceil(chunk / ipu_links))
    assert math.ceil(chunk / 2 / gw) > math.ceil(chunk / ipu_links)  # 100 < 128 Gbit/s: the GW-Links are slower


def test_rings_sharing_a_gateway():
    """Stride-64 pairs {r, r + 64}: every ring crosses, and the 4 rings leaving one IPU-M2000 share
    its ports: 4 half-chunks per port each way."""
    groups = ipu.replica_groups(128, stride=64, group_size=2)
    cyc, name, _ = _exchange_cycles(groups)
    chunk = -(-NUMEL * 4 // 2)
    assert col.gw_port_load(groups, 1, [chunk]) == 4 * chunk / 2
    gw = 100e9 / 8 * 0.85 / T.clock_hz
    assert cyc == T.exchange_overhead_cycles + math.ceil(2 * chunk / gw)


def test_several_ipus_per_replica():
    """With 2 IPUs per replica, 64 replicas fill two racks; each IPU's part of the tensor rides its own
    ring, so the crossing ports carry each IPU's part."""
    t2 = ipu.small_target(64).with_ipus(2)
    groups = ipu.replica_groups(64)
    assert col.spans_racks(groups, 2) and not col.spans_racks(ipu.replica_groups(32), 2)
    share = [1000, 3000]
    # edges 31 -> 32 and 63 -> 0 cross; IPU i of replica 31 is IPU 62 + i (M2000 15), of 63 is 126 + i (M2000 31)
    assert col.gw_port_load(groups, 2, share) == (1000 + 3000) / 2
    cyc, name, _ = _exchange_cycles(groups, target=t2)
    assert "GW-Links" in name and cyc > _exchange_cycles(ipu.replica_groups(32), target=t2)[0]


@pytest.mark.parametrize("kind", ["all_reduce", "reduce_scatter", "all_gather"])
def test_compiled_collective_over_racks(kind):
    """A CrossReplica compiled for 128 replicas names and prices its GW-Link hops (no engine needed)."""
    g = ipu.Graph(T)
    n = 128
    src_n, dst_n = {"all_reduce": (NUMEL, NUMEL), "reduce_scatter": (NUMEL, NUMEL // n),
                    "all_gather": (NUMEL // n, NUMEL)}[kind]
    src, dst = g.add_variable("src", (src_n,), "float32"), g.add_variable("dst", (dst_n,), "float32")
    g.map_linearly(src)
    g.map_linearly(dst)
    exe = ipu.compile(g, ipu.CrossReplica(kind, src, dst, ipu.replica_groups(n), "add"))
    x = [s for s in exe.steps if s.kind == "exchange"]
    assert x and all("GW-Links" in s.name for s in x)
