"""Liveness through calls, loops and branches (ipu/timeline.py) and the planner that uses it."""
import numpy as np

import ipu


def _temps(g, names, n=64, tile=0):
    out = []
    for name in names:
        v = g.add_variable(name, (n,), "float32", category="temporary")
        g.set_tile_mapping(v, tile)
        out.append(v)
    return out


def _double(g, name, var, tile=0):
    cs = g.add_compute_set(name)
    g.add_vertex(cs, "ScaledAdd", tile, data=var, deltas=var, a=1.0, b=1.0)
    return ipu.Execute(cs)


def _chain_function(g):
    """A function whose temporaries form a chain: a -> b -> c -> d, each doubled on the way."""
    arg, a, b, c, d, res = _temps(g, ["arg", "a", "b", "c", "d", "res"])
    body = ipu.Sequence(ipu.Copy(arg, a), _double(g, "da", a), ipu.Copy(a, b), _double(g, "db", b),
                        ipu.Copy(b, c), _double(g, "dc", c), ipu.Copy(c, d), ipu.Copy(d, res))
    return g.add_function(body, "chain"), arg, res, (a, b, c, d)


def _stack(calls: int):
    """x -> chain -> chain -> ... (`calls` calls of one function), a main-graph temporary in between."""
    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (64,), "float32")
    g.set_tile_mapping(x, 0)
    f, arg, res, inner = _chain_function(g)
    seq = ipu.Sequence()
    cur = x
    for i in range(calls):
        seq.add(ipu.Copy(cur, arg))
        seq.add(ipu.Call(f))
        (h,) = _temps(g, [f"h{i}"])
        seq.add(ipu.Copy(res, h))
        cur = h
    seq.add(ipu.Copy(cur, x))
    return g, seq, x, inner


def test_temporaries_of_a_function_called_twice_overlap_within_each_call():
    one, two, four = (ipu.compile(*_stack(n)[:2]) for n in (1, 2, 4))
    g2, p2, x, (a, b, c, d) = _stack(2)
    exe = ipu.compile(g2, p2)
    # inside a call, a is dead once b is written: a and c (and b and d) share bytes
    addr = {v.name: int(exe.layouts[v.id].addr[0]) for v in (a, b, c, d)}
    assert addr["a"] == addr["c"] and addr["b"] == addr["d"], addr
    # one call needs two 256-byte slots; the value handed from one call to the next needs a third
    # (it meets the result slot of one call and the argument slot of the next). The old planner kept
    # every temporary of the function live from the first call to the last: 7 slots for two calls.
    temps = [int(e.plan.categories["temporaries"][0]) for e in (one, two, four)]
    assert temps == [512, 768, 768], temps
    engine = ipu.Engine(exe)
    engine.write_tensor(x, np.arange(64, dtype=np.float32))
    engine.run()
    np.testing.assert_array_equal(engine.read_tensor(x), np.arange(64, dtype=np.float32) * 64)


def test_each_call_is_a_segment_of_the_timeline():
    g, p, _, (a, _, _, d) = _stack(3)
    tl = ipu.timeline.Timeline()
    tl.walk(p)
    segs = tl.segments()
    assert len(segs[a.id]) == 3 and len(segs[d.id]) == 3
    # calls in order, each segment inside its own call
    assert all(s1[1] < s2[0] for s1, s2 in zip(segs[a.id], segs[a.id][1:]))
    exe = ipu.compile(g, p)
    assert len(exe.liveness) == tl.pos


def test_value_written_in_one_branch_arm_stays_live_after_the_branch():
    """A write inside a branch arm may not run: it must not free the value written before."""
    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (64,), "float32")
    flag = g.add_variable("flag", (1,), "int32")
    for v in (x, flag):
        g.set_tile_mapping(v, 0)
    t, other = _temps(g, ["t", "other"])
    prog = ipu.Sequence(
        ipu.Copy(x, t),  # t = x
        ipu.If(flag, ipu.Sequence(ipu.Copy(x, t), _double(g, "d", t)),  # t = 2x, only if flag
               ipu.Sequence(ipu.Copy(x, other), _double(g, "o", other), ipu.Copy(other, x))),
        ipu.Copy(t, x),
    )
    exe = ipu.compile(g, prog)
    assert exe.layouts[t.id].addr[0] != exe.layouts[other.id].addr[0]
    for f, expect in ((1, 2.0), (0, 1.0)):
        engine = ipu.Engine(exe)
        engine.write_tensor(x, np.ones(64, np.float32))
        engine.write_tensor(flag, np.array([f], np.int32))
        engine.run()
        # flag 1: t = 2x -> x = 2; flag 0: x doubled through `other`, then x = t = 1 (t kept)
        np.testing.assert_array_equal(engine.read_tensor(x), np.full(64, expect, np.float32))


def test_write_inside_a_loop_that_may_not_run_keeps_the_old_value():
    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (64,), "float32")
    g.set_tile_mapping(x, 0)
    t, u = _temps(g, ["t", "u"])
    prog = ipu.Sequence(ipu.Copy(x, t), ipu.Repeat(0, ipu.Sequence(ipu.Copy(x, u), ipu.Copy(u, t))),
                        ipu.Copy(t, x))
    tl = ipu.timeline.Timeline()
    tl.walk(prog)
    assert len(tl.segments()[t.id]) == 1


def test_temporary_written_afresh_in_each_iteration_is_not_carried():
    """A temporary written whole at the top of a loop body lives only within an iteration."""
    g = ipu.Graph(ipu.small_target(1))
    acc = g.add_variable("acc", (64,), "float32")
    g.set_tile_mapping(acc, 0)
    t, u = _temps(g, ["t", "u"])
    body = ipu.Sequence(ipu.Copy(acc, t), _double(g, "dt", t), ipu.Copy(t, acc),
                        ipu.Copy(acc, u), _double(g, "du", u), ipu.Copy(u, acc))
    exe = ipu.compile(g, ipu.Repeat(3, body))
    assert exe.layouts[t.id].addr[0] == exe.layouts[u.id].addr[0]
    engine = ipu.Engine(exe)
    engine.write_tensor(acc, np.ones(64, np.float32))
    engine.run()
    np.testing.assert_array_equal(engine.read_tensor(acc), np.full(64, 64.0, np.float32))


def test_partial_writes_keep_one_segment():
    """Halves written by two copies: neither replaces the whole variable, so no segment ends."""
    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (64,), "float32")
    g.set_tile_mapping(x, 0)
    (t,) = _temps(g, ["t"])
    prog = ipu.Sequence(ipu.Copy(x, t), ipu.Copy(x[:32], t[:32]), ipu.Copy(x[32:], t[32:]), ipu.Copy(t, x))
    tl = ipu.timeline.Timeline()
    tl.walk(prog)
    assert tl.segments()[t.id] == [(0, 3)]


def test_rerun_starts_what_it_created_afresh():
    """An op's programs run again (ipu.Rerun, PopART's implicit recomputation): the variables the
    op created (`fresh`) are dead between the two runs even when it writes them in pieces, so a
    temporary used in between shares their bytes; inputs keep one segment; values are right."""
    g = ipu.Graph(ipu.small_target(1))
    x, out, out2 = (g.add_variable(n, (64,), "float32") for n in ("x", "out", "out2"))
    for v in (x, out, out2):
        g.set_tile_mapping(v, 0)
    p, y, t = _temps(g, ["p", "y", "t"])
    op = [ipu.Copy(x[:32], p[:32]), ipu.Copy(x[32:], p[32:]), ipu.Copy(p, y), _double(g, "dy", y)]
    between = [ipu.Copy(y, out2), ipu.Copy(x, t), _double(g, "dt", t), _double(g, "dt2", t), ipu.Copy(t, out2)]
    after = [ipu.Copy(y, out)]  # out = 2x, y recomputed; out2 = 4x

    def timeline(rerun):
        tl = ipu.timeline.Timeline()
        tl.walk(ipu.Sequence(*op, *between, rerun, *after))
        return tl.segments()

    segs = timeline(ipu.Rerun(*op, fresh={p.id, y.id}))
    assert len(segs[p.id]) == 2 and len(segs[y.id]) == 2 and len(segs[x.id]) == 1
    assert len(timeline(ipu.Sequence(*op))[p.id]) == 1  # written in halves: one segment without Rerun
    exe = ipu.compile(g, ipu.Sequence(*op, *between, ipu.Rerun(*op, fresh={p.id, y.id}), *after))
    assert exe.layouts[t.id].addr[0] in (exe.layouts[p.id].addr[0], exe.layouts[y.id].addr[0])
    engine = ipu.Engine(exe)
    engine.write_tensor(x, np.arange(64, dtype=np.float32))
    engine.run()
    np.testing.assert_array_equal(engine.read_tensor(out), 2 * np.arange(64, dtype=np.float32))
    np.testing.assert_array_equal(engine.read_tensor(out2), 4 * np.arange(64, dtype=np.float32))
