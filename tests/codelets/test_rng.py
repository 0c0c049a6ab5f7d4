"""RandomUniform, RandomNormal, Dropout and ModifySeed alone on a small target: bit-exact against
the NumPy references, statistics, independence from the split into vertices, cycles = poprand's
estimates."""
import numpy as np
import pytest

import ipu
from codelet_targets import vertex_target
from codelets.rng import (dropout_cycles, dropout_reference, modify_seed_cycles, modify_seed_reference,
                          normal_cycles, normal_reference, random_bits, uniform_cycles, uniform_reference)

SEED = np.array([0x1234, 0xBEEF], np.uint32)


def _random(codelet, n, dt, params, parts=1, seed=SEED, x=None, tile=1):
    """`parts` supervisor vertices on one tile, each a consecutive run of the n outputs."""
    g = ipu.Graph(vertex_target(2))
    s = g.add_variable("seed", (2,), "uint32")
    o = g.add_variable("out", (n,), dt)
    vs = [s, o]
    if x is not None:
        xi = g.add_variable("x", (n,), dt)
        vs.append(xi)
    for v in vs:
        g.set_tile_mapping(v, tile)
    cs = g.add_compute_set("cs")
    bounds = np.linspace(0, n, parts + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:]):
        conn = {"seed": s, "out": o[a:b], "first": a, **params}
        if x is not None:
            conn["in"] = xi[a:b]
        g.add_vertex(cs, codelet, tile, **conn)
    exe = ipu.compile(g, ipu.Execute(cs))
    e = ipu.Engine(exe)
    e.write_tensor(s, seed)
    if x is not None:
        e.write_tensor(xi, x)
    e.run()
    step = [st for st in exe.steps if st.kind == "compute"][0]
    return e.read_tensor(o), step


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("n", [1, 7, 4000])
def test_uniform(dt, n):
    out, step = _random("RandomUniform", n, dt, {"low": -1.0, "high": 3.0})
    np.testing.assert_array_equal(out, uniform_reference(SEED, n, -1.0, 3.0, dt))
    assert out.min() >= -1 and out.max() <= 3
    if n == 4000:
        assert abs(out.astype(np.float64).mean() - 1.0) < 0.1  # sd of the mean: 4 / sqrt(12 n) = 0.018
        assert abs(out.astype(np.float64).std() - 4 / np.sqrt(12)) < 0.05
    assert step.cycles == int(uniform_cycles(n, ipu.element_type(dt)))  # one supervisor vertex


@pytest.mark.parametrize("dt", ["float32", "float16"])
def test_normal(dt):
    n = 6000
    out, step = _random("RandomNormal", n, dt, {"mean": 2.0, "std": 0.5})
    np.testing.assert_allclose(out.astype(np.float64), normal_reference(SEED, n, 2.0, 0.5, dt).astype(np.float64),
                               rtol=1e-6, atol=1e-6)
    o = out.astype(np.float64)
    assert abs(o.mean() - 2.0) < 0.03 and abs(o.std() - 0.5) < 0.03
    z = (o - 2.0) / 0.5
    assert abs(np.mean(np.abs(z) < 1) - 0.6827) < 0.03  # the shape, not only two moments
    assert abs(np.mean(z ** 3)) < 0.15
    assert step.cycles == int(normal_cycles(n, ipu.element_type(dt)))


def test_results_do_not_depend_on_the_split_into_vertices():
    a, _ = _random("RandomUniform", 1001, "float32", {"low": 0.0, "high": 1.0}, parts=1)
    b, _ = _random("RandomUniform", 1001, "float32", {"low": 0.0, "high": 1.0}, parts=5, tile=0)
    np.testing.assert_array_equal(a, b)


def test_seeds_give_different_uncorrelated_streams():
    a, _ = _random("RandomUniform", 5000, "float32", {"low": 0.0, "high": 1.0})
    b, _ = _random("RandomUniform", 5000, "float32", {"low": 0.0, "high": 1.0}, seed=np.array([0x1234, 0xBEF0], np.uint32))
    assert not np.array_equal(a, b)
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.05
    assert abs(np.corrcoef(a[:-1], a[1:])[0, 1]) < 0.05  # neighbouring counters are independent too


def test_bits_are_balanced():
    b = random_bits(SEED, np.arange(20000))
    ones = np.unpackbits(b.view(np.uint8)).reshape(-1, 64).mean(0)
    assert np.all(np.abs(ones - 0.5) < 0.02)


@pytest.mark.parametrize("dt", ["float32", "float16"])
@pytest.mark.parametrize("ratio", [0.0, 0.1, 0.5, 0.9])
def test_dropout(dt, ratio):
    n = 5000
    x = np.random.default_rng(0).standard_normal(n).astype(dt)
    out, step = _random("Dropout", n, dt, {"ratio": ratio, "scale": 1 / (1 - ratio)}, x=x)
    np.testing.assert_array_equal(out, dropout_reference(SEED, x, ratio))
    kept = out != 0
    assert abs(kept.mean() - (1 - ratio)) < 0.03
    scaled = (x.astype(np.float32) * np.float32(1 / (1 - ratio))).astype(dt)
    np.testing.assert_array_equal(out[kept], scaled[kept])
    assert step.cycles == int(dropout_cycles(n, ipu.element_type(dt)))


def test_modify_seed():
    g = ipu.Graph(vertex_target(2))
    s = g.add_variable("seed", (2,), "uint32")
    m = g.add_variable("mod", (1,), "uint32")
    o = g.add_variable("out", (2,), "uint32")
    for v in (s, m, o):
        g.set_tile_mapping(v, 0)
    cs = g.add_compute_set("cs")
    g.add_vertex(cs, "ModifySeed", 0, seed=s, modifier=m, out=o)
    exe = ipu.compile(g, ipu.Execute(cs))
    e = ipu.Engine(exe)
    outs = []
    for mod in (0, 1, 2, 0xFFFFFFFF):
        e.write_tensor(s, SEED)
        e.write_tensor(m, np.array([mod], np.uint32))
        e.run()
        got = e.read_tensor(o)
        np.testing.assert_array_equal(got, modify_seed_reference(SEED, mod))
        assert got[0] == SEED[0] and got[1] < 2**31
        outs.append(int(got[1]))
    assert len(set(outs)) == 4
    step = [st for st in exe.steps if st.kind == "compute"][0]
    assert step.cycles == modify_seed_cycles() == 4 + 22 * 6 + 2 + 10


def test_poprand_estimates():
    # UniformSupervisor float: 4 + 4 (n + 1) / 2 + 22 x 6 (+ 4 for an odd count)
    assert uniform_cycles(10, ipu.FLOAT32) == 4 + 22 + 132
    assert uniform_cycles(11, ipu.FLOAT32) == 4 + 24 + 132 + 4
    # DropoutSupervisor half: 6 + 24 x 6 + 2 (n + 3) / 4 (+ 9 when n % 4)
    assert dropout_cycles(8, ipu.FLOAT16) == 6 + 144 + 5
