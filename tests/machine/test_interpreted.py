"""ipu/interpreted.py: the compile-time kernels give the same numbers run compiled and as their
Python bodies, `call` picks the body only while the kernel is not ready and under its budget, and
an engine left to choose walks a small first run in Python while the step loop is not compiled."""
import numpy as np
import pytest
from numba import njit

import ipu
from ipu import costs, copytables, engine, executable, interpreted, placement


def _both(kernel, *args):
    """The kernel's results compiled and from its Python body (the same inputs, copied for each)."""
    copies = [[a.copy() if isinstance(a, np.ndarray) else a for a in args] for _ in range(2)]
    got = kernel(*copies[0])
    with np.errstate(over="ignore"):
        body = interpreted.python_body(kernel)(*copies[1])
    return (got if isinstance(got, tuple) else (got,)), (body if isinstance(body, tuple) else (body,)), copies


def _assert_identical(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)


def _pieces(rng, n, num_tiles, calls):
    """Pieces of a program calling a function `calls` times: one segment each, or one per call
    (temporaries of one call pattern, some of several, to exercise the pattern hashes), some
    always live and some empty."""
    call_at = np.sort(rng.choice(np.arange(20, 4000, 37), calls, replace=False)) if calls else []
    counts, ss, se = [], [], []
    for _ in range(n):
        u = rng.random()
        if u < 0.1:
            s, e = [-1], [5000]
        elif u < 0.5 or not calls:
            a = int(rng.integers(0, 4500))
            s, e = [a], [a + int(rng.integers(0, 300))]
        else:
            a = int(rng.integers(0, 20))
            w = int(rng.integers(0, 5))
            at = call_at if rng.random() < 0.7 else call_at[:max(2, calls // 2)]
            s, e = [c + a for c in at], [c + a + w for c in at]
        counts.append(len(s))
        ss += s
        se += e
    tile = rng.integers(0, num_tiles, n).astype(np.int64)
    size = rng.choice([0, 4, 8, 24, 64, 520], n).astype(np.int64)
    seg_ptr = np.concatenate(([0], np.cumsum(counts))).astype(np.int64)
    ss = np.array(ss, np.int64)
    se = np.array(se, np.int64)
    order = np.lexsort((-size, ss[seg_ptr[:-1]], tile)).astype(np.int64)
    return order, tile, size, seg_ptr, ss, se


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("calls", [0, 2, 9])
def test_placement_is_identical_compiled_and_in_python(seed, calls):
    rng = np.random.default_rng(seed)
    num_tiles = 3
    order, tile, size, seg_ptr, ss, se = _pieces(rng, int(rng.integers(1, 1500)), num_tiles, calls)
    pat, pat_py, _ = _both(placement._patterns, seg_ptr, ss, se)
    _assert_identical(pat, pat_py)
    got, body, _ = _both(placement._place, order, tile, size, seg_ptr, ss, se, num_tiles, *pat)
    _assert_identical(got, body)


@pytest.mark.parametrize("seed", range(6))
def test_copy_tables_are_identical_compiled_and_in_python(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    isz = int(rng.choice([1, 2, 4]))
    # element addresses in runs: mostly consecutive, with jumps and tile changes
    step = np.where(rng.random(n) < 0.8, isz, rng.integers(-64, 64, n) * isz)
    sa = np.cumsum(step).astype(np.int64) + 4096
    da = np.cumsum(np.where(rng.random(n) < 0.9, isz, 3 * isz)).astype(np.int64)
    st = np.cumsum(rng.random(n) < 0.05).astype(np.int64)
    dt = np.cumsum(rng.random(n) < 0.02).astype(np.int64)
    got, body, _ = _both(copytables._runs_kernel, sa, da, st, dt, isz)
    _assert_identical(got, body)
    # both ends as address runs of a copy of m elements
    m = int(rng.integers(0, 2000))

    def address_runs():
        cuts = np.unique(np.concatenate(([0, m], rng.integers(0, m + 1, int(rng.integers(0, 40))))))
        lengths = np.diff(cuts).astype(np.int64)
        lengths = lengths[lengths > 0]
        addr = (rng.integers(0, 10_000, lengths.size) * isz).astype(np.int64)
        tiles = rng.integers(0, 4, lengths.size).astype(np.int64)
        return addr, tiles, lengths

    (a1, t1, n1), (a2, t2, n2) = address_runs(), address_runs()
    got, body, _ = _both(copytables._merge_kernel, a1, t1, n1, a2, t2, n2, isz)
    _assert_identical(got, body)


@pytest.mark.parametrize("seed", range(6))
def test_layout_addresses_are_identical_compiled_and_in_python(seed):
    rng = np.random.default_rng(seed)
    total = int(rng.integers(1, 5000))
    cuts = np.unique(np.concatenate(([0, total], rng.integers(1, total + 1, int(rng.integers(0, 60))))))
    starts, stops = cuts[:-1].astype(np.int64), cuts[1:].astype(np.int64)
    addr = (rng.integers(0, 1 << 20, starts.size) * 4).astype(np.int64)
    tiles = rng.integers(0, 1472, starts.size).astype(np.int64)
    rs = rng.integers(0, total, 300).astype(np.int64)
    rl = np.minimum(rng.integers(0, 200, 300), total - rs).astype(np.int64)
    got, body, _ = _both(executable._split_runs, rs, rl, starts, stops, addr, tiles, 4)
    _assert_identical(got, body)
    idx = rng.integers(0, total, 2000).astype(np.int64)
    out = [np.empty(idx.size, np.int64) for _ in range(2)]
    _, _, copies = _both(executable._lookup_addresses, idx, starts, stops, addr, tiles, 2, *out)
    _assert_identical(copies[0][-2:], copies[1][-2:])


@pytest.mark.parametrize("seed", range(4))
def test_compute_set_schedule_is_identical_compiled_and_in_python(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 4000))
    tiles = rng.integers(0, 97, n).astype(np.int64)
    cycles = rng.integers(0, 5000, n).astype(np.int64)
    supervisor = rng.random(n) < 0.2
    further = (rng.random(n) < 0.3) & ~supervisor
    further[:1] = False
    got, body, _ = _both(costs._schedule, tiles, cycles, supervisor, further, 97, 6, 13)
    _assert_identical(got, body)


def test_call_runs_the_python_body_until_the_budget_then_compiles():
    @njit  # not cached: ready only once compiled in this process
    def double_sum(x):
        t = 0
        for v in x:
            t += 2 * v
        return t

    x = np.arange(100, dtype=np.int64)
    assert not interpreted.ready(double_sum)
    assert interpreted.call(double_sum, 100, x, budget=250) == 9900
    assert interpreted.call(double_sum, 100, x, budget=250) == 9900
    assert not double_sum.overloads  # 200 items of work went to the Python body
    assert interpreted.call(double_sum, 100, x, budget=250) == 9900  # 300 >= 250: compiled
    assert double_sum.overloads and interpreted.ready(double_sum)


def test_python_body_calls_the_python_bodies_of_its_callees():
    body = interpreted.python_body(placement._place)
    assert body.__globals__["_find"] is interpreted.python_body(placement._find)
    assert body.__globals__["_heap_push"] is interpreted.python_body(placement._heap_push)


def _program(repeat: int):
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (64,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (64,), "float32")
    g.set_tile_mapping(y, {3 - t: [(16 * t, 16 * t + 16)] for t in range(4)})
    cs = g.add_compute_set("inc")
    starts, stops, tiles = x.pieces()
    flat = x.flatten()
    for a, b, t in zip(starts, stops, tiles):
        one = g.add_constant(f"one{a}", np.ones(b - a, np.float32), tile=int(t))
        g.add_vertex(cs, "ScaledAdd", int(t), data=flat[a:b], deltas=one, a=1.0, b=1.0)
    return ipu.compile(g, ipu.Repeat(repeat, ipu.Sequence(ipu.Execute(cs), ipu.Copy(x, y)))), x, y


def test_an_engine_left_to_choose_walks_a_small_first_run_before_the_step_loop_is_compiled(monkeypatch):
    monkeypatch.setattr(interpreted, "ready", lambda kernel: False)  # as on a new install
    exe, x, y = _program(3)
    e = ipu.Engine(exe)
    got = []
    for k in range(2):
        e.run()
        assert (exe.native is None) == (k == 0)  # the first run walked, the second compiled the loop
        got.append((e.read_tensor(y), e.cycles))
    want = ipu.Engine(exe, compiled=True)
    for k in range(2):
        want.run()
        np.testing.assert_array_equal(got[k][0], want.read_tensor(y))
        assert got[k][1] == want.cycles
    np.testing.assert_array_equal(got[1][0], np.full(64, 6, np.float32))


def test_a_first_run_of_many_steps_compiles_the_step_loop(monkeypatch):
    monkeypatch.setattr(interpreted, "ready", lambda kernel: False)
    exe, _, y = _program(engine.WALK_BEFORE_COMPILE_STEPS)  # over the limit: its steps times the repeats
    e = ipu.Engine(exe)
    e.run()
    assert exe.native is not None
    exe, _, y = _program(1)
    e = ipu.Engine(exe, compiled=False)
    e.run()
    assert exe.native is None  # the Python walk never plans


@pytest.mark.parametrize("seed", range(3))
def test_exchange_costs_are_identical_compiled_and_in_python(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(1, 3000))
    src_off = rng.integers(0, 5000, n).astype(np.int64) * 4
    nbytes = rng.choice([4, 8, 64], n).astype(np.int64)
    src_tile = (src_off // 512) % 37
    dst_tile = rng.integers(0, 37, n).astype(np.int64)
    dst_off = np.cumsum(nbytes)
    got, body, _ = _both(costs._exchange_kernel, src_tile, dst_tile, src_off, dst_off, nbytes, 37, 65, True)
    _assert_identical(got, body)
