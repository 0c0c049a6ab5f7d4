"""Control programs, host streams, shared functions and the errors of bad programs."""
import numpy as np
import pytest

import ipu


def _graph(tiles=2):
    return ipu.Graph(ipu.small_target(tiles))


def _add_one(g, var, tile=0):
    one = g.add_constant(f"one_{var.name}", np.ones(var.numel, var.dtype.numpy), tile=tile)
    cs = g.add_compute_set(f"inc_{var.name}")
    g.add_vertex(cs, "ScaledAdd", tile, data=var, deltas=one, a=1.0, b=1.0)
    return ipu.Execute(cs)


def test_repeat_runs_the_body_n_times_and_counts_cycles():
    g = _graph()
    x = g.add_variable("x", (8,), "float32")
    g.set_tile_mapping(x, 0)
    inc = _add_one(g, x)
    exe = ipu.compile(g, ipu.Repeat(5, inc))
    e = ipu.Engine(exe)
    e.write_tensor(x, np.zeros(8, np.float32))
    cycles = e.run()
    np.testing.assert_array_equal(e.read_tensor(x), np.full(8, 5, np.float32))
    assert cycles == 5 * exe.steps[0].cycles
    assert len(e.log) == 5


@pytest.mark.parametrize("cond,expected", [(1, 1.0), (0, -1.0)])
def test_if_chooses_a_branch(cond, expected):
    g = _graph()
    c = g.add_variable("c", (), "int32")
    x = g.add_variable("x", (4,), "float32")
    g.set_tile_mapping(c, 1)
    g.set_tile_mapping(x, 0)
    plus = g.add_constant("plus", np.ones(4, np.float32), tile=0)
    minus = g.add_constant("minus", -np.ones(4, np.float32), tile=0)
    e = ipu.Engine(ipu.compile(g, ipu.If(c, ipu.Copy(plus, x), ipu.Copy(minus, x))))
    e.write_tensor(c, np.int32(cond))
    e.run()
    np.testing.assert_array_equal(e.read_tensor(x), np.full(4, expected, np.float32))


def test_switch_with_default():
    g = _graph()
    c = g.add_variable("c", (1,), "int32")
    x = g.add_variable("x", (2,), "float32")
    g.set_tile_mapping(c, 0)
    g.set_tile_mapping(x, 0)
    consts = [g.add_constant(f"k{i}", np.full(2, i, np.float32), tile=0) for i in range(3)]
    prog = ipu.Switch(c, {0: ipu.Copy(consts[0], x), 1: ipu.Copy(consts[1], x)}, default=ipu.Copy(consts[2], x))
    e = ipu.Engine(ipu.compile(g, prog))
    for value, want in [(0, 0), (1, 1), (7, 2)]:
        e.write_tensor(c, [value])
        e.run()
        assert e.read_tensor(x).tolist() == [want, want]


def test_call_compiles_a_function_once():
    g = _graph()
    x = g.add_variable("x", (3,), "float32")
    g.set_tile_mapping(x, 0)
    f = g.add_function(_add_one(g, x), "inc")
    exe = ipu.compile(g, ipu.Sequence(ipu.Call(f), ipu.Call(f), ipu.Call(f)))
    assert sum(s.kind == "compute" for s in exe.steps) == 1
    e = ipu.Engine(exe)
    e.write_tensor(x, np.zeros(3, np.float32))
    e.run()
    assert e.read_tensor(x).tolist() == [3, 3, 3]


def test_host_streams_move_one_element_per_transfer():
    g = _graph(3)
    x = g.add_variable("x", (6,), "float32", category="temporary")
    g.map_linearly(x)
    inp = g.add_host_to_device_stream("in", (6,), "float32")
    out = g.add_device_to_host_stream("out", (6,), "float32")
    body = ipu.Sequence(ipu.HostToDevice(inp, x), ipu.DeviceToHost(x, out))
    exe = ipu.compile(g, ipu.Repeat(3, body))
    e = ipu.Engine(exe)
    data = np.arange(18, dtype=np.float32).reshape(3, 6)
    result = np.zeros((3, 6), np.float32)
    e.connect_stream("in", data)
    e.connect_stream("out", result)
    e.run()
    np.testing.assert_array_equal(result, data)
    h2d = [s for s in exe.steps if s.kind == "host_to_device"][0]
    assert h2d.cycles > 0 and h2d.bytes_moved == 24


def test_unconnected_stream_is_a_clear_error():
    g = _graph()
    x = g.add_variable("x", (2,), "float32")
    g.set_tile_mapping(x, 0)
    s = g.add_host_to_device_stream("in", (2,), "float32")
    e = ipu.Engine(ipu.compile(g, ipu.HostToDevice(s, x)))
    with pytest.raises(ipu.StreamError, match="connect_stream"):
        e.run()


def test_vertex_touching_another_tiles_memory_is_refused():
    g = _graph()
    x = g.add_variable("x", (8,), "float32")
    g.set_tile_mapping(x, 1)
    cs = g.add_compute_set("bad")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=x, a=1.0, b=1.0)
    with pytest.raises(ipu.CompileError, match=r"tile 0 .* live on tile\(s\) \[1\].*Copy"):
        ipu.compile(g, ipu.Execute(cs))


def test_unmapped_tensor_is_a_clear_error():
    g = _graph()
    x = g.add_variable("x", (8,), "float32")
    g.set_tile_mapping(x[:4], 0)
    with pytest.raises(ipu.MappingError, match="4 of 8 elements without a tile mapping"):
        ipu.compile(g, ipu.Sync())


def test_copy_through_views_transposes():
    g = _graph(4)
    a = g.add_variable("a", (3, 5), "int32")
    b = g.add_variable("b", (5, 3), "int32")
    g.map_linearly(a)
    g.map_linearly(b)
    e = ipu.Engine(ipu.compile(g, ipu.Copy(a.transpose(), b)))
    data = np.arange(15, dtype=np.int32).reshape(3, 5)
    e.write_tensor(a, data)
    e.run()
    np.testing.assert_array_equal(e.read_tensor(b), data.T)


def test_overlapping_copy_within_one_variable():
    g = _graph(1)
    a = g.add_variable("a", (6,), "float32")
    g.set_tile_mapping(a, 0)
    e = ipu.Engine(ipu.compile(g, ipu.Copy(a[:5], a[1:])))
    e.write_tensor(a, np.arange(6, dtype=np.float32))
    e.run()
    assert e.read_tensor(a).tolist() == [0, 0, 1, 2, 3, 4]


def test_replicas_run_the_same_program_on_their_own_memory():
    g = _graph()
    x = g.add_variable("x", (4,), "float32")
    g.set_tile_mapping(x, 0)
    e = ipu.Engine(ipu.compile(g, _add_one(g, x)), replicas=3)
    for r in range(3):
        e.write_tensor(x, np.full(4, r, np.float32), replica=r)
    e.run()
    assert [e.read_tensor(x, r)[0] for r in range(3)] == [1, 2, 3]


def test_map_linearly_refuses_a_tile_the_target_does_not_have():
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (8,), "float32")
    for tiles, bad in (([0, 4], 4), ([-1, 2], -1), ([3, 9, 7], 9)):
        with pytest.raises(ipu.MappingError, match=f"tile {bad} does not exist on .*tiles are 0..3"):
            g.map_linearly(x, tiles=tiles)
    g.map_linearly(x, tiles=[3, 2])
    assert sorted(set(x.variable.pieces()[2].tolist())) == [2, 3]
