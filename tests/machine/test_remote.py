"""Streaming memory on the machine: remote buffers, RemoteLoad / RemoteStore (int and tensor
offsets, replicas), merged transfers, the transfer cost model, the 128 MiB limit, and code loading
(CodeLoad): resident vs loaded vertex code and PopXL's liveness rules."""
import dataclasses

import numpy as np
import pytest

import ipu
from ipu import costs


def _graph(tiles=4, **kw):
    t = ipu.small_target(tiles)
    if kw:
        t = dataclasses.replace(t, **kw)
    return ipu.Graph(t)


# ------------------------------------------------------------------------------------------------
# remote buffers


def test_round_trip_at_int_offsets():
    g = _graph()
    rb = g.add_remote_buffer("rb", (3, 5), "float32", entries=4)
    x = g.add_variable("x", (3, 5), "float32")
    g.map_linearly(x)
    prog = ipu.Sequence(*[ipu.Sequence(ipu.RemoteLoad(rb, i, x), ipu.RemoteStore(x, rb, 3 - i)) for i in (0, 1)])
    e = ipu.Engine(ipu.compile(g, prog))
    data = np.arange(4 * 15, dtype=np.float32).reshape(4, 3, 5)
    e.write_remote(rb, data)
    e.run()
    got = e.read_remote("rb")
    np.testing.assert_array_equal(got[3], data[0])
    np.testing.assert_array_equal(got[2], data[1])
    np.testing.assert_array_equal(got[:2], data[:2])
    np.testing.assert_array_equal(e.read_tensor(x), data[1])


def test_tensor_offsets_are_read_when_the_program_runs():
    g = _graph()
    rb = g.add_remote_buffer("rb", (6,), "int32", entries=5)
    x = g.add_variable("x", (6,), "int32")
    g.map_linearly(x)
    src = g.add_variable("src", (), "uint32")
    dst = g.add_variable("dst", (1,), "int32")
    g.set_tile_mapping(src, 3)
    g.set_tile_mapping(dst, 2)
    exe = ipu.compile(g, ipu.Sequence(ipu.RemoteLoad(rb, src, x), ipu.RemoteStore(x, rb, dst)))
    e = ipu.Engine(exe)
    data = np.arange(30, dtype=np.int32).reshape(5, 6)
    e.write_remote(rb, data)
    for s, d in [(0, 4), (2, 1), (4, 0)]:
        e.write_tensor(src, np.uint32(s))
        e.write_tensor(dst, [d])
        e.run()
        np.testing.assert_array_equal(e.read_remote(rb, d), data[s])
        data[d] = data[s]
    np.testing.assert_array_equal(e.read_remote(rb), data)


def test_an_offset_outside_the_buffer_is_an_error():
    g = _graph()
    rb = g.add_remote_buffer("rb", (2,), "float32", entries=2)
    x = g.add_variable("x", (2,), "float32")
    g.set_tile_mapping(x, 0)
    with pytest.raises(ipu.CompileError, match="outside remote buffer"):
        ipu.compile(g, ipu.RemoteLoad(rb, 2, x))
    off = g.add_variable("off", (), "int32")
    g.set_tile_mapping(off, 1)
    e = ipu.Engine(ipu.compile(g, ipu.RemoteLoad(rb, off, x)))
    e.write_tensor(off, np.int32(5))
    with pytest.raises(ipu.IpuError, match="offset 5 is outside"):
        e.run()
    with pytest.raises(ValueError):
        ipu.RemoteLoad(rb, -1, x)


def test_replicas_have_their_own_streaming_memory():
    g = _graph(2)
    rb = g.add_remote_buffer("rb", (4,), "float32", entries=3)
    x = g.add_variable("x", (4,), "float32")
    g.map_linearly(x)
    off = g.add_variable("off", (), "int32")
    g.set_tile_mapping(off, 0)
    one = g.add_constant("one", np.ones(4, np.float32), tile=0)
    tmp = g.add_variable("tmp", (4,), "float32")
    g.set_tile_mapping(tmp, 0)
    cs = g.add_compute_set("inc")
    g.add_vertex(cs, "ScaledAdd", 0, data=tmp, deltas=one, a=1.0, b=1.0)
    prog = ipu.Sequence(ipu.RemoteLoad(rb, off, x), ipu.Copy(x, tmp), ipu.Execute(cs), ipu.Copy(tmp, x),
                        ipu.RemoteStore(x, rb, off))
    e = ipu.Engine(ipu.compile(g, prog), replicas=2)
    for r in range(2):
        e.write_remote(rb, np.full((3, 4), 10 * (r + 1), np.float32), replica=r)
        e.write_tensor(off, np.int32(r + 1), replica=r)
    e.run()
    np.testing.assert_array_equal(e.read_remote(rb, replica=0)[:, 0], [10, 11, 10])
    np.testing.assert_array_equal(e.read_remote(rb, replica=1)[:, 0], [20, 20, 21])


def test_entries_are_allocated_lazily_in_host_memory():
    g = _graph()
    rb = g.add_remote_buffer("big", (1000,), "float32", entries=10_000)  # 40 MB if allocated up front
    x = g.add_variable("x", (1000,), "float32")
    g.map_linearly(x)
    exe = ipu.compile(g, ipu.RemoteStore(x, rb, 7))
    e = ipu.Engine(exe)
    assert exe.total_bytes < 10_000  # streaming memory is not tile memory
    e.run()
    assert e.streaming.bytes_allocated == 4000


# ------------------------------------------------------------------------------------------------
# costs


def _expected_transfer_cycles(target, tile_bytes):
    tile_bytes = np.asarray(tile_bytes)
    tiles = (np.ceil(tile_bytes / target.exchange_bytes_per_cycle) + (tile_bytes > 0) * target.exchange_overhead_cycles)
    link = int(np.ceil(tile_bytes.sum() / target.remote_bytes_per_cycle())) + target.remote_latency_cycles()
    return max(int(tiles.max()), link)


@pytest.mark.parametrize("n", [10, 1000, 100_000])
def test_transfer_cycles_follow_the_model(n):
    g = _graph()
    rb = g.add_remote_buffer("rb", (n,), "float32")
    x = g.add_variable("x", (n,), "float32")
    g.map_linearly(x)
    exe = ipu.compile(g, [ipu.RemoteLoad(rb, 0, x), ipu.RemoteStore(x, rb, 0)])
    t = g.target
    per_tile = np.bincount(x.tile_of, minlength=t.num_tiles) * 4
    want = _expected_transfer_cycles(t, per_tile)
    for k, kind in enumerate(("remote_load", "remote_store")):
        steps = [exe.steps[i] for i in _executed(exe, k)]
        assert [s.kind for s in steps] == ["sync", kind]
        assert steps[0].cycles == costs.sync_cycles(t)
        assert steps[1].cycles == want
        assert steps[1].bytes_moved == 4 * n
        np.testing.assert_array_equal(steps[1].tile_cycles[per_tile > 0],
                                      np.ceil(per_tile[per_tile > 0] / 4) + t.exchange_overhead_cycles)


def _executed(exe, program=0):
    e = ipu.Engine(exe)
    e.run(program)
    return list(e.executed_steps()[0])


def test_gateway_figures_name_their_sources():
    t = ipu.GC200
    assert t.remote_bytes_per_second == pytest.approx(128e9 / 8 * 0.85)  # PCIe Gen4 x8 x 0.85
    assert t.remote_latency_cycles() == 1330
    assert t.max_transfer_bytes == 128 * 2**20


def test_transfers_over_128_mib_are_refused():
    g = _graph()
    with pytest.raises(ipu.CompileError, match=r"134,217,732 bytes.*128 MiB"):
        g.add_remote_buffer("big", (2**25 + 1,), "float32")
    g.add_remote_buffer("fits", (2**25,), "float32")  # exactly 128 MiB is allowed
    small = _graph(max_transfer_bytes=64)
    with pytest.raises(ipu.CompileError, match="128 bytes in one transfer"):
        small.add_remote_buffer("rb", (32,), "float32")


def test_merged_transfers_share_one_sync_and_one_phase():
    g = _graph()
    rb = g.add_remote_buffer("rb", (100,), "float32", entries=2)
    x = g.add_variable("x", (100,), "float32")
    y = g.add_variable("y", (100,), "float32")
    g.map_linearly(x)
    g.map_linearly(y)
    s = g.add_host_to_device_stream("in", (100,), "float32")
    separate = ipu.Sequence(ipu.RemoteLoad(rb, 0, x), ipu.RemoteLoad(rb, 1, y))
    merged = ipu.MultiExchange(ipu.RemoteLoad(rb, 0, x), ipu.RemoteLoad(rb, 1, y))
    exe = ipu.compile(g, [separate, merged, ipu.MultiExchange(ipu.HostToDevice(s, x), ipu.RemoteStore(y, rb, 0))])
    e = ipu.Engine(exe)
    data = np.arange(200, dtype=np.float32).reshape(2, 100)
    e.write_remote(rb, data)
    c_sep = e.run(0)
    c_merged = e.run(1)
    np.testing.assert_array_equal(e.read_tensor(x), data[0])
    np.testing.assert_array_equal(e.read_tensor(y), data[1])
    ids, _ = e.executed_steps()
    kinds = [exe.steps[i].kind for i in ids]
    assert kinds == ["sync", "remote_load", "sync", "remote_load", "sync", "remote_load"]
    assert c_merged < c_sep
    t = g.target
    per_tile = (np.bincount(x.tile_of, minlength=t.num_tiles) + np.bincount(y.tile_of, minlength=t.num_tiles)) * 4
    assert c_merged == costs.sync_cycles(t) + _expected_transfer_cycles(t, per_tile)
    e.connect_stream("in", np.full(100, 7, np.float32))
    e.run(2)
    np.testing.assert_array_equal(e.read_tensor(x), np.full(100, 7, np.float32))
    np.testing.assert_array_equal(e.read_remote(rb, 0), data[1])


# ------------------------------------------------------------------------------------------------
# code loading

CODE = ipu.get_codelet("ScaledAdd").code_bytes(None)  # vertex code per (codelet, types) on a tile


def _code_graph(tiles=4):
    """Functions with their own vertex code: f uses float32 ScaledAdd on tile 0, h half ScaledAdd
    on tile 0, k int32 ScaledAdd on tile 1; main runs float32 ScaledAdd on tile 2."""
    g = _graph(tiles)
    out = {}
    for name, dt, tile in (("f", "float32", 0), ("h", "float16", 0), ("k", "int32", 1), ("main", "float32", 2)):
        v = g.add_variable(f"v_{name}", (8,), dt)
        g.set_tile_mapping(v, tile)
        d = g.add_constant(f"d_{name}", np.ones(8), dt, tile=tile)
        cs = g.add_compute_set(f"cs_{name}")
        g.add_vertex(cs, "ScaledAdd", tile, data=v, deltas=d, a=1.0, b=1.0)
        out[name] = ipu.Execute(cs) if name == "main" else g.add_function(ipu.Execute(cs), name)
    return g, out


def _positions(exe):
    """Timeline position of every leaf of program 0 in order: (node, pos)."""
    from ipu.timeline import timeline_steps

    return timeline_steps(exe)


def _intervals(exe, name):
    return exe.code_liveness.functions[name]["intervals"]


def test_resident_code_is_unchanged_without_code_loads():
    g, fn = _code_graph()
    exe = ipu.compile(g, ipu.Sequence(ipu.Call(fn["f"]), ipu.Call(fn["h"]), fn["main"]))
    assert exe.code_liveness is None
    assert "code_loaded" not in exe.plan.categories
    assert list(exe.plan.categories["vertex_code"]) == [2 * CODE, 0, CODE, 0]


def test_a_load_makes_code_live_until_the_last_call():
    g, fn = _code_graph()
    f = fn["f"]
    prog = ipu.Sequence(fn["main"], ipu.CodeLoad(f), fn["main"], ipu.Call(f), fn["main"], ipu.Call(f), fn["main"])
    exe = ipu.compile(g, prog)
    # positions: main 0, load 1, main 2, f 3, main 4, f 5, main 6
    assert _intervals(exe, "f") == [(1, 5)]
    cl = exe.code_liveness
    assert list(cl.live) == [0, CODE, CODE, CODE, CODE, CODE, 0]
    assert list(exe.plan.categories["vertex_code"]) == [0, 0, CODE, 0]
    assert list(exe.plan.categories["code_loaded"]) == [CODE, 0, 0, 0]
    assert list(exe.liveness) == list(cl.live)  # loaded code is not-always-live memory


def test_each_load_starts_a_new_interval_and_the_code_is_dead_between():
    g, fn = _code_graph()
    f, m = fn["f"], fn["main"]
    prog = ipu.Sequence(ipu.CodeLoad(f), ipu.Call(f), m, m, ipu.CodeLoad(f), ipu.Call(f), m)
    exe = ipu.compile(g, prog)
    assert _intervals(exe, "f") == [(0, 1), (4, 5)]
    assert list(exe.code_liveness.live) == [CODE, CODE, 0, 0, CODE, CODE, 0]


def test_a_call_before_any_load_means_live_from_the_start():
    g, fn = _code_graph()
    f, m = fn["f"], fn["main"]
    exe = ipu.compile(g, ipu.Sequence(m, ipu.Call(f), m, ipu.CodeLoad(f), ipu.Call(f), m))
    assert _intervals(exe, "f") == [(0, 1), (3, 4)]


def test_consecutive_loads_are_one_step_one_sync_one_phase():
    g, fn = _code_graph()
    f, k = fn["f"], fn["k"]
    exe = ipu.compile(g, ipu.Sequence(ipu.CodeLoad(f, k), ipu.Call(f), ipu.Call(k)))
    loads = [s for s in exe.steps if s.kind == "code_load"]
    assert len(loads) == 1
    t = g.target
    tile_bytes = np.array([CODE, CODE, 0, 0])
    assert loads[0].bytes_moved == 2 * CODE
    assert loads[0].cycles == costs.sync_cycles(t) + _expected_transfer_cycles(t, tile_bytes)
    assert exe.code_liveness.load_steps == [loads[0].id]


def test_code_load_cycles_follow_the_model_on_the_busiest_tile():
    g, fn = _code_graph()
    exe = ipu.compile(g, ipu.Sequence(ipu.CodeLoad(fn["f"]), ipu.Call(fn["f"]), ipu.CodeLoad(fn["h"]),
                                      ipu.Call(fn["h"])))
    t = g.target
    for s in exe.steps:
        if s.kind == "code_load":
            tile = (np.ceil(CODE / t.exchange_bytes_per_cycle) + t.exchange_overhead_cycles)
            link = int(np.ceil(CODE / t.remote_bytes_per_cycle())) + t.remote_latency_cycles()
            assert s.cycles == costs.sync_cycles(t) + max(tile, link)
            assert s.tile_cycles[0] == tile and s.tile_cycles[1:].sum() == 0


def test_peak_code_memory_is_lower_with_loading_than_resident():
    g, fn = _code_graph()
    f, h = fn["f"], fn["h"]
    body = [ipu.CodeLoad(f), ipu.Call(f), ipu.CodeLoad(h), ipu.Call(h)]
    exe = ipu.compile(g, ipu.Sequence(*body, *body))
    cl = exe.code_liveness
    assert cl.all_resident[0] == 2 * CODE  # f's and h's code both on tile 0 when resident
    assert cl.loaded_peak[0] == CODE  # never both live when loaded
    assert cl.saved[0] == CODE
    assert cl.peak_tile_bytes_loaded < cl.peak_tile_bytes_resident
    resident = ipu.compile(g, ipu.Sequence(ipu.Call(f), ipu.Call(h), ipu.Call(f), ipu.Call(h)))
    assert resident.plan.tile_total()[0] - exe.plan.tile_total()[0] >= CODE - 64  # control code differs a little


def test_code_shared_with_resident_code_stays_resident():
    g, fn = _code_graph()
    f = fn["f"]
    v = g.add_variable("v2", (8,), "float32")
    g.set_tile_mapping(v, 0)
    cs = g.add_compute_set("resident_same_codelet")
    g.add_vertex(cs, "ScaledAdd", 0, data=v, deltas=v, a=1.0, b=1.0)
    exe = ipu.compile(g, ipu.Sequence(ipu.Execute(cs), ipu.CodeLoad(f), ipu.Call(f)))
    assert exe.code_liveness.functions["f"]["total"] == 0  # float32 ScaledAdd already lives on tile 0
    assert exe.plan.categories["vertex_code"][0] == CODE


def test_after_a_branch_code_counts_as_loaded_only_if_every_branch_loaded_it():
    g, fn = _code_graph()
    f, m = fn["f"], fn["main"]
    c = g.add_variable("c", (), "int32")
    g.set_tile_mapping(c, 3)
    # positions: main 0, branch 1, [then: load 2], [else: main 3], main 4, f 5
    one = ipu.compile(g, ipu.Sequence(m, ipu.If(c, ipu.CodeLoad(f), m), m, ipu.Call(f)))
    assert _intervals(one, "f") == [(0, 5)]  # as if no load happened: live from the start
    # positions: main 0, branch 1, [then: load 2], [else: main 3, load 4], main 5, f 6
    both = ipu.compile(g, ipu.Sequence(m, ipu.If(c, ipu.CodeLoad(f), ipu.Sequence(m, ipu.CodeLoad(f))), m,
                                       ipu.Call(f)))
    assert _intervals(both, "f") == [(2, 6)]
    # an earlier load before the branch: the code stays live from that load
    # positions: load 0, f 1, branch 2, [then: load 3], [else: -], main 4, f 5
    earlier = ipu.compile(g, ipu.Sequence(ipu.CodeLoad(f), ipu.Call(f), ipu.If(c, ipu.CodeLoad(f)), m, ipu.Call(f)))
    assert _intervals(earlier, "f") == [(0, 1), (0, 5)]
    # a Switch with a default that does not load
    sw = ipu.compile(g, ipu.Sequence(ipu.Switch(c, {0: ipu.CodeLoad(f), 1: ipu.CodeLoad(f)}, default=m),
                                     ipu.Call(f)))
    assert _intervals(sw, "f") == [(0, 4)]
    sw_all = ipu.compile(g, ipu.Sequence(ipu.Switch(c, {0: ipu.CodeLoad(f)}, default=ipu.CodeLoad(f)), ipu.Call(f)))
    assert _intervals(sw_all, "f") == [(1, 3)]


def test_a_function_can_load_another_function():
    g, fn = _code_graph()
    f, m = fn["f"], fn["main"]
    loader = g.add_function(ipu.Sequence(m, ipu.CodeLoad(f)), "loader")
    # positions: main 0, [loader: main 1, load f 2], f 3
    exe = ipu.compile(g, ipu.Sequence(m, ipu.Call(loader), ipu.Call(f)))
    assert _intervals(exe, "f") == [(2, 3)]
    # a loader that is itself loaded
    exe2 = ipu.compile(g, ipu.Sequence(ipu.CodeLoad(loader), ipu.Call(loader), m, ipu.Call(f)))
    assert _intervals(exe2, "loader") == [(0, 2)]
    assert _intervals(exe2, "f") == [(2, 4)]
    selfish = g.add_function(ipu.Sequence(m), "selfish")
    selfish.program.add(ipu.CodeLoad(selfish))
    with pytest.raises(ipu.CompileError, match="loads its own code"):
        ipu.compile(g, ipu.Call(selfish))


def test_a_load_in_a_loop_used_by_the_next_iteration_keeps_the_code_live_over_the_loop():
    g, fn = _code_graph()
    f, m = fn["f"], fn["main"]
    # positions: load 0, [loop: f 1, main 2, load 3, main 4], main 5
    exe = ipu.compile(g, ipu.Sequence(ipu.CodeLoad(f), ipu.Repeat(3, ipu.Sequence(ipu.Call(f), m, ipu.CodeLoad(f), m)),
                                      m))
    live = exe.code_liveness.live
    assert all(live[1:5] == CODE)
    # load then call inside the body: dead between iterations' calls and loads
    exe2 = ipu.compile(g, ipu.Repeat(3, ipu.Sequence(m, ipu.CodeLoad(f), ipu.Call(f), m)))
    assert list(exe2.code_liveness.live) == [0, CODE, CODE, 0]


def test_code_load_steps_run_and_keep_results():
    g, fn = _code_graph()
    f = fn["f"]
    e = ipu.Engine(ipu.compile(g, ipu.Sequence(ipu.CodeLoad(f), ipu.Call(f), ipu.CodeLoad(f), ipu.Call(f))))
    v = e.exe.variable("v_f")
    e.write_tensor(v, np.zeros(8, np.float32))
    e.run()
    np.testing.assert_array_equal(e.read_tensor(v), np.full(8, 2, np.float32))
    kinds = [e.exe.steps[i].kind for i in e.executed_steps()[0]]
    assert kinds.count("code_load") == 2
