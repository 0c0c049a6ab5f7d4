"""random_uniform, random_normal, dropout, shaped_dropout, create_random_seed / split_random_seed
through popxl.Session: statistics, determinism, seeds, keep rates, independence from the target."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
from codelets.rng import dropout_reference, modify_seed_reference, uniform_reference

from helpers import run_popxl

SEED = np.array([7, 1234567], np.uint32)
SHAPES = [(1,), (13,), (97, 5), (3, 7, 11)]


@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16])
@pytest.mark.parametrize("shape", SHAPES)
def test_random_uniform(dt, shape):
    out, _ = run_popxl(lambda s: ops.random_uniform(s, shape, low=-3.0, high=5.0, dtype=dt), [SEED])
    assert out.shape == shape and out.dtype == dt.as_numpy()
    # counter-based: element i is a function of the seed and i only
    np.testing.assert_array_equal(out.reshape(-1), uniform_reference(SEED, out.size, -3.0, 5.0, dt.as_numpy()))
    assert out.min() >= -3 and out.max() <= 5


def test_uniform_statistics_and_independence_from_the_tile_mapping():
    shape = (200, 50)
    a, _ = run_popxl(lambda s: ops.random_uniform(s, shape), [SEED], target="small:6")
    b, _ = run_popxl(lambda s: ops.random_uniform(s, shape), [SEED], target="small:3")
    np.testing.assert_array_equal(a, b)
    assert abs(a.mean() - 0.5) < 0.01 and abs(a.std() - 1 / np.sqrt(12)) < 0.01
    assert abs(np.mean(a < 0.25) - 0.25) < 0.02


@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16])
def test_random_normal_statistics(dt):
    out, _ = run_popxl(lambda s: ops.random_normal(s, (100, 80), mean=-1.0, std=3.0, dtype=dt), [SEED])
    o = out.astype(np.float64)
    assert abs(o.mean() + 1.0) < 0.1 and abs(o.std() - 3.0) < 0.1
    assert abs(np.mean(np.abs(o + 1.0) < 3.0) - 0.6827) < 0.02


def test_same_seed_same_numbers_other_seed_other_numbers():
    a, _ = run_popxl(lambda s: ops.random_normal(s, (64, 3)), [SEED])
    b, _ = run_popxl(lambda s: ops.random_normal(s, (64, 3)), [SEED])
    c, _ = run_popxl(lambda s: ops.random_normal(s, (64, 3)), [SEED + np.uint32(1)])
    np.testing.assert_array_equal(a, b)
    assert not np.array_equal(a, c)


def test_seed_from_a_stream_changes_between_runs():
    ir = popxl.Ir()
    with ir.main_graph:
        s_in = popxl.h2d_stream((2,), popxl.uint32)
        seed = ops.host_load(s_in)
        r = ops.random_uniform(seed, (10,))
        s_out = popxl.d2h_stream(r.shape, r.dtype)
        ops.host_store(s_out, r)
    session = popxl.Session(ir, "ipu_model")
    with session:
        a = session.run({s_in: SEED})[s_out]
        b = session.run({s_in: SEED + np.uint32(5)})[s_out]
        c = session.run({s_in: SEED})[s_out]
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(a, c)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("p", [0.0, 0.25, 0.6])
@pytest.mark.parametrize("shape", [(1,), (5000,), (61, 83)])
def test_dropout(dt, p, shape):
    x = (np.random.default_rng(1).standard_normal(shape) + 4).astype(dt)  # never 0 itself
    out, _ = run_popxl(lambda a, s: ops.dropout(a, s, p), [x, SEED])
    np.testing.assert_array_equal(out, dropout_reference(SEED, x, p))
    kept = out != 0
    if x.size > 1000:
        assert abs(kept.mean() - (1 - p)) < 0.02
    np.testing.assert_array_equal(out[kept], (x.astype(np.float32) * np.float32(1 / (1 - p))).astype(dt)[kept])
    if p == 0.0:
        np.testing.assert_array_equal(out, x)


def test_shaped_dropout_drops_whole_broadcast_lines():
    x = np.ones((40, 300), np.float32)
    out, _ = run_popxl(lambda a, s: ops.shaped_dropout(a, s, (1, 300), 0.5), [x, SEED])
    col_kept = out[0] != 0
    assert np.all((out != 0) == col_kept[None, :])  # a column is kept or dropped as a whole
    np.testing.assert_array_equal(out[:, col_kept], 2.0)
    assert 0.35 < col_kept.mean() < 0.65


def test_create_and_split_random_seed():
    outs, _ = run_popxl(lambda s: ops.split_random_seed(s, 3), [SEED])
    for i, o in enumerate(outs):
        np.testing.assert_array_equal(o, modify_seed_reference(SEED, i))
        assert o[0] == SEED[0]
    assert len({int(o[1]) for o in outs}) == 3
    out, _ = run_popxl(lambda s, m: ops.create_random_seed(s, m), [SEED, np.array(9, np.uint32)])
    np.testing.assert_array_equal(out, modify_seed_reference(SEED, 9))


def test_split_seeds_give_independent_streams():
    def build(s):
        s1, s2 = ops.split_random_seed(s, 2)
        return ops.random_uniform(s1, (4000,)), ops.random_uniform(s2, (4000,))

    (a, b), _ = run_popxl(build, [SEED])
    assert abs(np.corrcoef(a, b)[0, 1]) < 0.05
