"""Every collective against NumPy on per-replica data, on 2, 4 and 8 replicas, over all replicas and
over groupings."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
from replication_helpers import groups_of, run_replicated

C = ops.collectives

NP_REDUCE = {"add": lambda a: a.sum(0), "mean": lambda a: a.mean(0), "max": lambda a: a.max(0),
             "min": lambda a: a.min(0), "mul": lambda a: a.mean(0),  # PopXL 3.x runs 'mul' as MEAN
             "square_add": lambda a: (a * a).sum(0)}


def _groupings(R):
    out = [None, (1, R)]
    if R >= 4:
        out += [(1, 2), (2, R // 2), (R // 2, 2)]
    if R == 8:
        out += [(2, 2), (1, 1)]
    return out


def _rg(ir, spec):
    return None if spec is None else ir.replica_grouping(*spec)


@pytest.mark.parametrize("R", [2, 4, 8])
def test_all_reduce_all_gather_reduce_scatter_against_numpy(R):
    rng = np.random.default_rng(R)
    x = rng.normal(size=(R, 3, 5)).astype(np.float32)
    specs = _groupings(R)

    def build(ir, t):
        outs = {}
        for gi, spec in enumerate(specs):
            rg = _rg(ir, spec)
            for op in NP_REDUCE:
                outs[f"ar_{op}_{gi}"] = C.replicated_all_reduce(t, op, rg)
            outs[f"ag0_{gi}"] = C.replicated_all_gather(t, 0, rg)
            outs[f"ag1_{gi}"] = C.replicated_all_gather(t, axis=1, group=rg)
            outs[f"agn_{gi}"] = C.replicated_all_gather(t, group=rg, output_shape="new_axis")
            outs[f"rs_add_{gi}"] = C.replicated_reduce_scatter(t, "add", rg)
            outs[f"rs_max_{gi}"] = C.replicated_reduce_scatter(t, "max", rg)
            outs[f"sl_{gi}"] = C.replica_sharded_slice(t, rg)
        return outs

    out, _ = run_replicated(R, build, [x])
    for gi, spec in enumerate(specs):
        assignment = popxl.Ir(replication=R).replica_grouping(*(spec or ()))
        groups = groups_of(assignment.assignment)
        n = len(groups[0])
        for members in groups:
            xs = x[members]
            flat = xs.reshape(n, -1)
            m = -(-flat.shape[1] // n)
            pad = np.zeros((n, n * m), np.float32)
            pad[:, :flat.shape[1]] = flat
            for k, r in enumerate(members):
                for op, f in NP_REDUCE.items():
                    np.testing.assert_allclose(out[f"ar_{op}_{gi}"][r], f(xs), rtol=1e-5, atol=1e-6,
                                               err_msg=f"all_reduce {op} {spec} replica {r}")
                np.testing.assert_array_equal(out[f"ag0_{gi}"][r], np.concatenate(list(xs), 0))
                np.testing.assert_array_equal(out[f"ag1_{gi}"][r], np.concatenate(list(xs), 1))
                np.testing.assert_array_equal(out[f"agn_{gi}"][r], xs)
                np.testing.assert_allclose(out[f"rs_add_{gi}"][r], pad.sum(0)[k * m:(k + 1) * m], rtol=1e-5, atol=1e-6)
                np.testing.assert_array_equal(out[f"rs_max_{gi}"][r], pad.max(0)[k * m:(k + 1) * m])
                np.testing.assert_array_equal(out[f"sl_{gi}"][r], pad[k, k * m:(k + 1) * m])


@pytest.mark.parametrize("R", [2, 4])
def test_types_inplace_and_shapes(R):
    rng = np.random.default_rng(1)
    xi = rng.integers(-50, 50, (R, 6)).astype(np.int32)
    xh = rng.normal(size=(R, 8)).astype(np.float16)
    xb = rng.random((R, 4)) > 0.5

    def build(ir, ti, th, tb):
        outs = {"int_add": C.replicated_all_reduce(ti), "int_max": C.replicated_all_reduce(ti, "max"),
                "half_add": C.replicated_all_reduce(th), "half_gather": C.replicated_all_gather(th),
                "and": C.replicated_all_reduce(tb, "and"), "or": C.replicated_all_reduce(tb, "or")}
        v = popxl.variable(np.arange(5, dtype=np.float32), name="v")
        y = C.replicated_all_reduce_(v * 1.0, "add")  # in place on an intermediate
        outs["inplace"] = y
        sl = C.replicated_slice(ops.reshape(th, (4, 2)) if R == 2 else ops.reshape(th, (R, 8 // R)), 0)
        outs["rslice0"] = sl
        return outs

    out, _ = run_replicated(R, build, [xi, xh, xb])
    for r in range(R):
        np.testing.assert_array_equal(out["int_add"][r], xi.sum(0))
        np.testing.assert_array_equal(out["int_max"][r], xi.max(0))
        np.testing.assert_allclose(out["half_add"][r].astype(np.float32), xh.astype(np.float32).sum(0), rtol=2e-3)
        assert out["half_add"].dtype == np.float16
        np.testing.assert_array_equal(out["half_gather"][r], xh.reshape(-1))
        np.testing.assert_array_equal(out["and"][r], xb.all(0))
        np.testing.assert_array_equal(out["or"][r], xb.any(0))
        np.testing.assert_array_equal(out["inplace"][r], np.arange(5) * R)
        if R == 2:
            np.testing.assert_array_equal(out["rslice0"][r], xh[r].reshape(4, 2)[2 * r:2 * r + 2])
        else:  # one row per replica: the sliced axis is dropped
            np.testing.assert_array_equal(out["rslice0"][r], xh[r].reshape(R, 8 // R)[r])


@pytest.mark.parametrize("R", [2, 4])
def test_replicated_slice_along_an_axis(R):
    x = np.arange(R * 3 * 2 * R * 5, dtype=np.float32).reshape(R, 3, 2 * R, 5)

    def build(ir, t):
        return {"a1": C.replicated_slice(t, 1),
                "a0": C.replicated_slice(ops.reshape(t, (2 * R, 15)), axis=0, group=ir.replica_grouping(1, R))}

    out, _ = run_replicated(R, build, [x])
    for r in range(R):
        np.testing.assert_array_equal(out["a1"][r], x[r][:, 2 * r:2 * r + 2, :])
        np.testing.assert_array_equal(out["a0"][r], x[r].reshape(2 * R, 15)[2 * r:2 * r + 2])


def test_meta_shape_gather_and_padding():
    """A shard of a 7-element tensor over 4 replicas is 2 elements; gathering with the meta shape
    drops the padding."""
    R = 4
    x = np.arange(R * 7, dtype=np.float32).reshape(R, 7)

    def build(ir, t):
        s = C.replicated_reduce_scatter(t, "add", configure_output_for_replicated_tensor_sharding=True)
        assert s.shape == (2,) and s.meta_shape == (7,)
        return {"shard": s, "full": C.replicated_all_gather(s)}

    out, _ = run_replicated(R, build, [x])
    for r in range(R):
        np.testing.assert_array_equal(out["full"][r], x.sum(0))
        np.testing.assert_array_equal(out["shard"][r], np.pad(x.sum(0), (0, 1))[2 * r:2 * r + 2])


def test_all_gather_with_the_sdk_3_0_signature():
    """replicated_all_gather(t, group), as SDK 3.0 and some documents call it: the output is
    (group_size, *t.shape) (or the meta shape of a shard)."""
    R = 4
    x = np.arange(R * 2, dtype=np.float32).reshape(R, 2)

    def build(ir, t):
        return {"g": C.replicated_all_gather(t, ir.replica_grouping(1, 2)),
                "s": C.replicated_all_gather(C.replica_sharded_slice(t), ir.replica_grouping())}

    out, _ = run_replicated(R, build, [x])
    np.testing.assert_array_equal(out["g"][3], x[2:4])
    np.testing.assert_array_equal(out["s"][1], [x[0, 0], x[1, 1]])  # replica r holds element r of its x


def test_errors():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        x = popxl.variable(np.zeros((3, 4), np.float32))
        i = popxl.variable(np.zeros(3, np.int32))
        with pytest.raises(ValueError, match="Not a valid op"):
            C.replicated_all_reduce(x, "median")
        with pytest.raises(TypeError, match="mean"):
            C.replicated_all_reduce(i, "mean")
        with pytest.raises(ValueError, match="equally divide"):
            C.replicated_slice(x, 0)
        with pytest.raises(ValueError, match="meta shape"):
            C.replicated_all_gather(x, output_shape="meta_shape")
        with pytest.raises(ValueError):
            C.replicated_all_gather(x, output_shape="sideways")
        with pytest.raises(ValueError, match="over 8 replicas"):
            C.replicated_all_reduce(x, group=popxl.Ir(replication=8).replica_grouping())
