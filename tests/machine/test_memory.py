"""The memory planner: aligned addresses, reuse of dead temporaries, categories, out-of-memory."""
import numpy as np
import pytest

import ipu


def _touch(g, cs_name, var, tile=0):
    cs = g.add_compute_set(cs_name)
    g.add_vertex(cs, "ScaledAdd", tile, data=var, deltas=var, a=1.0, b=1.0)
    return ipu.Execute(cs)


def test_temporaries_with_disjoint_lifetimes_share_memory():
    g = ipu.Graph(ipu.small_target(1))
    a = g.add_variable("a", (100,), "float32", category="temporary")
    b = g.add_variable("b", (100,), "float32", category="temporary")
    g.set_tile_mapping(a, 0)
    g.set_tile_mapping(b, 0)
    exe = ipu.compile(g, ipu.Sequence(_touch(g, "ua", a), _touch(g, "ub", b)))
    assert exe.layouts[a.id].addr[0] == exe.layouts[b.id].addr[0]
    assert exe.plan.tile_data_bytes[0] == 400


def test_live_temporaries_do_not_overlap_and_are_aligned():
    g = ipu.Graph(ipu.small_target(1))
    a = g.add_variable("a", (3,), "float16", category="temporary")  # 6 bytes -> padded to 8
    b = g.add_variable("b", (5,), "float32", category="temporary")
    g.set_tile_mapping(a, 0)
    g.set_tile_mapping(b, 0)
    c = g.add_variable("c", (5,), "float32")
    g.set_tile_mapping(c, 0)
    exe = ipu.compile(g, ipu.Sequence(ipu.Copy(c, b), _touch(g, "ua", a), ipu.Copy(b, c)))
    pa, pb = int(exe.layouts[a.id].addr[0]), int(exe.layouts[b.id].addr[0])
    assert pa % 8 == 0 and pb % 8 == 0
    assert pa + 8 <= pb or pb + 20 <= pa


def test_loop_carried_temporary_stays_live_for_the_whole_loop():
    g = ipu.Graph(ipu.small_target(1))
    acc = g.add_variable("acc", (10,), "float32", category="temporary")
    tmp = g.add_variable("tmp", (10,), "float32", category="temporary")
    out = g.add_variable("out", (10,), "float32")
    for v in (acc, tmp, out):
        g.set_tile_mapping(v, 0)
    body = ipu.Sequence(ipu.Copy(acc, tmp), _touch(g, "double", tmp), ipu.Copy(tmp, acc))
    exe = ipu.compile(g, ipu.Sequence(ipu.Copy(out, acc), ipu.Repeat(3, body), ipu.Copy(acc, out)))
    # acc and tmp are both live inside the loop, so they must not share memory
    assert exe.layouts[acc.id].addr[0] != exe.layouts[tmp.id].addr[0]
    engine = ipu.Engine(exe)
    engine.write_tensor(out, np.ones(10, np.float32))
    engine.run()
    np.testing.assert_array_equal(engine.read_tensor(out), np.full(10, 8, np.float32))


def test_categories_add_up_to_tile_totals():
    g = ipu.Graph(ipu.small_target(2))
    x = g.add_variable("x", (1000,), "float32")
    g.map_linearly(x)
    k = g.add_constant("k", np.arange(10, dtype=np.float32), tile=1)
    y = g.add_variable("y", (10,), "float32")
    g.set_tile_mapping(y, 1)
    exe = ipu.compile(g, ipu.Sequence(ipu.Copy(k, y), ipu.Copy(x[:10], y)))
    cats = exe.plan.categories
    assert cats["variables"].tolist() == [2000, 2040]
    assert cats["constants"].tolist() == [0, 40]
    assert (sum(cats.values()) == exe.plan.tile_total()).all()
    assert exe.total_bytes == int(exe.plan.tile_data_bytes.sum())


def test_out_of_memory_names_the_worst_tiles():
    target = ipu.small_target(2, bytes_per_tile=4096)
    g = ipu.Graph(target)
    big = g.add_variable("big_weights", (2000,), "float32")
    g.set_tile_mapping(big, 1)
    small = g.add_variable("small", (10,), "float32")
    g.set_tile_mapping(small, 0)
    with pytest.raises(ipu.OutOfMemoryError) as err:
        ipu.compile(g, ipu.Copy(big[:10], small))
    msg = str(err.value)
    assert "tile 1" in msg and "big_weights" in msg and "4,096" in msg
    assert err.value.report[0]["tile"] == 1


def test_host_ram_is_the_simulated_bytes_in_use():
    g = ipu.Graph(ipu.GC200)
    x = g.add_variable("x", (1472 * 4,), "float32")
    g.map_linearly(x)
    engine = ipu.Engine(ipu.compile(g, ipu.Sync()))
    assert engine.memory.nbytes == 1472 * 16  # not 1472 x 624 KiB


def test_a_tensor_that_cannot_fit_is_refused_when_it_is_created():
    # the tiles' memory together is a bound no mapping can beat: refused before any per-element table
    t = ipu.small_target(4)
    capacity = t.num_tiles * t.bytes_per_tile
    g = ipu.Graph(t)
    with pytest.raises(ipu.OutOfMemoryError, match=r"temporary 'big' needs .* cannot fit however it is mapped") as e:
        g.add_variable("big", (capacity // 4 + 1,), "float32", category="temporary")
    assert e.value.categories == ["temporaries"]
    assert "big" not in [v.name for v in g.variables]
    # always-live data adds up; a temporary must fit beside it
    g.add_variable("w", (capacity // 8,), "float32")
    g.add_constant("c", np.zeros(capacity // 8, np.float32))
    with pytest.raises(ipu.OutOfMemoryError, match=r"variable 'w2' .* beside .* always-live"):
        g.add_variable("w2", (1,), "float32")
    with pytest.raises(ipu.OutOfMemoryError, match="temporary"):
        g.add_variable("x", (1,), "int8", category="temporary")
    g2 = ipu.Graph(t)
    g2.add_variable("fits", (capacity // 4,), "float32", category="temporary")  # exactly the capacity


def test_visit_order_is_the_three_key_sort():
    """place_pieces' visit order (one packed key) is np.lexsort((-size, first, tile)), ties kept."""
    from ipu.memory import _visit_order

    rng = np.random.default_rng(5)
    for n, tiles, big in [(0, 4, False), (1, 4, False), (300, 4, False), (300, 1472, False), (50, 1472, True)]:
        t = rng.integers(0, tiles, n)
        f = rng.integers(-1, 2 ** 40 if big else 9, n)  # big: the packed key would not fit, lexsort itself
        s = rng.integers(0, 5, n) * 8
        assert np.array_equal(_visit_order(t, f, s, tiles), np.lexsort((-s, f, t)))


def test_visit_reads_the_visited_pieces_off_its_keys():
    """_visit's tiles, first uses and sizes in visit order (read off the sorted keys when they
    also hold each piece's position) are those of the pieces in _visit_order."""
    from ipu.memory import _visit

    rng = np.random.default_rng(6)
    for n, tiles, top in [(0, 4, 9), (1, 4, 9), (500, 4, 9), (500, 1472, 3000), (200, 1472, 2 ** 40), (64, 3, 2 ** 45)]:
        t = rng.integers(0, tiles, n)
        f = rng.integers(-1, top, n)
        s = rng.integers(0, 5, n) * 8
        order, (vt, vf, vs) = _visit(t, f, s, tiles)
        assert np.array_equal(order, np.lexsort((-s, f, t)))
        assert np.array_equal(vt, t[order]) and np.array_equal(vf, f[order]) and np.array_equal(vs, s[order])
