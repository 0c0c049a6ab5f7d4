"""Engines holding part of a run's replicas (ipu.collectives.Communicator): collectives over groups
that span engines exchange rows through the communicator and give bitwise what one engine holding
every replica gives. Here the 'instances' are threads of one process (the MPI communicator of
popdist implements the same interface; tests/popdist runs it with real processes)."""
import threading

import numpy as np
import pytest

import ipu
from ipu.collectives import Communicator


class ThreadCommunicator(Communicator):
    """Engines of one process, each in its own thread, exchanging rows through a shared dict."""

    def __init__(self, shared, offset, local, total, per_instance):
        self.shared, self.replica_offset, self.local_replicas, self.total_replicas = shared, offset, local, total
        self.per_instance = per_instance
        self.calls = 0

    def instance_of(self, replica):
        return replica // self.per_instance

    def exchange(self, tag, wanted, rows, row_bytes):
        self.calls += 1
        key = (tag, self.calls)
        with self.shared["lock"]:
            self.shared.setdefault(key, {}).update({r: np.array(v) for r, v in rows.items()})
        self.shared["barrier"].wait()
        out = {r: self.shared[key][r] for r in wanted}
        self.shared["barrier"].wait()
        return out


def _program(R, groups, kind, op, numel=7, dtype="float32"):
    g = ipu.Graph(ipu.small_target(4))
    n = len(groups[0])
    dst_n = {"all_reduce": numel, "all_gather": numel * n, "reduce_scatter": -(-numel // n)}[kind]
    src = g.add_variable("src", (numel,), dtype)
    dst = g.add_variable("dst", (dst_n,), dtype)
    g.map_linearly(src)
    g.map_linearly(dst)
    return ipu.compile(g, ipu.CrossReplica(kind, src, dst, groups, op)), src, dst


@pytest.mark.parametrize("kind, op", [("all_reduce", "add"), ("all_reduce", "max"), ("all_reduce", "mean"),
                                      ("all_gather", "local"), ("reduce_scatter", "add")])
@pytest.mark.parametrize("spec", [(1, 4), (2, 2), (1, 2)], ids=["all", "strided", "pairs"])
@pytest.mark.parametrize("instances", [2, 4])
def test_split_engines_match_one_engine(kind, op, spec, instances):
    R = 4
    groups = ipu.replica_groups(R, *spec)
    exe, src, dst = _program(R, groups, kind, op)
    x = np.random.default_rng(3).normal(size=(R, src.numel)).astype(np.float32)
    one = ipu.Engine(exe, replicas=R)
    for r in range(R):
        one.write_tensor(src, x[r], replica=r)
    one.run()
    want = [one.read_tensor(dst, replica=r) for r in range(R)]
    local = R // instances
    shared = {"lock": threading.Lock(), "barrier": threading.Barrier(instances)}
    comms = [ThreadCommunicator(shared, k * local, local, R, local) for k in range(instances)]
    engines = [ipu.Engine(exe, replicas=local, communicator=c) for c in comms]
    for k, e in enumerate(engines):
        for r in range(local):
            e.write_tensor(src, x[k * local + r], replica=r)
    errors = []

    def run(e):
        try:
            e.run()
        except Exception as err:  # pragma: no cover - reported below
            errors.append(err)
            shared["barrier"].abort()

    threads = [threading.Thread(target=run, args=(e,)) for e in engines]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors, errors
    for k, e in enumerate(engines):
        for r in range(local):
            got = e.read_tensor(dst, replica=r)
            assert np.array_equal(got.view(np.uint32), want[k * local + r].view(np.uint32))
        assert e.cycles == one.cycles  # the cost does not depend on where the replicas run
    spans = any(len({m // local for m in grp}) > 1 for grp in groups)
    assert all(c.calls == (1 if spans else 0) for c in comms)


def test_an_engine_of_the_wrong_size_is_refused():
    exe, src, dst = _program(4, ipu.replica_groups(4), "all_reduce", "add")
    comm = ThreadCommunicator({}, 0, 2, 4, 2)
    with pytest.raises(ipu.IpuError, match="cover 4 replicas but the engine runs 3 of 4"):
        ipu.Engine(exe, replicas=3, communicator=comm).run()


def test_spanning_cache_survives_a_reused_communicator_id():
    """The spanning members are cached per communicator id; a freed communicator's id taken by a
    new one (a run without a communicator makes and frees one) must not hand its stale, empty
    answer to the new one (that dropped rows at random in the tests above)."""
    from ipu.collectives import _spanning

    R = 4
    exe, _, _ = _program(R, ipu.replica_groups(R, 1, 4), "all_reduce", "add")
    payload = next(s.payload for s in exe.steps if getattr(s.payload, "groups", None))
    alone = Communicator(R)
    assert _spanning(payload, alone) == ()
    split = ThreadCommunicator({}, 0, 2, R, 2)
    payload._spans[id(split)] = payload._spans.pop(id(alone))  # as if `split` had reused the id
    assert _spanning(payload, split) == (0, 1, 2, 3)
