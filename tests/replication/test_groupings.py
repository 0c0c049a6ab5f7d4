"""ReplicaGrouping: the assignments of seed 000 and the user guide's tables, transpose, non-const
groupings, validation."""
import pytest

import popxl


@pytest.mark.parametrize("stride, size, assignment", [
    (1, 2, [0, 0, 1, 1, 2, 2, 3, 3]),
    (1, 4, [0, 0, 0, 0, 1, 1, 1, 1]),
    (2, 4, [0, 1, 0, 1, 0, 1, 0, 1]),
    (4, 2, [0, 1, 2, 3, 0, 1, 2, 3]),
    (1, 8, [0] * 8),
    (1, 1, list(range(8))),
    (2, 2, [0, 1, 0, 1, 2, 3, 2, 3]),
])
def test_seed_assignments_for_8_replicas(stride, size, assignment):
    ir = popxl.Ir(replication=8)
    rg = ir.replica_grouping(stride, size)
    assert rg.assignment == assignment
    assert (rg.stride, rg.group_size, rg.num_groups) == (stride, size, 8 // size)
    assert rg.is_const and rg.const_rg is rg and rg.to_device_map is None and rg.to_host_map is None
    assert repr(rg) == f"ReplicaGrouping(num_replicas=8, stride={stride}, group_size={size}, num_groups={8 // size})"


def test_user_guide_tables_for_16_replicas():
    ir = popxl.Ir(replication=16)
    assert ir.replica_grouping(group_size=4)._groups() == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11],
                                                           [12, 13, 14, 15]]
    assert ir.replica_grouping(stride=4, group_size=4)._groups() == [[0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14],
                                                                     [3, 7, 11, 15]]
    assert ir.replica_grouping(1, 1)._groups() == [[r] for r in range(16)]
    # defaults: one group; group_size = replication_factor // stride
    assert ir.replica_grouping().assignment == [0] * 16
    assert ir.replica_grouping(stride=4).group_size == 4


def test_from_assignments_and_the_seed_list_form():
    ir = popxl.Ir(replication=8)
    rg = ir.replica_grouping_from_assignments([0, 0, 1, 1, 0, 0, 1, 1])
    assert rg.assignment == [0, 0, 1, 1, 0, 0, 1, 1] and rg.group_size == 4 and rg.num_groups == 2
    assert not rg.is_const
    with pytest.raises(NotImplementedError):
        rg.stride
    # seed 000 writes ir.replica_grouping([...]) for the assignment form
    assert ir.replica_grouping([0, 0, 1, 1, 0, 0, 1, 1]) == rg
    # a const assignment is recognised as such
    c = ir.replica_grouping_from_assignments([0, 0, 0, 0, 1, 1, 1, 1])
    assert c.is_const and c.stride == 1 and c.group_size == 4 and c == ir.replica_grouping(1, 4)
    # the coarsest consecutive grouping inside it, and the maps between the two
    assert rg.const_rg.assignment == [0, 0, 1, 1, 2, 2, 3, 3]
    assert rg.to_device_map == [0, 1, 0, 1] and rg.to_host_map == [0, 1]
    other = popxl.Ir(replication=8).replica_grouping_from_assignments([0, 1, 1, 0, 0, 1, 1, 0])
    assert other.const_rg.group_size == 1


@pytest.mark.parametrize("bad", [[0], [0, 0, 0, 1], [1, 1, 2, 2], [0, 0, 2, 2], [1, 1, 0, 0]])
def test_from_assignments_rejects(bad):
    ir = popxl.Ir(replication=4)
    with pytest.raises(ValueError):
        ir.replica_grouping_from_assignments(bad)


@pytest.mark.parametrize("stride, size", [(3, 2), (1, 3), (0, 2), (2, -1), (16, 1)])
def test_params_that_do_not_partition(stride, size):
    with pytest.raises(ValueError):
        popxl.Ir(replication=8).replica_grouping(stride, size)


@pytest.mark.parametrize("stride, size, t_stride, t_size", [(1, 1, 1, 16), (1, 4, 4, 4), (2, 8, 1, 2), (8, 2, 1, 8),
                                                          (1, 16, 1, 1)])
def test_transpose_const(stride, size, t_stride, t_size):
    ir = popxl.Ir(replication=16)
    t = ir.replica_grouping(stride, size).transpose()
    assert (t.stride, t.group_size) == (t_stride, t_size)
    # group i of the transpose holds the i-th member of every group
    groups = ir.replica_grouping(stride, size)._groups()
    assert t._groups() == [sorted(g[i] for g in groups) for i in range(size)]
    assert t.transpose() == ir.replica_grouping(stride, size)


def test_transpose_non_const():
    ir = popxl.Ir(replication=8)
    t = ir.replica_grouping(2, 2).transpose()
    assert not t.is_const and t.assignment == [0, 0, 1, 1, 0, 0, 1, 1]
    tt = t.transpose()
    assert tt.is_const and tt.assignment == [0, 1, 0, 1, 2, 3, 2, 3]
    ir12 = popxl.Ir(replication=12)
    rg = ir12.replica_grouping_from_assignments([0, 1, 0, 1, 0, 1, 2, 3, 2, 3, 2, 3])
    assert rg.transpose().assignment == [0, 0, 1, 1, 2, 2, 0, 0, 1, 1, 2, 2]


def test_comm_group_conversion():
    from popxl.ops.collectives import CommGroup, CommGroupType
    ir = popxl.Ir(replication=8)
    with ir.main_graph:
        assert CommGroup(CommGroupType.All).toReplicaGrouping(8) == ir.replica_grouping()
        assert CommGroup(CommGroupType.Consecutive, 2).toReplicaGrouping(8) == ir.replica_grouping(1, 2)
        assert CommGroup(CommGroupType.Orthogonal, 2).toReplicaGrouping(8) == ir.replica_grouping(4, 2)
        assert CommGroup(CommGroupType.Ungrouped).toReplicaGrouping(8) == ir.replica_grouping(1, 1)


def test_collectives_need_a_const_grouping():
    ir = popxl.Ir(replication=4)
    with ir.main_graph:
        x = popxl.variable([1.0, 2.0])
        rg = ir.replica_grouping_from_assignments([0, 1, 1, 0])
        with pytest.raises(ValueError, match="constant stride"):
            popxl.ops.collectives.replicated_all_reduce(x, group=rg)
