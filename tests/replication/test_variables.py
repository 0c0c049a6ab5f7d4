"""Variables with replica groupings and retrieval modes, and replica-sharded (RTS) variables:
host data in, device values per replica, host data out."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
from replication_helpers import groups_of


def _replica_values(session, var):
    """What every replica holds for `var` (its device storage)."""
    ipu_var = session._lowered.variables[var]
    return [session.engine.read_tensor(ipu_var, replica=r) for r in range(session.engine.replicas)]


@pytest.mark.parametrize("R, spec", [(2, (1, 1)), (4, (1, 2)), (4, (2, 2)), (8, (4, 2)), (8, (1, 4)), (8, (2, 2)),
                                     (8, None)])
@pytest.mark.parametrize("mode", ["one_per_group", "all_replicas"])
def test_grouped_variable_round_trip(R, spec, mode):
    ir = popxl.Ir(replication=R)
    rg = ir.replica_grouping(*spec) if spec else ir.replica_grouping()
    G = rg.num_groups
    data = np.arange(G * 6, dtype=np.float32).reshape((G, 2, 3) if G > 1 else (2, 3))
    with ir.main_graph:
        v = popxl.variable(data, name="v", replica_grouping=rg, retrieval_mode=mode)
        assert v.shape == (2, 3) and v.shape_on_host == data.shape and v.shape_on_replica == (2, 3)
        ops.add_(v, popxl.constant(1.0))  # every replica adds one to its copy
    with popxl.Session(ir, "ipu_model") as s:
        before = s.get_tensor_data(v)  # before any run: the host copy, in the retrieval mode's form
        if mode == "all_replicas" and rg.group_size > 1:
            assert before.shape == (R, 2, 3)
            np.testing.assert_array_equal(before[R - 1], data[rg.assignment[R - 1]] if G > 1 else data)
        else:
            assert before.shape == data.shape
        s.run()
        per = _replica_values(s, v)
        for r in range(R):  # replica r got its group's data
            want = data[rg.assignment[r]] if G > 1 else data
            np.testing.assert_array_equal(per[r], want + 1)
    got = s.get_tensor_data(v)
    if mode == "all_replicas" and rg.group_size > 1:
        assert got.shape == (R, 2, 3)
        full = data[rg.assignment] if G > 1 else np.broadcast_to(data, (R, 2, 3))
        np.testing.assert_array_equal(got, full + 1)
    else:
        assert got.shape == data.shape
        np.testing.assert_array_equal(got, data + 1)


@pytest.mark.parametrize("assignment", [[0, 0, 1, 1, 0, 0, 1, 1], [0, 1, 1, 0, 0, 1, 1, 0], [0, 1, 2, 3, 1, 2, 3, 0]])
def test_non_const_grouping_variable(assignment):
    R = len(assignment)
    G = len(set(assignment))
    ir = popxl.Ir(replication=R)
    rg = ir.replica_grouping_from_assignments(assignment)
    data = np.arange(G * 3 * 2, dtype=np.int32).reshape(G, 3, 2)
    with ir.main_graph:
        v = popxl.variable(data, popxl.int32, name="v", replica_grouping=rg)
        assert v.shape == (3, 2)
        ops.print_tensor(v, print_self=False)
    with popxl.Session(ir, "ipu_model") as s:
        np.testing.assert_array_equal(s.get_tensor_data(v), data)
        per = _replica_values(s, v)
        for r in range(R):
            np.testing.assert_array_equal(per[r], data[assignment[r]])
        s.write_variable_data(v, data[::-1].copy())
        np.testing.assert_array_equal(s.get_tensor_data(v), data[::-1])
        per = _replica_values(s, v)
        for r in range(R):
            np.testing.assert_array_equal(per[r], data[::-1][assignment[r]])


def test_write_variable_data_shapes():
    ir = popxl.Ir(replication=4)
    rg = ir.replica_grouping(1, 2)
    with ir.main_graph:
        v = popxl.variable(np.zeros((2, 3), np.float32), name="v", replica_grouping=rg, retrieval_mode="all_replicas")
        w = popxl.variable(np.zeros(3, np.float32), name="w")
    with popxl.Session(ir, "ipu_model") as s:
        # PopXL's Session refuses to write "all_replicas" variables of groups of several replicas,
        # whatever the data (after its type and shape checks)
        per = np.arange(12, dtype=np.float32).reshape(4, 3)
        for data in (np.ones((2, 3), np.float32), per):
            with pytest.raises(NotImplementedError, match='"all_replicas" retreval mode is not yet supported'):
                s.write_variable_data(v, data)
        with pytest.raises(NotImplementedError, match="all_replicas"):
            s.write_variables_data({w: np.ones(3, np.float32), v: per})
        with pytest.raises(TypeError, match="must match the equivalent type"):
            s.write_variable_data(v, per.astype(np.int32))
        np.testing.assert_array_equal(s.get_tensor_data(w), np.ones(3, np.float32))  # written before v refused
        # the frontends' own path (PopART's writeWeights of AllReplicas weights) still writes them
        s._write_variable_data_any(v, per)
        np.testing.assert_array_equal(s.get_tensor_data(v), per)
        with pytest.raises(ValueError, match="host data of shape"):
            s.write_variable_data(w, np.ones((4, 3), np.float32))


# -- replicated tensor sharding --------------------------------------------------------------------

def test_rts_user_guide_example():
    """The user guide's RTS example (remote.rst, rts_var.py): shards of x plus sharded y."""
    ir = popxl.Ir()
    ir.replication_factor = 2
    ir.num_host_transfers = 1
    with ir.main_graph, popxl.in_sequence():
        x = np.array([1, 2]).astype(np.int32)
        remote_x, loaded_x = popxl.replica_sharded_variable(x, popxl.dtypes.int32)
        y = popxl.variable([3, 4])
        sharded_y = ops.collectives.replica_sharded_slice(y)
        ops.var_updates.accumulate_(loaded_x, sharded_y)
    with popxl.Session(ir, "ipu_model") as session:
        session.run({})
    np.testing.assert_array_equal(session.get_tensor_data(remote_x), [4, 6])


@pytest.mark.parametrize("R, spec, shard_over, n", [(2, None, None, 7), (4, None, None, 10), (4, None, 2, 9),
                                                    (8, (1, 4), None, 6), (8, (4, 2), None, 5), (8, (2, 4), 2, 11),
                                                    (4, (1, 1), None, 3)])
def test_rts_round_trip(R, spec, shard_over, n):
    """Host value -> shards on the replicas (padded) -> host value; every replica can rebuild the
    whole value with an all-gather over its shard group."""
    ir = popxl.Ir(replication=R)
    rg = ir.replica_grouping(*spec) if spec else ir.replica_grouping()
    G = rg.num_groups
    so = shard_over or rg.group_size
    data = (np.arange(G * n, dtype=np.float32) + 1).reshape((G, n) if G > 1 else (n,))
    with ir.main_graph:
        var, shard = popxl.replica_sharded_variable(data, popxl.float32, "w", replica_grouping=rg, shard_over=shard_over)
        m = -(-n // so)
        assert var.shape == (n,) and shard.shape == (m,) and shard.meta_shape == (n,)
        gather_rg = ir.replica_grouping(rg.stride if spec else 1, so)
        full = ops.collectives.replicated_all_gather(shard, group=gather_rg)
        assert full.shape == (n,)
        st = popxl.d2h_stream(full.shape, full.dtype, "full")
        ops.host_store(st, full)
        ops.add_(shard, popxl.constant(10.0))
    with popxl.Session(ir, "ipu_model") as s:
        out = s.run()[st]
        out = out.reshape(R, n)
        ipu_var = s._lowered.variables[var]
        assert ipu_var.numel == m  # each replica stores only its shard
        groups = groups_of(rg.assignment)
        for r in range(R):
            value = data[rg.assignment[r]] if G > 1 else data
            np.testing.assert_array_equal(out[r], value)
            k = groups[rg.assignment[r]].index(r) % so
            want = np.pad(value, (0, m * so - n))[k * m:(k + 1) * m] + 10
            np.testing.assert_array_equal(s.engine.read_tensor(ipu_var, replica=r), want)
    np.testing.assert_array_equal(s.get_tensor_data(var), data + 10)
    # and back: write a new value, it reaches the shards
    with s:
        s.write_variable_data(var, data * 2)
        np.testing.assert_array_equal(s.get_tensor_data(var), data * 2)


def test_rts_complex_distributed_layout():
    """The user guide's complex sharding example on one instance: 16 replicas, groups of 4 with
    stride 4, sharded over 2; gather, add one, slice back."""
    ir = popxl.Ir(replication=16)
    rg = ir.replica_grouping(group_size=4, stride=4)
    v_h = np.arange(0, rg.num_groups * 32).reshape((rg.num_groups, 32)).astype(np.int32)
    with ir.main_graph:
        v_handle, v_shard = popxl.replica_sharded_variable(v_h, replica_grouping=rg, shard_over=2)
        collective_rg = ir.replica_grouping(group_size=rg.group_size // 2, stride=rg.stride)
        v_gathered = ops.collectives.replicated_all_gather(v_shard, collective_rg)
        v_gathered += 1
        v_updated_shard = ops.collectives.replica_sharded_slice(v_gathered, collective_rg)
        ops.var_updates.copy_var_update_(v_shard, v_updated_shard)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
    np.testing.assert_array_equal(sess.get_tensor_data(v_handle), v_h + 1)


def test_rts_shapes_follow_popxl():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        rg = ir.replica_grouping(1, 2)
        x = np.zeros((2, 5, 3), np.float32)
        for mode in ("one_per_group", "all_replicas"):
            v, s = popxl.replica_sharded_variable(x, popxl.float32, replica_grouping=rg, retrieval_mode=mode)
            assert v.shape == (5, 3) and v.shape_on_host == (2, 5, 3) and s.shape == (8,)
            assert v.location_info.replicated_tensor_sharding == popxl.ReplicatedTensorSharding.On
        buf = popxl.replica_sharded_buffer((2, 5, 3), popxl.float32, rg)
        assert buf.tensor_shape == (8,) and buf.meta_shape == (5, 3)
        buf = popxl.replica_sharded_buffer((2, 5, 3), popxl.float32, rg, shard_over=1)
        assert buf.tensor_shape == (15,)
        with pytest.raises(ValueError, match="shard_over"):
            popxl.replica_sharded_variable(np.zeros(4, np.float32), shard_over=3)


def test_shard_over_beyond_a_group_of_one_is_refused_in_popxl_words():
    """PopXL's replica_sharded_buffer: shard_over counts replicas of one variable group, so a
    grouping of size 1 (each replica its own value) cannot be sharded over 2; shard_over=1 (the
    default for it) keeps the whole value on each replica."""
    ir = popxl.Ir(replication=4)
    rg = ir.replica_grouping(group_size=1)
    with ir.main_graph:
        for make in (lambda: popxl.replica_sharded_variable(np.zeros((4, 6), np.float32), replica_grouping=rg,
                                                            shard_over=2),
                     lambda: popxl.replica_sharded_buffer((4, 6), popxl.float32, rg, shard_over=2)):
            with pytest.raises(ValueError, match=r"^The sharding group size \(2\) must be less than or equal to "
                                                 r"the replica group size \(1\)\. Note that if no replica grouping"):
                make()
        v, shard = popxl.replica_sharded_variable(np.zeros((4, 6), np.float32), replica_grouping=rg)
        assert v.shape == (6,) and shard.shape == (6,)
        assert popxl.replica_sharded_buffer((4, 6), popxl.float32, rg).tensor_shape == (6,)
