"""The cycles of a collective follow its cost model (ipu/collectives.py): ring steps, bytes over
the IPU-Links, syncs across the group's IPUs, reductions; and the profile shows the steps."""
import math

import numpy as np
import pytest

import ipu
from ipu import collectives as col


def _compile(kind, numel, R, group_size=None, op="add", target=None, dtype="float32"):
    target = target or ipu.small_target(4)
    g = ipu.Graph(target)
    n = group_size or R
    src_n = numel
    dst_n = {"all_reduce": numel, "all_gather": numel * n, "reduce_scatter": -(-numel // n), "slice": -(-numel // n)}[kind]
    src = g.add_variable("src", (src_n,), dtype)
    dst = g.add_variable("dst", (dst_n,), dtype)
    g.map_linearly(src)
    g.map_linearly(dst)
    groups = ipu.replica_groups(R, 1, n)
    exe = ipu.compile(g, ipu.CrossReplica(kind, src, dst, groups, op))
    return exe, src, dst, target


@pytest.mark.parametrize("kind", ["all_reduce", "reduce_scatter", "all_gather"])
@pytest.mark.parametrize("n", [2, 4, 8])
@pytest.mark.parametrize("tiles", [4, 64])
def test_ring_steps_and_link_bytes(kind, n, tiles):
    numel = 6000
    exe, src, dst, T = _compile(kind, numel, n, target=ipu.small_target(tiles))
    steps = exe.steps
    hops = 2 * (n - 1) if kind == "all_reduce" else n - 1
    link = [s for s in steps if s.kind == "exchange"]
    syncs = [s for s in steps if s.kind == "sync"]
    reduces = [s for s in steps if s.kind == "compute"]
    assert len(link) == hops and len(syncs) == hops
    assert len(reduces) == (0 if kind == "all_gather" else n - 1)
    full = numel * 4 * (n if kind == "all_gather" else 1)
    chunk = -(-full // n)
    # bytes over the links: 2 (n-1)/n x B for all-reduce, (n-1)/n x B for the others
    assert sum(s.bytes_moved for s in link) == col.link_bytes(kind, n, full) == hops * chunk
    # every hop: sync across the group's IPUs, then half the chunk to each ring neighbour over the
    # two IPU-Links joining them (128 Gbit/s x 0.85 each): the chunk at four links' bandwidth (a
    # ring of two: both halves to the one neighbour, two links)
    sync = math.ceil(15e-9 * T.clock_hz * (1 + n / 4) * 2)
    assert all(s.cycles == sync for s in syncs)
    bpc = (2 if n == 2 else 4) * 128e9 / 8 * 0.85 / T.clock_hz
    link_cycles = T.exchange_overhead_cycles + math.ceil(chunk / bpc)
    # ... or each tile's share of the chunk through its exchange port (4 B/cycle), if slower
    share = -(-np.bincount(src.tile_of, minlength=T.num_tiles) * 4 // (1 if kind == "all_gather" else n))
    port = T.exchange_overhead_cycles + -(-share.max() // 4)
    assert all(s.cycles == max(link_cycles, port) for s in link)
    if T.num_tiles >= 64:
        assert link_cycles > port  # many tiles: the IPU-Links are the bottleneck
    total = sum(s.cycles for s in steps)
    assert total == col.model_cycles(kind, "add", n, np.bincount(src.tile_of, minlength=T.num_tiles) * 4,
                                     np.bincount(dst.tile_of, minlength=T.num_tiles) * 4, src.numel * 4, dst.numel * 4, 4,
                                     True, T)


def test_all_reduce_grows_like_the_ring():
    """For a large tensor the all-reduce time approaches 2 (n-1)/n x B / ring bandwidth."""
    T = ipu.small_target(64)
    numel = 1 << 18
    B = numel * 4
    for n in (2, 4, 8, 16):
        exe, *_ = _compile("all_reduce", numel, n, target=T)
        link = sum(s.cycles for s in exe.steps if s.kind == "exchange")
        ideal = 2 * (n - 1) / n * B / col.ring_bytes_per_cycle(T, n)
        assert ideal <= link <= ideal * 1.05 + 2 * (n - 1) * (T.exchange_overhead_cycles + 1)


def test_busy_tile_limits_a_step():
    """A tensor on one tile: its exchange port (4 B/cycle) is slower than two IPU-Links."""
    g = ipu.Graph(ipu.small_target(4))
    src = g.add_variable("src", (4096,), "float32")
    dst = g.add_variable("dst", (4096,), "float32")
    g.set_tile_mapping(src, 0)
    g.set_tile_mapping(dst, 0)
    exe = ipu.compile(g, ipu.CrossReplica("all_reduce", src, dst, ipu.replica_groups(2), "add"))
    x = [s for s in exe.steps if s.kind == "exchange"][0]
    assert x.cycles == 30 + 4096 * 4 // 2 // 4 and x.tile_cycles[0] == x.cycles


def test_groups_of_one_and_slices_are_local():
    exe, *_ = _compile("all_reduce", 100, 4, group_size=1)
    assert [s.kind for s in exe.steps] == ["exchange"]
    exe, *_ = _compile("slice", 100, 4)
    assert [s.kind for s in exe.steps] == ["exchange"] and exe.steps[0].bytes_moved == 25 * 4


def test_collective_steps_in_the_engine_log_and_results():
    exe, src, dst, T = _compile("all_reduce", 64, 4)
    e = ipu.Engine(exe, replicas=4)
    for r in range(4):
        e.write_tensor(src, np.full(64, r + 1, np.float32), replica=r)
    cycles = e.run()
    ids, starts = e.executed_steps()
    assert [exe.steps[i].kind for i in ids] == [s.kind for s in exe.steps]
    assert cycles == sum(s.cycles for s in exe.steps)
    assert all("all_reduce" in exe.steps[i].name for i in ids)
    for r in range(4):
        np.testing.assert_array_equal(e.read_tensor(dst, r), np.full(64, 10, np.float32))


def test_engine_checks_replicas_and_branches():
    exe, src, dst, T = _compile("all_reduce", 8, 4)
    with pytest.raises(ipu.IpuError, match="cover 4 replicas but the engine runs 2"):
        ipu.Engine(exe, replicas=2).run()
    # a collective inside a branch some replicas of the group skip would never complete
    g = ipu.Graph(ipu.small_target(4))
    c = g.add_variable("c", (1,), "int32")
    x = g.add_variable("x", (4,), "float32")
    y = g.add_variable("y", (4,), "float32")
    for v in (c, x, y):
        g.map_linearly(v)
    exe = ipu.compile(g, ipu.If(c, ipu.CrossReplica("all_reduce", x, y, ipu.replica_groups(2))))
    e = ipu.Engine(exe, replicas=2)
    e.write_tensor(c, [1], replica=0)
    with pytest.raises(ipu.IpuError, match="another branch"):
        e.run()


def test_cross_replica_validation():
    g = ipu.Graph(ipu.small_target(4))
    a = g.add_variable("a", (4,), "float32")
    b = g.add_variable("b", (6,), "float32")
    g.map_linearly(a)
    g.map_linearly(b)
    with pytest.raises(ipu.CompileError, match="all_gather"):
        ipu.compile(g, ipu.CrossReplica("all_gather", a, b, ipu.replica_groups(2)))
    with pytest.raises(ipu.CompileError, match="same size"):
        ipu.CrossReplica("all_reduce", a, a, [[0, 1], [2]])
    with pytest.raises(ipu.CompileError, match="cover"):
        ipu.CrossReplica("all_reduce", a, a, [[0, 2]])
    with pytest.raises(ValueError):
        ipu.CrossReplica("broadcast", a, a, [[0]])
    assert ipu.replica_groups(8, 2, 2) == [[0, 2], [1, 3], [4, 6], [5, 7]]
    assert ipu.groups_from_assignment([0, 1, 0, 1]) == [[0, 2], [1, 3]]


def test_profile_shows_the_collective_steps(tmp_path, monkeypatch):
    """A profile of a replicated run lists the all-reduce's ring steps (sync, IPU-Link exchange,
    reduce) under the popxl op, with their cycles."""
    import json

    import popxl
    import popxl.ops as ops

    monkeypatch.setenv("IPU_SIM_PROFILE", str(tmp_path))
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        v = popxl.variable(np.ones(64, np.float32), name="v")
        ops.collectives.replicated_all_reduce_(v)
    with popxl.Session(ir, "ipu_model") as s:
        s.run()
    doc = json.loads((tmp_path / "profile.json").read_text())
    steps = [st for st in doc["steps"] if st.get("op_type") == "replicated_all_reduce"]
    kinds = [st["kind"] for st in steps]
    assert kinds.count("exchange") == 6 and kinds.count("sync") == 6 and kinds.count("compute") == 3
    assert all(st["cycles"] > 0 and st["executions"] == 1 for st in steps)
    assert any("reduce_scatter 1/3" in st["name"] for st in steps)
    assert any("all_gather 3/3" in st["name"] for st in steps)
    assert sum(st["cycles"] for st in steps) == sum(x.cycles for x in s.executable.steps
                                                    if x.name.startswith("replicated_all_reduce/"))


def test_two_ipus_per_replica_drive_two_rings():
    """A tensor spread over both IPUs of a replica moves over both IPUs' links: half the link time
    of the same tensor on one IPU; the syncs span replicas x IPUs."""
    T = ipu.small_target(64).with_ipus(2)
    numel = 1 << 16
    out = {}
    for spread in (False, True):
        g = ipu.Graph(T)
        src = g.add_variable("src", (numel,), "float32")
        dst = g.add_variable("dst", (numel,), "float32")
        tiles = range(T.num_tiles) if spread else range(T.tiles_per_ipu)
        g.map_linearly(src, tiles=tiles)
        g.map_linearly(dst, tiles=tiles)
        exe = ipu.compile(g, ipu.CrossReplica("all_reduce", src, dst, ipu.replica_groups(4)))
        out[spread] = [s for s in exe.steps if s.kind == "exchange"][0]
        assert [s.name for s in exe.steps if s.kind == "sync"][0].endswith("sync (8 IPUs)")
    chunk = numel * 4 // 4
    assert out[False].cycles == T.exchange_overhead_cycles + math.ceil(chunk / col.ring_bytes_per_cycle(T))
    assert out[True].cycles == T.exchange_overhead_cycles + math.ceil(chunk / 2 / col.ring_bytes_per_cycle(T))
