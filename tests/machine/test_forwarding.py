"""Exchanges that feed the next compute set directly (ipu/forwarding.py): the compiled step loop
skips a copy whose destination only that compute set reads, its vertices reading the source; the
Python walk copies everything and stays the reference. Outputs, cycles and step logs are the
walk's on 1 and 2 threads (and with 2 replicas), memory too outside the skipped (dead) bytes."""
import numpy as np
import pytest

import codelets  # noqa: F401  (registers the built-in codelets)
import ipu
from ipu import forwarding, native
from ipu.compute import KernelGroup

PATHS = [dict(compiled=False), dict(compiled=True, threads=1), dict(compiled=True, threads=2)]


@pytest.fixture
def row_reads(monkeypatch):
    monkeypatch.setattr(forwarding, "MAX_SEGMENTS", 32)


@pytest.fixture
def split_everything(monkeypatch):
    monkeypatch.setattr(native, "PARALLEL_MIN_ELEMENTS", 0)
    monkeypatch.setattr(native, "PARALLEL_MIN_BYTES", 0)


def _multicast(read_again=False, write_source=False, spanning=False):
    """x (4 rows, row r on tile r) multicast into the temporary y (a copy of x on every tile),
    then a compute set adding y into acc, one vertex per row (each reads one run of the copy)."""
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (4, 8), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (4, 4, 8), "float32", category="temporary")
    acc = g.add_variable("acc", (4, 4, 8), "float32")
    for v in (y, acc):
        g.set_tile_mapping(v, {t: [(32 * t, 32 * t + 32)] for t in range(4)})
    cs = g.add_compute_set("add")
    yf, af = y.flatten(), acc.flatten()
    for t in range(4):
        if spanning and t == 1:  # one vertex reading rows 0 and 1 of tile 1's copy: two runs
            g.add_vertex(cs, "ScaledAdd", t, data=af[32:48], deltas=yf[32:48], a=1.0, b=1.0)
            rows = range(2, 4)
        else:
            rows = range(4)
        for r in rows:
            at = 32 * t + 8 * r
            g.add_vertex(cs, "ScaledAdd", t, data=af[at:at + 8], deltas=yf[at:at + 8], a=1.0, b=1.0)
        if write_source:  # the compute set also writes the copy's source
            one = g.add_constant(f"one{t}", np.ones(8, np.float32), tile=t)
            g.add_vertex(cs, "ScaledAdd", t, data=x.flatten()[8 * t:8 * t + 8], deltas=one, a=1.0, b=1.0)
    steps = [ipu.Copy(x.reshape((1, 4, 8)).broadcast((4, 4, 8)), y), ipu.Execute(cs)]
    if read_again:
        cs2 = g.add_compute_set("again")
        for t in range(4):
            g.add_vertex(cs2, "ScaledAdd", t, data=af[32 * t:32 * t + 32], deltas=yf[32 * t:32 * t + 32], a=1.0, b=1.0)
        steps.append(ipu.Execute(cs2))
    return ipu.compile(g, ipu.Sequence(*steps)), x, acc


def _compare(exe, x, acc, replicas=1, runs=2):
    data = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = []
    for kw in PATHS:
        exe.native = None
        e = ipu.Engine(exe, replicas=replicas, **kw)
        e.write_tensor(x, data)
        for _ in range(runs):
            e.run(0)
        dead = np.zeros(e.memory.shape[-1], bool)
        skipped = 0
        if kw["compiled"]:
            d, n = exe.native.skipped_runs()
            skipped = int(n.sum())
            for a, b in zip(d.tolist(), n.tolist()):
                dead[a:a + b] = True
        out.append((e.memory.copy(), e.cycles, *e.executed_steps(), dead, skipped,
                    [e.read_tensor(acc, replica=r) for r in range(replicas)]))
    mem0, cyc0, ids0, st0, _, _, acc0 = out[0]
    for mem, cyc, ids, st, dead, _, got in out[1:]:
        assert cyc == cyc0
        np.testing.assert_array_equal(ids, ids0)
        np.testing.assert_array_equal(st, st0)
        assert np.array_equal(mem[..., ~dead], mem0[..., ~dead])
        for a, b in zip(got, acc0):
            np.testing.assert_array_equal(a, b)
    assert out[1][5] == out[2][5]
    return out[1][5], acc0[0]


@pytest.mark.parametrize("replicas", [1, 2])
def test_a_multicast_read_once_feeds_the_compute_set_from_its_source(replicas, split_everything):
    exe, x, acc = _multicast()
    assert list(exe.forwarding.readers.values()) == [s.id for s in exe.steps if s.kind == "compute"]
    skipped, got = _compare(exe, x, acc, replicas)
    assert skipped == 4 * 4 * 8 * 4  # every run of the copy: the vertices read x itself
    data = np.arange(32, dtype=np.float32).reshape(4, 8)
    np.testing.assert_array_equal(got, 2 * np.broadcast_to(data, (4, 4, 8)))


def test_nothing_is_skipped_when_another_step_reads_the_copy_too(split_everything):
    exe, x, acc = _multicast(read_again=True)
    assert not exe.forwarding.readers
    assert _compare(exe, x, acc)[0] == 0


def test_nothing_is_skipped_when_the_compute_set_writes_the_source(split_everything):
    exe, x, acc = _multicast(write_source=True)
    assert exe.forwarding.readers  # the liveness allows it; the plan sees the write
    assert _compare(exe, x, acc)[0] == 0


def test_a_read_across_runs_keeps_those_runs(split_everything):
    exe, x, acc = _multicast(spanning=True)
    assert _compare(exe, x, acc)[0] == (16 - 2) * 8 * 4


def _group(reads, writes=()):
    """A ScaledAdd kernel group: per vertex (data element offset, deltas element offset, count)."""
    rows = [(w, r, n) for (r, n), w in zip(reads, writes or [1000 + 16 * i for i in range(len(reads))])]
    off = np.array([[w, r] for w, r, _ in rows], np.int64)
    cnt = np.array([[n, n] for _, _, n in rows], np.int64)
    f32 = ipu.FLOAT32
    return KernelGroup(ipu.get_codelet("ScaledAdd"), (f32, f32), np.zeros(len(rows), np.int64), off, cnt,
                       np.ones((len(rows), 2)), np.zeros((len(rows), 0), np.int64), np.zeros(len(rows), np.int64))


def _runs(*triples):
    s, d, n = (np.array(v, np.int64) for v in zip(*triples))
    return s, d, n


def test_forward_redirects_reads_inside_one_run_to_its_source():
    # runs (src, dst, bytes): reads of 2 floats at dst 400 and 408 (elements 100, 102)
    src, dst, n = _runs((800, 400, 8), (900, 408, 8), (960, 416, 4))
    g = _group([(100, 2), (102, 2)])
    skips, (g2,) = forwarding.forward([g], [(True, src, dst, n, 0)])
    assert skips[0].tolist() == [True, True, True]  # the last run is read by nobody: dead too
    assert g2.off[:, 1].tolist() == [200, 225] and g2.off[:, 0].tolist() == g.off[:, 0].tolist()


@pytest.mark.parametrize("case", ["across", "misaligned", "unwritten", "later write", "write over source", "first"])
def test_forward_keeps_runs_it_cannot_prove_dead(case):
    src, dst, n = _runs((800, 400, 8), (900, 408, 8))
    reads, writes, chain, unwritten = [(100, 2), (102, 2)], (), None, None
    lo = 0
    if case == "across":  # one read over both runs
        reads = [(100, 4)]
    elif case == "misaligned":  # the second run's source is not at a whole float from its destination
        src = np.array([800, 902], np.int64)
    elif case == "unwritten":  # a temporary that may read what the first run's bytes held
        unwritten = (np.array([400], np.int64), np.array([404], np.int64))
    elif case == "later write":  # a later exchange writes the first run's source
        chain = (False, np.array([0], np.int64), np.array([804], np.int64), np.array([4], np.int64), 0)
    elif case == "write over source":  # a vertex writes the second run's source
        writes = (1000, 226)
    elif case == "first":  # runs before lo are a regrouped multicast's first block: always copied
        lo = 1
    links = [(True, src, dst, n, lo)] + ([chain] if chain else [])
    got = forwarding.forward([_group(reads, writes)], links, unwritten)
    expected = {"across": None, "misaligned": [True, False], "unwritten": [False, True],
                "later write": [False, True], "write over source": [True, False], "first": [True]}[case]
    if expected is None:
        assert got is None
    else:
        assert got is not None and got[0][0].tolist() == expected


def test_stale_reads_are_the_bytes_a_first_step_may_read_before_writing_them():
    # MatMulBlock vertices (out is in/out): accumulate 0 writes without reading; accumulate 1
    # reads, which is the step's own value when an earlier vertex wrote that same range
    f32 = ipu.FLOAT32
    off = np.array([[100, 200, 0], [100, 200, 0], [100, 200, 4], [8, 200, 300]], np.int64)  # elements
    cnt = np.array([[4, 4, 4], [4, 4, 4], [4, 4, 4], [2, 4, 4]], np.int64)
    ip = np.array([[1, 4, 4, 0], [1, 4, 4, 1], [1, 4, 4, 1], [1, 2, 4, 0]], np.int64)
    g = KernelGroup(ipu.get_codelet("MatMulBlock"), (f32, f32, f32), np.zeros(4, np.int64), off, cnt,
                    np.zeros((4, 0)), ip, np.zeros(4, np.int64))
    s, e = forwarding.stale_reads([g], np.array([0], np.int64), np.array([64], np.int64))
    # vertex 2 reads out bytes 16-32 that no earlier vertex wrote; vertex 3 reads a at bytes 32-40
    assert list(zip(s.tolist(), e.tolist())) == [(16, 32), (32, 40)]


def _gathered_matmul(m=8, k=6, n=5, tiles=4):
    """x (m x k, a few rows a tile) and w (k x n, spread linearly: some rows cross tiles) multicast
    to every tile, then per tile two MatMulBlock vertices (rows 0-2 overwrite, rows 3.. accumulate)
    whose a blocks gather rows of several tiles' runs: each reads its rows where x holds them."""
    g = ipu.Graph(ipu.small_target(tiles))
    x = g.add_variable("x", (m, k), "float32")
    w = g.add_variable("w", (k, n), "float32")
    g.set_tile_mapping(x, {t: [(2 * k * t, 2 * k * t + 2 * k)] for t in range(tiles)})
    g.map_linearly(w)
    ya = g.add_variable("ya", (tiles, m, k), "float32", category="temporary")
    yb = g.add_variable("yb", (tiles, k, n), "float32", category="temporary")
    out = g.add_variable("out", (tiles, m, n), "float32")
    for v, size in ((ya, m * k), (yb, k * n), (out, m * n)):
        g.set_tile_mapping(v, {t: [(size * t, size * (t + 1))] for t in range(tiles)})
    cs = g.add_compute_set("mm")
    for t in range(tiles):
        for r0, r1, acc in ((0, 3, 0), (3, m, 1)):
            g.add_vertex(cs, "MatMulBlock", t, a=ya[t, r0:r1].flatten(), b=yb[t].flatten(),
                         out=out[t, r0:r1].flatten(), m=r1 - r0, k=k, n=n, accumulate=acc)
    prog = ipu.Sequence(ipu.Copy(x.reshape((1, m, k)).broadcast((tiles, m, k)), ya),
                        ipu.Copy(w.reshape((1, k, n)).broadcast((tiles, k, n)), yb), ipu.Execute(cs))
    return ipu.compile(g, prog), x, w, out


@pytest.mark.parametrize("replicas", [1, 2])
def test_matmul_rows_gathered_from_several_runs_are_read_where_the_source_holds_them(replicas, split_everything,
                                                                                       row_reads):
    exe, x, w, out = _gathered_matmul()
    rng = np.random.default_rng(1)
    xv = rng.normal(size=(8, 6)).astype(np.float32)
    wv = rng.normal(size=(6, 5)).astype(np.float32)
    res = []
    for kw in PATHS:
        exe.native = None
        e = ipu.Engine(exe, replicas=replicas, **kw)
        e.write_tensor(x, xv)
        e.write_tensor(w, wv)
        for _ in range(2):
            e.run(0)
        dead = np.zeros(e.memory.shape[-1], bool)
        skipped = 0
        if kw["compiled"]:
            d, nb = exe.native.skipped_runs()
            skipped = int(nb.sum())
            for a, b in zip(d.tolist(), nb.tolist()):
                dead[a:a + b] = True
        res.append((e.memory.copy(), e.cycles, *e.executed_steps(), dead, skipped,
                    [e.read_tensor(out, replica=r) for r in range(replicas)]))
    mem0, cyc0, ids0, st0, _, _, out0 = res[0]
    for mem, cyc, ids, st, dead, _, got in res[1:]:
        assert cyc == cyc0
        np.testing.assert_array_equal(ids, ids0)
        np.testing.assert_array_equal(st, st0)
        assert np.array_equal(mem[..., ~dead], mem0[..., ~dead])
        for a, b in zip(got, out0):
            np.testing.assert_array_equal(a, b)
    assert res[1][5] == res[2][5]
    # every row of every a block is read from x (the vertices' reads span 2-3 of its runs), so
    # none of the multicast of x is copied
    assert res[1][5] >= 4 * 8 * 6 * 4
    ref = xv @ wv
    for t in range(4):
        np.testing.assert_allclose(out0[0][t, :3], ref[:3], rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out0[0][t, 3:], 2 * ref[3:], rtol=1e-5, atol=1e-5)


def test_forward_reads_rows_of_a_row_field_from_several_runs(row_reads):
    # a MatMulBlock's a (2 x 3 rows at dst elements 100..105) gathered from two runs of one row
    # each; a third vertex's a crosses a run in mid-row: its runs stay copied
    f32 = ipu.FLOAT32
    mm = ipu.get_codelet("MatMulBlock")
    off = np.array([[100, 300, 500], [120, 300, 520], [140, 300, 540]], np.int64)
    cnt = np.array([[6, 6, 4], [6, 6, 4], [6, 6, 4]], np.int64)
    ip = np.array([[2, 3, 2, 0]] * 3, np.int64)
    g = KernelGroup(mm, (f32, f32, f32), np.zeros(3, np.int64), off, cnt, np.zeros((3, 0)), ip, np.zeros(3, np.int64))
    src, dst, n = _runs((8000, 400, 12), (9000, 412, 12), (10000, 480, 12), (11000, 492, 12),
                        (12000, 560, 8), (13000, 568, 16))
    skips, (g2,) = forwarding.forward([g], [(True, src, dst, n, 0)])
    assert skips[0].tolist() == [True, True, True, True, False, False]
    assert isinstance(g2.codelet, forwarding.RowReading)
    segs = g2.ip[:, 4]
    assert segs.tolist() == [2, 2, 2]
    a_count, a_pairs = g2.ip[:, 5], g2.ip[:, 6:10]
    assert a_count.tolist() == [2, 2, 0]
    assert a_pairs[0].tolist() == [0, 2000, 1, 2250] and a_pairs[1].tolist() == [0, 2500, 1, 2750]
    assert g2.ip[:, 10].tolist() == [0, 0, 0]  # b is read where it is
    np.testing.assert_array_equal(g2.ip[:, :4], ip)


@pytest.mark.parametrize("between", ["other", "writes source"])
def test_an_exchange_read_after_another_compute_step_is_forwarded_past_it(between, split_everything):
    # the multicast of x into y, then a compute step that reads and writes other tensors (as an
    # operand's transpose runs between its exchange and the product), then the step reading y
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (4, 8), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (4, 4, 8), "float32", category="temporary")
    acc = g.add_variable("acc", (4, 4, 8), "float32")
    other = g.add_variable("other", (4, 8), "float32")
    g.map_linearly(other)
    for v in (y, acc):
        g.set_tile_mapping(v, {t: [(32 * t, 32 * t + 32)] for t in range(4)})
    mid = g.add_compute_set("mid")
    target = x if between == "writes source" else other
    for t in range(4):
        one = g.add_constant(f"one{t}", np.ones(8, np.float32), tile=t)
        g.add_vertex(mid, "ScaledAdd", t, data=target.flatten()[8 * t:8 * t + 8], deltas=one, a=1.0, b=1.0)
    cs = g.add_compute_set("add")
    yf, af = y.flatten(), acc.flatten()
    for t in range(4):
        for r in range(4):
            at = 32 * t + 8 * r
            g.add_vertex(cs, "ScaledAdd", t, data=af[at:at + 8], deltas=yf[at:at + 8], a=1.0, b=1.0)
    exe = ipu.compile(g, ipu.Sequence(ipu.Copy(x.reshape((1, 4, 8)).broadcast((4, 4, 8)), y), ipu.Execute(mid),
                                      ipu.Execute(cs)))
    skipped, got = _compare(exe, x, acc)
    data = np.arange(32, dtype=np.float32).reshape(4, 8)
    if between == "other":
        assert skipped == 4 * 4 * 8 * 4
        np.testing.assert_array_equal(got, 2 * np.broadcast_to(data, (4, 4, 8)))
    else:  # the step between writes x: y is copied before it, as the walk copies it
        assert skipped == 0


def test_reduce_partials_rows_from_several_tiles_are_read_where_they_lie(split_everything, row_reads):
    # partial rows of 6 on 4 tiles; two MatMulReducePartials vertices each sum a half (3 columns)
    # of every tile's row, gathered into [4, 3] blocks on tiles 0 and 1: each block spans 4 runs
    g = ipu.Graph(ipu.small_target(4))
    parts = g.add_variable("parts", (4, 6), "float32")
    g.map_linearly(parts)
    buf = g.add_variable("buf", (2, 4, 3), "float32", category="temporary")
    out = g.add_variable("out", (2, 3), "float32")
    g.set_tile_mapping(buf, {v: [(12 * v, 12 * v + 12)] for v in range(2)})
    g.set_tile_mapping(out, {v: [(3 * v, 3 * v + 3)] for v in range(2)})
    cs = g.add_compute_set("reduce")
    for v in range(2):
        g.add_vertex(cs, "MatMulReducePartials", v, partials=buf[v].flatten(), out=out[v], num_partials=4)
    src = parts.reshape((4, 2, 3)).transpose((1, 0, 2))
    exe = ipu.compile(g, ipu.Sequence(ipu.Copy(src, buf), ipu.Execute(cs)))
    pv = np.random.default_rng(2).normal(size=(4, 6)).astype(np.float32)
    res = []
    for kw in PATHS:
        exe.native = None
        e = ipu.Engine(exe, **kw)
        e.write_tensor(parts, pv)
        e.run(0)
        skipped = int(exe.native.skipped_runs()[1].sum()) if kw["compiled"] else 0
        res.append((e.cycles, *e.executed_steps(), skipped, e.read_tensor(out)))
    for cyc, ids, st, _, got in res[1:]:
        assert cyc == res[0][0]
        np.testing.assert_array_equal(ids, res[0][1])
        np.testing.assert_array_equal(st, res[0][2])
        np.testing.assert_array_equal(got, res[0][4])
    assert res[1][3] == res[2][3] == 2 * 4 * 3 * 4  # every partial row read where it lies
    ref = np.zeros(6, np.float32)
    for r in pv:
        ref += r
    np.testing.assert_array_equal(res[0][4].reshape(-1), ref)
