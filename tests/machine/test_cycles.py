"""Cycles of hand-checkable programs equal the cost models, and runs are deterministic."""
import numpy as np
import pytest

import ipu


def _scaled_add_program(n, target=None):
    g = ipu.Graph(target or ipu.small_target(2))
    x = g.add_variable("x", (n,), "float32")
    y = g.add_variable("y", (n,), "float32")
    g.set_tile_mapping(x, 0)
    g.set_tile_mapping(y, 0)
    cs = g.add_compute_set("scaled_add")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=y, a=1.0, b=0.25)
    return g, x, y, ipu.Execute(cs)


@pytest.mark.parametrize("n,poplibs", [(64, 279), (128, 369), (256, 567), (512, 945)])
def test_scaled_add_one_tile_matches_poplibs_estimate(n, poplibs):
    g, x, y, prog = _scaled_add_program(n)
    engine = ipu.Engine(ipu.compile(g, prog))
    xv = np.random.default_rng(n).random(n, dtype=np.float32)
    yv = np.random.default_rng(n + 1).random(n, dtype=np.float32)
    engine.write_tensor(x, xv)
    engine.write_tensor(y, yv)
    cycles = engine.run()
    # the vertex is poplibs' estimate exactly; the compute set adds its launch (measured on hardware)
    assert cycles == poplibs + g.target.compute_set_launch_cycles
    np.testing.assert_allclose(engine.read_tensor(x), xv + np.float32(0.25) * yv, rtol=1e-6)


def test_exchange_between_two_tiles_costs_bytes_over_bandwidth_plus_overhead():
    target = ipu.small_target(2)
    g = ipu.Graph(target)
    a = g.add_variable("a", (143,), "float32")
    b = g.add_variable("b", (143,), "float32")
    g.set_tile_mapping(a, 0)
    g.set_tile_mapping(b, 1)
    exe = ipu.compile(g, ipu.Copy(a, b))
    engine = ipu.Engine(exe)
    data = np.arange(143, dtype=np.float32)
    engine.write_tensor(a, data)
    total = engine.run()
    exchange = [s for s in exe.steps if s.kind == "exchange"]
    assert len(exchange) == 1
    assert exchange[0].cycles == 143 + target.exchange_overhead_cycles  # 572 bytes / 4 B per cycle
    assert total == exchange[0].cycles + target.sync_cycles  # the exchange is preceded by a sync
    np.testing.assert_array_equal(engine.read_tensor(b), data)


def test_sync_costs_the_target_sync():
    target = ipu.small_target(4)
    g = ipu.Graph(target)
    engine = ipu.Engine(ipu.compile(g, ipu.Sync()))
    assert engine.run() == target.sync_cycles == 90


def test_supervisor_vertices_run_one_after_another():
    # a supervisor vertex (ScaledAdd) occupies every worker context of its tile: seven take seven times one
    from codelets.scaled_add import scaled_add_cycles

    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (70,), "float32")
    g.set_tile_mapping(x, 0)
    cs = g.add_compute_set("cs")
    for i in range(7):
        g.add_vertex(cs, "ScaledAdd", 0, data=x[i * 10:(i + 1) * 10], deltas=x[i * 10:(i + 1) * 10], a=1.0, b=1.0)
    exe = ipu.compile(g, ipu.Execute(cs))
    one = int(scaled_add_cycles(np.array([10]), 4, True, np.array([False]))[0])
    assert exe.steps[0].cycles == 7 * one + g.target.compute_set_launch_cycles  # one launch per compute set


def test_worker_vertices_share_six_contexts():
    # worker vertices (Reduce) run on the tile's six contexts at once: one alone takes as long as six
    # (each context issues every sixth cycle), a seventh waits for a free context and doubles the time
    from codelets.reduce import REDUCE_OPS, reduce_cycles

    assert not ipu.get_codelet("Reduce").supervisor

    def tile_cycles(n):
        g = ipu.Graph(ipu.small_target(1))
        x = g.add_variable("x", (8 * n,), "float32")
        y = g.add_variable("y", (n,), "float32")
        g.set_tile_mapping(x, 0)
        g.set_tile_mapping(y, 0)
        cs = g.add_compute_set("cs")
        for i in range(n):
            g.add_vertex(cs, "Reduce", 0, **{"in": x[i * 8:(i + 1) * 8], "out": y[i:i + 1]},
                         op=REDUCE_OPS["sum"], inner=8, layout=0)
        return ipu.compile(g, ipu.Execute(cs)).steps[0].cycles

    one = int(reduce_cycles(np.array([1]), np.array([8]), "sum", np.array([0]), ipu.FLOAT32, ipu.FLOAT32)[0])
    launch = ipu.small_target(1).compute_set_launch_cycles
    assert tile_cycles(1) == tile_cycles(6) == 6 * one + launch
    assert tile_cycles(7) == 2 * 6 * one + launch


def test_same_program_twice_same_cycles_and_bytes():
    results = []
    for _ in range(2):
        g, x, y, prog = _scaled_add_program(300, ipu.small_target(3))
        z = g.add_variable("z", (300,), "float32")
        g.map_linearly(z)
        exe = ipu.compile(g, ipu.Sequence(prog, ipu.Copy(x, z)))
        engine = ipu.Engine(exe)
        engine.write_tensor(x, np.ones(300, np.float32))
        engine.write_tensor(y, np.ones(300, np.float32))
        c = engine.run()
        results.append((c, exe.total_bytes, {k: v.tolist() for k, v in exe.plan.categories.items()},
                        engine.read_tensor(z).tobytes()))
    assert results[0] == results[1]


def test_tiles_of_an_exchange_bus_pair_receive_shared_data_at_twice_the_rate():
    """poplibs ExchangeEstimator: the two tiles of a bus pair (2j, 2j + 1) receiving the same data
    take it over their shared bus at 8 B/cycle each; tiles of different pairs do not."""
    def phase(dst_tiles):
        g = ipu.Graph(ipu.small_target(8))
        src = g.add_variable("src", (1024,))
        dst = g.add_variable("dst", (len(dst_tiles), 1024))
        g.map_linearly(src, tiles=range(4, 8))  # four senders, 1 KiB each
        for i, t in enumerate(dst_tiles):
            g.set_tile_mapping(dst[i], t)
        exe = ipu.compile(g, ipu.Copy(ipu.Tensor(src.variable, np.tile(np.arange(1024), len(dst_tiles)),
                                                 (len(dst_tiles), 1024)), dst))
        return [s.cycles for s in exe.steps if s.kind == "exchange"][0]

    ovh = ipu.small_target(8).exchange_overhead_cycles
    assert phase([0]) == ovh + 4096 // 4
    assert phase([2, 3]) == ovh + 4096 // 8  # one pair: 8 B/cycle each
    assert phase([1, 2]) == ovh + 4096 // 4  # two pairs: 4 B/cycle each
    from ipu import costs
    w = costs.shared_bus_weights(np.array([0, 0, 0]), np.array([64, 64, 64]), np.array([2, 3, 5]),
                                 ipu.small_target(8))
    assert w.tolist() == [0.5, 0.5, 1.0]
    assert costs.shared_bus_weights(np.array([0, 0]), np.array([64, 64]), np.array([2, 3]), ipu.GC2).tolist() == [1, 1]


def _exchange_runs(rng, n, num_tiles):
    """Runs of an exchange as merge_runs gives them, with what makes the cost models branch:
    runs multicast to several tiles (often both tiles of a bus pair, sometimes the same tile
    twice), receive regions that continue or jump, on-tile copies."""
    sources = rng.integers(0, 1 << 20, max(1, n // 4)) * 4
    sizes = rng.choice([4, 8, 12, 64, 256], sources.size)
    pick = rng.integers(0, sources.size, n)
    src_off, nbytes = sources[pick], sizes[pick]
    src_tile = (src_off >> 16) % num_tiles  # one source offset lies on one tile
    dst_tile = rng.integers(0, num_tiles, n)
    pair = rng.random(n) < 0.4  # the same run again on the receiver's bus partner
    dst_tile = np.concatenate([dst_tile, dst_tile[pair] ^ 1])
    src_off, nbytes, src_tile = (np.concatenate([x, x[pair]]) for x in (src_off, nbytes, src_tile))
    dst_tile = np.where(dst_tile >= num_tiles, dst_tile - 1, dst_tile)
    local = rng.random(dst_tile.size) < 0.1
    dst_tile[local] = src_tile[local]
    dst_off = np.cumsum(nbytes) + np.where(rng.random(nbytes.size) < 0.3, 64, 0)  # some regions jump
    return [np.ascontiguousarray(x, np.int64) for x in (src_tile, dst_tile, src_off, dst_off, nbytes)]


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("target", [ipu.small_target(16), ipu.small_target(7), ipu.GC2, ipu.small_target(8).with_ipus(2)],
                         ids=lambda t: t.name)
def test_exchange_costs_in_one_pass_equal_the_cost_models(seed, target):
    """costs.exchange_costs (one linear pass, as every Copy is compiled) gives exactly the cycles,
    extra cycles and exchange code of exchange_tile_cycles and exchange_code_bytes."""
    from ipu import costs
    rng = np.random.default_rng(seed)
    st, dt, so, do, nb = _exchange_runs(rng, int(rng.integers(0, 3000)) if seed else 1, target.num_tiles)
    costs._exchange_kernel(st[:0], st[:0], st[:0], st[:0], st[:0], 1, 1, True)  # compiled: the pass is taken
    cycles, extra, code = costs.exchange_costs(st, dt, so, do, nb, target)
    want_cycles, want_extra = costs.exchange_tile_cycles(st, dt, so, nb, target)
    want_code = costs.exchange_code_bytes(st, dt, so, do, nb, target.num_tiles)
    assert cycles.dtype == want_cycles.dtype and np.array_equal(cycles, want_cycles)
    assert extra == want_extra
    assert code.dtype == want_code.dtype and np.array_equal(code, want_code)
