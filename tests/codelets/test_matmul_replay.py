"""build_matmul replays a product it built before (ipu/replay.py) on the next layer's variables: the
graph, the compiled steps and the results are those a fresh build makes."""
import numpy as np
import pytest

import ipu
from codelets.plans.matmul_build import build_matmul


def _index(t):
    return None if t.is_identity else t.flat_index()


def _program(p):
    if isinstance(p, ipu.Sequence):
        return ("seq", p.name, [_program(q) for q in p.programs])
    if isinstance(p, ipu.Copy):
        return ("copy", p.name, p.src.name, p.dst.name, p.src.shape, p.dst.shape, _index(p.src), _index(p.dst))
    return ("execute", p.name, p.compute_set.name)


def _same(x, y):
    if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
        return x is not None and y is not None and np.array_equal(x, y)
    if isinstance(x, (list, tuple)):
        return type(x) is type(y) and len(x) == len(y) and all(_same(a, b) for a, b in zip(x, y))
    return x == y


def _graph(g):
    """Everything a build adds to a graph, by name (never by object identity)."""
    variables = [(v.name, v.shape, v.dtype.name, v.category, *(v.pieces() if v.unmapped() == 0 else ()))
                 for v in g.variables]
    sets = [(cs.name, cs.debug, [(c.codelet.name, c.tiles, tuple(v.name for v in c.field_vars), c.field_start,
                                  c.field_count, c.fp, c.ip, c.region) for c in cs.chunks]) for cs in g.compute_sets]
    return variables, sets


def _layers(memo: bool, transposed: bool, dtype="float32", layers=3, m=24, k=40, n=56, out_mapped=False):
    """`layers` products x_i @ w_i (w_i^T with `transposed`), every weight mapped linearly from
    another first tile (as the lowering spreads variables), each built under its layer's name."""
    g = ipu.Graph(ipu.small_target(16))
    prog = ipu.Sequence()
    handles = []
    for i in range(layers):
        x = g.add_variable(f"layer{i}/x", (m, k), dtype)
        w = g.add_variable(f"layer{i}/w", (n, k) if transposed else (k, n), dtype)
        out = g.add_variable(f"layer{i}/out", (m, n), dtype)
        g.map_linearly(x)
        tiles = np.roll(np.arange(16), 5 * i)
        g.map_linearly(w, tiles=tiles)
        if out_mapped:
            g.map_linearly(out, tiles=np.arange(16)[::-1])  # the same each layer: part of what is replayed
        if not memo:
            g.__dict__["_matmul_build_memo"] = {}  # nothing to replay: every layer built afresh
        prog.add(build_matmul(g, x, w.transpose() if transposed else w, out, name=f"layer{i}/matmul"))
        handles.append((x, w, out))
    return g, prog, handles


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("dtype", ["float32", "float16"])
@pytest.mark.parametrize("out_mapped", [False, True])
def test_replayed_layers_match_fresh_builds(transposed, dtype, out_mapped):
    g1, p1, h1 = _layers(True, transposed, dtype, out_mapped=out_mapped)
    g2, p2, h2 = _layers(False, transposed, dtype, out_mapped=out_mapped)
    assert len(g1.__dict__["_matmul_build_memo"]) == 1  # the first layer's build, replayed twice
    assert _same(_graph(g1), _graph(g2))
    assert _same(_program(p1), _program(p2))
    e1, e2 = ipu.compile(g1, p1), ipu.compile(g2, p2)
    assert [(s.name, s.cycles) for s in e1.steps] == [(s.name, s.cycles) for s in e2.steps]
    assert np.array_equal(e1.plan.tile_total(), e2.plan.tile_total())
    assert all(np.array_equal(e1.layouts[a.id].addr, e2.layouts[b.id].addr) for a, b in zip(g1.variables, g2.variables)
               if a.id in e1.layouts)
    rng = np.random.default_rng(0)
    engines = [ipu.Engine(e1), ipu.Engine(e2)]
    values = [(rng.standard_normal(x.shape).astype(dtype), rng.standard_normal(w.shape).astype(dtype))
              for x, w, _ in h1]
    for eng, handles in zip(engines, (h1, h2)):
        for (x, w, _), (xv, wv) in zip(handles, values):
            eng.write_tensor(x, xv)
            eng.write_tensor(w, wv)
        eng.run()
    for (x, w, out), (_, _, out2), (xv, wv) in zip(h1, h2, values):
        got = engines[0].read_tensor(out)
        assert np.array_equal(got, engines[1].read_tensor(out2))
        ref = xv.astype(np.float32) @ (wv.T if transposed else wv).astype(np.float32)
        np.testing.assert_allclose(got.astype(np.float32), ref, rtol=2e-2 if dtype == "float16" else 1e-5, atol=1e-2)


def test_another_index_or_shape_is_built_afresh():
    g = ipu.Graph(ipu.small_target(16))
    x = g.add_variable("x", (24, 40))
    g.map_linearly(x)
    ws = [g.add_variable(f"w{i}", (40, 56)) for i in range(2)]
    for w in ws:
        g.map_linearly(w)
    outs = [g.add_variable(f"o{i}", s, category=ipu.TEMPORARY) for i, s in enumerate([(24, 56), (24, 28)])]
    build_matmul(g, x, ws[0], outs[0], name="a")
    build_matmul(g, x, ws[1][:, ::2], outs[1], name="b")  # a strided view: another index, another product
    assert len(g.__dict__["_matmul_build_memo"]) == 2
