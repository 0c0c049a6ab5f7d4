"""The compiled step loop (ipu/native.py) against the Python walk: identical memory, cycles and
step logs, on one thread and on several."""
import os
import runpy

import numpy as np
import pytest

import ipu
from ipu import copytables, native

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PATHS = [dict(compiled=False), dict(compiled=True, threads=1), dict(compiled=True, threads=2)]


@pytest.fixture
def split_everything(monkeypatch):
    """Split every group and table that may be split, however small, so threads are exercised."""
    monkeypatch.setattr(native, "PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(native, "PARALLEL_MIN_BYTES", 0)


def _runs(exe, feed, runs=2, replicas=1):
    """Memory, cycles, step log and the bytes of skipped copies (ipu/forwarding.py: dead, so
    they may differ) after `runs` runs of program 0 on every path."""
    out = []
    for kw in PATHS:
        exe.native = None  # every path builds its own plan
        e = ipu.Engine(exe, replicas=replicas, **kw)
        feed(e)
        for _ in range(runs):
            e.run(0)
        ids, starts = e.executed_steps()
        dead = np.zeros(e.memory.shape[-1], bool)
        if kw["compiled"]:
            for d, n in zip(*(x.tolist() for x in exe.native.skipped_runs())):
                dead[d:d + n] = True
        out.append((e.memory.copy(), e.cycles, ids, starts, dead))
    return out


def _assert_same(results):
    mem0, cyc0, ids0, st0, _ = results[0]
    for mem, cyc, ids, st, dead in results[1:]:
        assert cyc == cyc0
        np.testing.assert_array_equal(ids, ids0)
        np.testing.assert_array_equal(st, st0)
        assert np.array_equal(mem[..., ~dead], mem0[..., ~dead])


def test_mnist_training_step_is_identical_on_every_path(split_everything):
    import popxl

    mnist = runpy.run_path(os.path.join(ROOT, "examples", "mnist.py"), run_name="t")
    batch, hidden = 16, 32
    ir, h = mnist["train_ir"](batch, hidden, 0.05, mnist["init_weights"](hidden), "sgd", 1)
    exe = popxl.Session(ir, "ipu_model").executable
    x, y, _, _ = mnist["synthetic_mnist"](batch, 1)

    def feed(e):
        for name, s in exe.streams.items():
            if s.to_device:
                data = x if "image" in name else y
                e.connect_stream(name, np.asarray(data, s.dtype.numpy).reshape(s.shape))
            elif s.callback is None:
                e.connect_stream(name, np.zeros(s.shape, s.dtype.numpy))

    results = _runs(exe, feed)
    _assert_same(results)
    assert exe.native is not None and exe.native.segments
    assert results[1][4].any() and np.array_equal(results[1][4], results[2][4])  # operands fed to the AMP directly


def _add_one(g, var, tile=None):
    """A compute set adding 1 to every element of `var`, one vertex per piece on its tile."""
    cs = g.add_compute_set(f"inc_{var.name}")
    starts, stops, tiles = var.pieces()
    flat = var.flatten()
    for a, b, t in zip(starts, stops, tiles):
        one = g.add_constant(f"one_{var.name}_{len(g.variables)}", np.ones(b - a, var.dtype.numpy), tile=int(t))
        g.add_vertex(cs, "ScaledAdd", int(t), data=flat[a:b], deltas=one, a=1.0, b=1.0)
    return ipu.Execute(cs)


def test_loops_calls_branches_streams_and_copies_are_identical_on_every_path(split_everything):
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (64,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (64,), "float32")
    g.set_tile_mapping(y, {3 - t: [(16 * t, 16 * t + 16)] for t in range(4)})
    c = g.add_variable("c", (), "int32")
    g.set_tile_mapping(c, 3)
    s = g.add_variable("s", (2,), "float32")
    g.set_tile_mapping(s, 1)
    inp = g.add_host_to_device_stream("in", (64,), "float32")
    out = g.add_device_to_host_stream("out", (64,), "float32")
    fn = g.add_function(ipu.Sequence(_add_one(g, y), ipu.Copy(y, x)), name="f")
    body = ipu.Sequence(
        ipu.HostToDevice(inp, x),
        ipu.Repeat(3, ipu.Sequence(_add_one(g, x), ipu.Copy(x, y), ipu.Repeat(2, ipu.Call(fn)),
                                   ipu.Repeat(0, ipu.Copy(y, x)))),
        ipu.Copy(x[:32], x[32:]),  # within one variable: staged
        ipu.Copy(s[0:1].broadcast((16,)), y[:16]),  # one element to many: a multicast
        ipu.Copy(x[:2], s[np.array([0, 0])]),  # two runs into one element: the last wins
        ipu.If(c, ipu.Copy(y, x), ipu.Sequence(_add_one(g, x), _add_one(g, x))),
        ipu.DeviceToHost(x, out),
    )
    exe = ipu.compile(g, body)
    data = np.arange(64, dtype=np.float32)

    def feed(e):
        e.connect_stream("in", data)
        e.connect_stream("out", np.zeros(64, np.float32))
        e.write_tensor(s, np.array([5, 7], np.float32))

    _assert_same(_runs(exe, feed, runs=3))
    codes = set(np.concatenate([seg.ops[:, 0] for seg in exe.native.segments]).tolist())
    assert codes == set(range(10)) - {8}  # steps, kernels, copies, staged, loops, streams, If: all compiled


@pytest.mark.parametrize("room", [None, 0])
def test_copy_tables_are_held_once_and_the_python_walk_reads_the_shared_runs(room, monkeypatch):
    """After a compiled run the executable's copy tables are slices of the plan's one int32 run
    table (not a second copy), and a Python walk over them gives the memory a fresh one gives;
    also when the run table has to grow (room 0: none foreseen)."""
    if room is not None:
        monkeypatch.setattr(native, "_runs_storage", lambda exe: tuple(np.empty(room, np.int32) for _ in range(3)))
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (64,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (64,), "float32")
    g.set_tile_mapping(y, {3 - t: [(16 * t, 16 * t + 16)] for t in range(4)})
    body = ipu.Sequence(ipu.Copy(x, y), _add_one(g, y), ipu.Copy(y[::-1], x), ipu.Copy(x[:32], x[32:]))
    exe = ipu.compile(g, body)
    data = np.arange(64, dtype=np.float32)

    def run(**kw):
        e = ipu.Engine(exe, **kw)
        e.write_tensor(x, data)
        e.run(0)
        return e.memory.copy()

    fresh = run(compiled=False)
    compiled = run(compiled=True, threads=1)
    plan = exe.native
    tables = [s.payload for s in exe.steps if s.kind == "exchange" and s.payload is not None]
    flat = [t for t in tables if not t.staged]
    assert flat and all(t.src_off.dtype == np.int32 for t in flat)
    assert all(np.shares_memory(t.src_off, plan._runs[0]) and np.shares_memory(t.nbytes, plan._runs[2])
               for t in flat)
    assert np.array_equal(run(compiled=False), fresh) and np.array_equal(compiled, fresh)


def test_replicas_run_identically_on_every_path(split_everything):
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (16,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (16,), "float32")
    g.set_tile_mapping(y, 1)
    exe = ipu.compile(g, ipu.Repeat(4, ipu.Sequence(_add_one(g, x), ipu.Copy(x, y), ipu.Copy(y, x))))

    def feed(e):
        for r in range(e.replicas):
            e.write_tensor(x, np.full(16, r, np.float32), replica=r)

    _assert_same(_runs(exe, feed, replicas=3))


class _Fails(ipu.Codelet):
    """A vertex whose kernel refuses negative input (to see errors cross the compiled loop).
    Not registered: the graph takes the instance itself, and the registry stays the product's."""

    name = "TestFailsOnNegative"
    fields = (ipu.Field("x", ipu.INOUT),)

    def kernel(self):
        return _fails_kernel

    def cycles(self, types, cnt, fp, ip, target):
        return np.full(len(cnt), 10, np.int64)


from numba import njit  # noqa: E402


@njit(cache=True)
def _fails_kernel(views, off, cnt, fp, ip):
    v = views[0]
    for i in range(off.shape[0]):
        if v[off[i, 0]] < 0:
            raise ValueError("negative input")
        v[off[i, 0]] += 1


@pytest.mark.parametrize("compiled", [False, True])
def test_a_kernel_error_reaches_the_user_on_both_paths(compiled):
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (1,), "float32")
    g.set_tile_mapping(x, 0)
    cs = g.add_compute_set("f")
    g.add_vertex(cs, _Fails(), 0, x=x)
    e = ipu.Engine(ipu.compile(g, ipu.Execute(cs)), compiled=compiled)
    e.write_tensor(x, [1.0])
    e.run()
    assert e.read_tensor(x)[0] == 2.0
    e.write_tensor(x, [-1.0])
    with pytest.raises(ValueError, match="negative input"):
        e.run()


def test_threads_must_be_positive():
    g = ipu.Graph(ipu.small_target(2))
    with pytest.raises(ValueError, match="threads"):
        ipu.Engine(ipu.compile(g, ipu.Sync()), threads=0)


def test_vertices_that_touch_each_others_memory_run_on_one_thread():
    from ipu.compute import KernelGroup

    codelet = ipu.get_codelet("ScaledAdd")
    f32 = ipu.FLOAT32

    def group(off):
        off = np.asarray(off, np.int64)
        return KernelGroup(codelet, (f32, f32), np.zeros(len(off), np.int64), off, np.full(off.shape, 4, np.int64),
                           np.zeros((len(off), 2)), np.zeros((len(off), 0), np.int64), np.zeros(len(off), np.int64))

    assert native._group_parallel(group([[0, 100], [4, 104]]))  # disjoint
    assert not native._group_parallel(group([[0, 100], [2, 104]]))  # writes overlap
    assert not native._group_parallel(group([[0, 100], [8, 2]]))  # vertex 1 reads what vertex 0 writes
    assert not native._group_parallel(group([[0, 100]]))  # one vertex: nothing to split


def test_step_counts_and_a_limited_trace_match_the_python_walk():
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (16,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (16,), "float32")
    g.set_tile_mapping(y, 1)
    exe = ipu.compile(g, ipu.Repeat(7, ipu.Sequence(_add_one(g, x), ipu.Copy(x, y))))
    out = []
    for kw in PATHS:
        exe.native = None
        e = ipu.Engine(exe, trace_limit=10, **kw)
        e.run()
        e.run()
        out.append((e.step_counts(), e.log.arrays(), len(e.log), e.log.truncated, e.cycles))
    for counts, (ids, starts), n, truncated, cycles in out[1:]:
        np.testing.assert_array_equal(counts, out[0][0])
        np.testing.assert_array_equal(ids, out[0][1][0])
        np.testing.assert_array_equal(starts, out[0][1][1])
        assert (n, truncated, cycles) == out[0][2:]
    assert out[0][1][0].size == 10 and out[0][3]


def test_environment_chooses_the_path_and_threads(monkeypatch):
    g = ipu.Graph(ipu.small_target(2))
    exe = ipu.compile(g, ipu.Sync())
    monkeypatch.setenv("IPU_SIM_COMPILED", "0")
    monkeypatch.setenv("IPU_SIM_THREADS", "3")
    e = ipu.Engine(exe)
    assert (e.compiled, e.threads) == (False, 3)
    monkeypatch.delenv("IPU_SIM_COMPILED")
    assert ipu.Engine(exe).compiled and ipu.Engine(exe, threads=1).threads == 1


def test_engines_in_several_threads_share_one_plan():
    import threading

    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (64,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (64,), "float32")
    g.set_tile_mapping(y, 3)
    progs = [ipu.Repeat(k + 1, ipu.Sequence(_add_one(g, x), ipu.Copy(x, y))) for k in range(4)]
    exe = ipu.compile(g, progs)
    out = {}

    def work(k):
        e = ipu.Engine(exe)
        for _ in range(3):
            e.run(k)
        out[k] = (e.read_tensor(y), e.cycles)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for k in range(4):
        np.testing.assert_array_equal(out[k][0], np.full(64, 3 * (k + 1), np.float32))
    assert len({id(exe.native)}) == 1 and len(exe.native.roots) == 4


@pytest.mark.parametrize("replicas", [1, 2])
def test_streams_inside_a_loop_run_compiled_and_match(replicas):
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (8,), "float32")
    g.map_linearly(x)
    inp = g.add_host_to_device_stream("in", (8,), "float32")
    out = g.add_device_to_host_stream("out", (8,), "float32")
    exe = ipu.compile(g, ipu.Repeat(3, ipu.Sequence(ipu.HostToDevice(inp, x), _add_one(g, x),
                                                     ipu.DeviceToHost(x, out))))
    data = np.arange(replicas * 3 * 8, dtype=np.float32).reshape(replicas, 3, 8)
    got = []
    for kw in PATHS:
        exe.native = None
        e = ipu.Engine(exe, replicas=replicas, **kw)
        host = np.zeros((replicas, 3, 8), np.float32)
        e.connect_stream("in", data if replicas > 1 else data[0])
        e.connect_stream("out", host if replicas > 1 else host[0])
        e.run()
        got.append((host.copy(), e.cycles, e.step_counts()))
        if kw.get("compiled"):
            assert all(6 in seg.ops[:, 0] for seg in exe.native.segments)  # the streams ran compiled
    np.testing.assert_array_equal(got[0][0], data + 1)
    for host, cycles, counts in got[1:]:
        np.testing.assert_array_equal(host, got[0][0])
        assert cycles == got[0][1]
        np.testing.assert_array_equal(counts, got[0][2])


@pytest.mark.parametrize("compiled", [False, True])
def test_an_unconnected_stream_is_the_same_error_on_both_paths(compiled):
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (4,), "float32")
    g.map_linearly(x)
    inp = g.add_host_to_device_stream("in", (4,), "float32")
    e = ipu.Engine(ipu.compile(g, ipu.Sequence(_add_one(g, x), ipu.HostToDevice(inp, x))), compiled=compiled)
    with pytest.raises(ipu.StreamError, match="not connected"):
        e.run()
    np.testing.assert_array_equal(e.read_tensor(x), np.ones(4, np.float32))  # the step before it ran


@pytest.mark.parametrize("replicas", [1, 2])
def test_branches_inside_a_loop_match_on_every_path(replicas, split_everything):
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (8,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (8,), "float32")
    g.set_tile_mapping(y, 1)
    conds = {}
    for name, dt in (("ci", "int32"), ("cf", "float32"), ("ch", "float16")):
        conds[name] = g.add_variable(name, (), dt)
        g.set_tile_mapping(conds[name], 0)
    body = ipu.Sequence(
        *[_add_one(g, c) for c in conds.values()],
        ipu.Switch(conds["ci"], {1: _add_one(g, x), 3: ipu.Sequence(_add_one(g, y), _add_one(g, y))},
                   default=ipu.Copy(x, y)),
        ipu.If(conds["cf"], _add_one(g, x)),
        ipu.If(conds["ch"], ipu.Copy(y, x), _add_one(g, y)),
    )
    exe = ipu.compile(g, ipu.Repeat(6, body))

    def feed(e):
        for r in range(e.replicas):
            e.write_tensor(conds["ci"], r, replica=r)
            e.write_tensor(conds["cf"], -2 - r, replica=r)
            e.write_tensor(conds["ch"], -1, replica=r)

    results = _runs(exe, feed, replicas=replicas)
    _assert_same(results)
    codes = set(np.concatenate([seg.ops[:, 0] for seg in exe.native.segments]).tolist())
    assert {7, 8, 9} <= codes  # If, Switch and jumps in the table (walked in Python for 2 replicas)


def test_the_compiled_loop_reads_branch_conditions_as_views_of_the_bytes_would():
    """_condition assembles integers from their little-endian bytes (no `.view`): the same values
    as viewing the bytes as int8/16/32, uint8/16/32 and float32 (zero: +0 and -0; NaN is nonzero)."""
    from ipu.step_loop import BOOL, FLOAT, SIGNED, UNSIGNED, _condition

    m = np.random.default_rng(1).integers(0, 256, 600).astype(np.uint8)
    m[:24] = np.array([0.0, -0.0, np.nan, 1e-45, -3.5, np.inf], np.float32).view(np.uint8)
    for off in range(0, 590, 3):
        for size, s_dt, u_dt in ((1, np.int8, np.uint8), (2, np.int16, np.uint16), (4, np.int32, np.uint32)):
            assert _condition(m, off, SIGNED, size) == int(m[off:off + size].view(s_dt)[0])
            assert _condition(m, off, UNSIGNED, size) == int(m[off:off + size].view(u_dt)[0])
        assert _condition(m, off, FLOAT, 4) == (0 if m[off:off + 4].view(np.float32)[0] == 0.0 else 1)
        assert _condition(m, off, BOOL, 1) == (1 if m[off] else 0)
    assert [_condition(m, off, FLOAT, 4) for off in range(0, 24, 4)] == [0, 0, 1, 1, 1, 1]


# ------------------------------------------------------------------------------------------------
# a multicast's repeated blocks copied whole (copytables.replicated_blocks)


def _copy_in_order(memory, runs):
    out = memory.copy()
    for s, d, n in zip(*(np.asarray(x, np.int64) for x in runs)):
        out[d:d + n] = out[s:s + n]
    return out


@pytest.mark.parametrize("seed", range(6))
def test_repeated_blocks_copied_whole_write_the_bytes_the_runs_write(seed, monkeypatch):
    """Random multicasts (a source gathered in short runs into several destination blocks, some
    blocks differing in one run, awkward run sizes, two blocks that touch each other in memory):
    the regrouped table, copied in its order, writes exactly what the runs write."""
    monkeypatch.setattr(copytables, "REPLICATE_MIN_GAIN", 1)  # regroup whatever it saves
    rng = np.random.default_rng(seed)
    src_bytes = 600
    pattern_runs = int(rng.integers(4, 40))
    sizes = rng.integers(1, 9, pattern_runs) * 4 // int(rng.choice([1, 2, 4]))
    sizes = np.maximum(sizes, 1)
    srcs = rng.integers(0, src_bytes - 32, pattern_runs)
    blocks = int(rng.integers(8, 17))
    s, d, n = [], [], []
    at = src_bytes + int(rng.integers(0, 50))
    for b in range(blocks):
        odd = b > 0 and rng.random() < 0.3  # a block that repeats all but one run
        for i, (a, k) in enumerate(zip(srcs, sizes)):
            s.append(a + (4 if odd and i == pattern_runs // 2 else 0))
            d.append(at)
            n.append(k)
            at += int(k)
        at += 0 if b == 2 else int(rng.choice([4, 8, 12]))  # a gap, or (once) the next block right after
    s, d, n = (np.array(x, np.int64) for x in (s, d, n))
    memory = rng.integers(0, 256, at + 64).astype(np.uint8)
    s0, d0, n0, disjoint = copytables.merged_runs(s, d, n)
    assert disjoint
    expected = _copy_in_order(memory, (s, d, n))
    got = copytables.replicated_blocks(s0, d0, n0)
    assert got is not None
    s1, d1, n1, first = got
    assert 0 < first < s1.size < s0.size
    assert n1.sum() == n0.sum()
    np.testing.assert_array_equal(_copy_in_order(memory, (s1, d1, n1)), expected)
    # the block copies read only bytes the runs before them wrote
    written = np.zeros(memory.size, bool)
    for a, k in zip(d1[:first], n1[:first]):
        written[a:a + k] = True
    assert all(written[a:a + k].all() for a, k in zip(s1[first:], n1[first:]))


def test_repeated_blocks_are_formed_only_where_whole_blocks_repeat_often_enough():
    s = np.tile(np.arange(60, -4, -4), 8)  # 16 runs of 4 bytes, backwards (nothing merges), 8 times
    n = np.full(s.size, 4)
    d = 64 + np.arange(s.size) * 4 + np.arange(s.size) // 16 * 8  # 8 blocks with gaps between
    got = copytables.replicated_blocks(*copytables.merged_runs(s, d, n)[:3])
    assert got is not None and got[3] == 16 and got[0].size == 16 + 7
    s_odd = s.copy()
    s_odd[16 * np.arange(1, 8) + 3] += 64 * np.arange(1, 8)  # every block differs from the others in one run
    assert copytables.replicated_blocks(*copytables.merged_runs(s_odd, d, n)[:3]) is None
    s_half = s.copy()
    s_half[16 * np.arange(1, 8, 2) + 3] += 64 * np.arange(1, 8, 2)  # half of them differ: 80 runs + 3 of 128
    assert copytables.replicated_blocks(*copytables.merged_runs(s_half, d, n)[:3]) is None
    distinct = np.arange(s.size)[::-1] * 4 % 64 + np.arange(s.size) // 16 * 1000
    assert copytables.replicated_blocks(*copytables.merged_runs(distinct, d + 10 ** 5, n)[:3]) is None


@pytest.mark.parametrize("room", [None, 0])
def test_a_multicast_of_a_transposed_tensor_is_copied_as_whole_blocks_and_matches_every_path(room, split_everything,
                                                                                             monkeypatch):
    """An exchange broadcasting a transposed tensor to 16 tiles (4-byte runs, each tile's block
    the same sequence of sources) runs as two tables: the first block's runs, then one run per
    repeated block; memory, cycles and step logs are the Python walk's, on 1 and 2 threads, and
    the Python walk over the shared (regrouped) table too; also when the run table grows (room 0)."""
    if room is not None:
        monkeypatch.setattr(native, "_runs_storage", lambda exe: tuple(np.empty(room, np.int32) for _ in range(3)))
    g = ipu.Graph(ipu.small_target(16))
    x = g.add_variable("x", (6, 10), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (16, 10, 6), "float32")
    g.set_tile_mapping(y, {t: [(60 * t, 60 * t + 60)] for t in range(16)})
    body = ipu.Sequence(ipu.Copy(x.transpose(1, 0).reshape(1, 10, 6).broadcast((16, 10, 6)), y), _add_one(g, y))
    exe = ipu.compile(g, body)
    data = np.arange(60, dtype=np.float32).reshape(6, 10)

    def feed(e):
        e.write_tensor(x, data)

    results = _runs(exe, feed)
    _assert_same(results)
    plan = exe.native
    assert 2 in plan._table_parts.values()
    table = next(s.payload for s in exe.steps if s.kind == "exchange" and s.payload is not None)
    assert table.ordered and table.nbytes.size < 16 * 60 // 2
    e = ipu.Engine(exe, compiled=False)
    feed(e)
    e.run(0)
    np.testing.assert_array_equal(e.read_tensor(y), np.broadcast_to(data.T + 1, (16, 10, 6)))
    assert np.array_equal(e.memory, results[0][0])
