"""A copy of the same views of variables laid out as an earlier copy's, each tile's pieces at other
addresses, takes the earlier copy's table shifted (ipu/exchange.py): the same steps as a fresh
compile, cycles, exchange code and runs."""
import numpy as np

import ipu
from ipu import exchange


def _layers(layers=3):
    g = ipu.Graph(ipu.small_target(8))
    rng = np.random.default_rng(1)
    gather = rng.permutation(96)[:64]  # a gather, cut into runs where it jumps
    prog = ipu.Sequence()
    pairs = []
    for i in range(layers):
        x = g.add_variable(f"x{i}", (96,))
        y = g.add_variable(f"y{i}", (64,))
        z = g.add_variable(f"z{i}", (8, 16), category=ipu.TEMPORARY)
        g.map_linearly(x)
        g.map_linearly(y, tiles=[7, 6, 5, 4, 3, 2, 1, 0])
        g.map_linearly(z)
        prog.add(ipu.Copy(ipu.Tensor(x, gather.copy(), (64,)), y, name=f"gather{i}"))
        row = np.tile(np.arange(16), 8)  # the first 16 elements of y to every row of z: a multicast
        prog.add(ipu.Copy(ipu.Tensor(y, row, (8, 16)), z, name=f"broadcast{i}"))
        prog.add(ipu.Copy(z.reshape(128)[::2], ipu.Tensor(x, np.arange(64) + 32, (64,)), name=f"back{i}"))
        pairs.append((x, y))
    return g, prog, pairs


def _steps(exe):
    out = []
    for s in exe.steps:
        runs = None if s.payload is None else tuple(np.asarray(r).tolist() for r in s.payload.runs)
        out.append((s.name, s.cycles, None if s.tile_cycles is None else np.asarray(s.tile_cycles).tolist(), runs,
                    s.bytes_moved))
    return out


def test_shifted_copies_compile_as_fresh_ones(monkeypatch):
    g, prog, pairs = _layers()
    shifted = []
    original = exchange._Shape.shifted

    def watch(self, comp, src, dst):
        r = original(self, comp, src, dst)
        shifted.append(r is not None)
        return r

    monkeypatch.setattr(exchange._Shape, "shifted", watch)
    exe = ipu.compile(g, prog)
    assert sum(shifted) >= 4  # the later layers' gathers and broadcasts at least
    g2, prog2, pairs2 = _layers()
    monkeypatch.setattr(exchange._Shape, "shifted", lambda self, comp, src, dst: None)
    fresh = ipu.compile(g2, prog2)
    assert _steps(exe) == _steps(fresh)
    assert np.array_equal(exe.plan.categories["exchange_code"], fresh.plan.categories["exchange_code"])
    engines = [ipu.Engine(exe), ipu.Engine(fresh)]
    for eng, ps in zip(engines, (pairs, pairs2)):
        for i, (x, _) in enumerate(ps):
            eng.write_tensor(x, np.arange(96, dtype=np.float32) * (i + 1))
        eng.run()
    for (x, y), (x2, y2) in zip(pairs, pairs2):
        assert np.array_equal(engines[0].read_tensor(x), engines[1].read_tensor(x2))
        assert np.array_equal(engines[0].read_tensor(y), engines[1].read_tensor(y2))


def test_only_pieces_moved_tile_by_tile_are_shifted():
    from ipu.executable import Layout

    g = ipu.Graph(ipu.small_target(4))
    v = g.add_variable("v", (32,))
    starts, stops, tiles = np.array([0, 8, 16, 24]), np.array([8, 16, 24, 32]), np.array([0, 1, 0, 1])

    def layout(addr, t=tiles):
        return Layout(v, starts, stops, t, np.array(addr))

    first = layout([0, 1000, 32, 1032])
    shift = exchange._Shape._shift(first, layout([64, 1200, 96, 1232]), 4)  # tile 0 by 64, tile 1 by 200
    assert shift is not None and shift[:2].tolist() == [64, 200]
    assert exchange._Shape._shift(first, layout([64, 1200, 128, 1232]), 4) is None  # tile 0's pieces apart
    assert exchange._Shape._shift(first, layout([0, 1000, 32, 1032], np.array([0, 1, 2, 1])), 4) is None
