"""Collectives, groupings, variables, RTS and remote variables across real MPI instances
(poprun with 2 and 4 instances), checked against NumPy and bitwise against one process running
every replica."""
import os

import numpy as np
import pytest

from poprun_helpers import HERE, poprun
from programs import REDUCE_OPS, data, groupings, run

NP_REDUCE = {"add": lambda a: a.sum(0), "mean": lambda a: a.mean(0), "max": lambda a: a.max(0),
             "min": lambda a: a.min(0), "mul": lambda a: a.mean(0),  # PopXL 3.x runs 'mul' as MEAN
             "square_add": lambda a: (a * a).sum(0)}
LAUNCHES = [pytest.param((2, 4), id="2-instances-4-replicas"), pytest.param((4, 4), id="4-instances-4-replicas"),
            pytest.param((4, 8), id="4-instances-8-replicas", marks=pytest.mark.slow)]


@pytest.fixture(scope="module", params=LAUNCHES)
def launch(request, tmp_path_factory):
    instances, R = request.param
    out = tmp_path_factory.mktemp(f"mpi{instances}x{R}")
    p = poprun(["--num-instances", str(instances), "--num-replicas", str(R), "python",
                os.path.join(HERE, "mpi_program.py"), str(out), "collectives", "variables"])
    assert p.returncode == 0, p.stdout + p.stderr
    for k in range(instances):
        assert f"[1,{k}]<stdout>:collectives: ok" in p.stdout
    return instances, R, out


def _load(out, program, instances):
    return [dict(np.load(os.path.join(out, f"{program}.instance{k}.npz"))) for k in range(instances)]


def _groups(R, spec):
    import popxl

    rg = popxl.Ir(replication=R).replica_grouping(*(spec or ()))
    groups = {}
    for r, g in enumerate(rg.assignment):
        groups.setdefault(g, []).append(r)
    return [groups[g] for g in sorted(groups)]


def test_collectives_across_instances_match_numpy_and_one_process(launch):
    instances, R, out = launch
    parts = _load(out, "collectives", instances)
    got = {k[4:]: np.concatenate([p[k] for p in parts]) for k in parts[0] if k.startswith("out/")}
    single, _ = run("collectives", R, R)
    for k, v in single.items():  # bitwise what one process holding every replica computes
        assert got[k].dtype == v.dtype and np.array_equal(got[k].view(np.uint8), v.view(np.uint8)), k
    d = data(R)
    x = d["x"]
    for gi, spec in enumerate(groupings(R)):
        for members in _groups(R, spec):
            n = len(members)
            xs = x[members]
            flat = xs.reshape(n, -1)
            m = -(-flat.shape[1] // n)
            pad = np.zeros((n, n * m), np.float32)
            pad[:, :flat.shape[1]] = flat
            for k, r in enumerate(members):
                for op in REDUCE_OPS:
                    np.testing.assert_allclose(got[f"ar_{op}_{gi}"][r], NP_REDUCE[op](xs), rtol=1e-5, atol=1e-6,
                                               err_msg=f"all_reduce {op} {spec} replica {r}")
                np.testing.assert_array_equal(got[f"ag_{gi}"][r], np.concatenate(list(xs), 0))
                np.testing.assert_allclose(got[f"rs_add_{gi}"][r], pad.sum(0)[k * m:(k + 1) * m], rtol=1e-5, atol=1e-6)
                np.testing.assert_array_equal(got[f"rs_max_{gi}"][r], pad.max(0)[k * m:(k + 1) * m])
                np.testing.assert_array_equal(got[f"sl_{gi}"][r], pad[k, k * m:(k + 1) * m])
                np.testing.assert_array_equal(got[f"int_add_{gi}"][r], d["xi"][members].sum(0))
                np.testing.assert_allclose(got[f"half_add_{gi}"][r].astype(np.float32),
                                           d["xh"][members].astype(np.float32).sum(0), rtol=2e-3, atol=2e-3)
                np.testing.assert_array_equal(got[f"and_{gi}"][r], d["xb"][members].all(0))
                np.testing.assert_array_equal(got[f"or_{gi}"][r], d["xb"][members].any(0))


def test_variables_rts_and_remote_across_instances(launch):
    """Every instance returns the whole value (PopXL's weights_to_host gathers the instances'
    replicas), the same as one process; writes reach every instance's replicas."""
    instances, R, out = launch
    parts = _load(out, "variables", instances)
    _, single = run("variables", R, R)
    rng = np.random.default_rng(7)
    x = rng.normal(size=(R, 6)).astype(np.float32)
    for k, part in enumerate(parts):
        for name, want in single.items():
            have = part[f"var/{name}"]
            assert have.shape == want.shape and np.array_equal(have, want), (k, name)
        np.testing.assert_array_equal(part["var/all_one_per_group"], np.arange(6, dtype=np.float32) + x[0])
        np.testing.assert_array_equal(part["var/all_all_replicas"], np.arange(6, dtype=np.float32) + x)
        np.testing.assert_array_equal(part["var/rts"], np.arange(2 * R, dtype=np.float32).reshape(R, 2) + x[:, :2])
        np.testing.assert_array_equal(part["var/remote"], 2.0 * x[0])
        remote_rts = np.concatenate([np.arange(2 * r, 2 * r + 2) + np.tile(x[r], 3)[2 * r:2 * r + 2] for r in range(R)])
        np.testing.assert_array_equal(part["var/remote_rts"], remote_rts.astype(np.float32))
        if R == 4:  # stride 2, groups {0, 2} and {1, 3}: the first of each group
            init = np.arange(12, dtype=np.float32).reshape(2, 6)
            np.testing.assert_array_equal(part["var/strided_one_per_group"], init + x[[0, 1]])
            np.testing.assert_array_equal(part["var/pairs_one_per_group"], init + x[[0, 2]])
            # sharded within groups {0, 2} and {1, 3}: each member adds its input to its half
            want = np.stack([np.concatenate([init[g, :3] + x[g, :3], init[g, 3:] + x[g + 2, :3]]) for g in (0, 1)])
            np.testing.assert_array_equal(part["var/rts_strided"], want)
        for name in single:
            if name.endswith("_written"):
                assert (part[f"var/{name}"] == (0.25 if name == "rts_written" else 0.5)).all(), name


@pytest.mark.parametrize("program", ["collectives", "variables"])
def test_collectives_cost_what_they_cost_in_one_process(launch, program):
    """A collective whose groups span instances costs what it costs on one IPU-POD: every
    instance's run takes the cycles of one process running every replica, the collectives too."""
    instances, R, out = launch
    want = {}
    run(program, R, R, stats=want)
    assert want["collective_cycles"] > 0
    for k, part in enumerate(_load(out, program, instances)):
        have = {name: int(part[f"stat/{name}"]) for name in want}
        assert have == want, (k, have, want)
