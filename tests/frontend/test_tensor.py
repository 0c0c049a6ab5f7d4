import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl.errors import UndefinedValue


def test_tensor_properties(main):
    x = popxl.variable(np.zeros((2, 3, 4), np.float32), name="x")
    assert x.id == "x" and x.name == "x" and x.scope == ""
    assert x.shape == (2, 3, 4) and x.rank == 3 and x.nelms == 24 and len(x) == 2
    assert x.dtype == popxl.float32 and x.meta_shape == ()
    assert x.spec == popxl.TensorSpec((2, 3, 4), popxl.float32)
    assert x.strides() == (48, 16, 4) and x.strides((5, 2)) == (8, 4)
    assert x.graph is main and x.ir is main.ir and x.producer is None
    assert x.in_sync_with_ipu
    assert x.location_info == popxl.TensorLocation()
    assert repr(x) == "Tensor[x popxl.dtypes.float32 (2, 3, 4)]"
    with pytest.raises(UndefinedValue):
        x.ipu  # nothing placed the variable yet
    y = x + 1.0
    assert y.ipu == 0 and y.tile_set == "compute" and x.ipu == 0
    assert y.producer.type == "add" and x.consumers == (y.producer,)
    with pytest.raises(ValueError):
        len(popxl.constant(1.0))
    with pytest.raises(RuntimeError):
        popxl.Tensor()


def test_variable_attributes(main):
    v = popxl.variable(np.ones((3,), np.float32))
    assert v.replica_grouping.group_size == 1 and v.replica_grouping.num_groups == 1
    assert v.retrieval_mode == "one_per_group"
    assert v.shape_on_host == (3,) and v.shape_on_replica == (3,)
    assert isinstance(v, popxl.Variable) and main.variables == (v,)
    c = popxl.constant(2)
    assert isinstance(c, popxl.Constant) and c in main.constants


def test_hash_and_equality_by_identity(ir):
    with ir.main_graph:
        a = popxl.variable(np.zeros(2, np.float32), name="a")
        b = popxl.variable(np.zeros(2, np.float32), name="b")
    assert a == a and a != b and not (a == 3)
    assert isinstance(a == b, bool)  # == is not element-wise
    d = {a: 1, b: 2}
    assert d[a] == 1 and d[b] == 2
    assert ir.main_graph.get_tensor("a") is a
    other = popxl.Ir()
    with other.main_graph:
        a2 = popxl.variable(np.zeros(2, np.float32), name="a")
    assert a2.id == a.id and a2 != a and len({a, a2}) == 2
    with ir.main_graph:
        with pytest.raises(RuntimeError, match="different Ir"):
            with other.main_graph:
                pass


def test_tensor_iteration_and_contains_are_disabled(main, var):
    x = var((3,))
    with pytest.raises(TypeError):
        iter(x)


@pytest.mark.parametrize("expr, op_type", [
    (lambda x, y: x + y, "add"), (lambda x, y: x - y, "sub"), (lambda x, y: x * y, "mul"),
    (lambda x, y: x / y, "div"), (lambda x, y: x % y, "fmod"), (lambda x, y: x ** y, "pow"),
    (lambda x, y: x > y, "greater"), (lambda x, y: x < y, "greater"),
])
def test_binary_operators(main, expr, op_type, var):
    x = var((2, 3), name="x")
    y = var((3,), name="y")
    out = expr(x, y)
    assert out.producer.type == op_type and out.shape == (2, 3)
    if op_type == "greater":
        assert out.dtype == popxl.bool
        assert out.producer.inputs == ((x, y) if expr(1, 0) is True else (y, x))


def test_reflected_operators_make_constants_of_the_tensor_dtype(main, var):
    x = popxl.variable(np.zeros((2, 3), np.float16), name="x")
    for out, first_const in ((1 + x, True), (x - 2, False), (3 * x, True), (1 / x, True), (2 ** x, True),
                             (np.ones(3) * x, True)):
        assert out.dtype == popxl.float16 and out.shape == (2, 3)
        const = out.producer.inputs[0 if first_const else 1]
        assert isinstance(const, popxl.Constant) and const.dtype == popxl.float16
    assert (-x).producer.type == "negate"
    m = var((3, 4))
    assert (np.ones((5, 3), np.float32) @ m).shape == (5, 4)
    assert (m.T @ np.ones(3, np.float32)).shape == (4,)
    b = popxl.variable(np.array([True, False]))
    assert (~b).producer.type == "logical_not" and (b & b).producer.type == "logical_and"
    assert (b | True).producer.type == "logical_or"


def test_iadd_is_inplace(main, var):
    x = var((2,), name="x")
    before = len(main.ops)
    x += 1.0
    assert x.id == "x" and len(main.ops) == before + 1
    op = main.ops[-1]
    assert op.type == "add" and op.inplace and op.modified == (0,) and op.aliases == {0: 0}


def test_getitem_slicing(main, var):
    x = var((4, 5, 6), name="x")
    assert x[1].shape == (5, 6)
    assert x[1:3, ::2].shape == (2, 3, 6)
    assert x[-1, :, 2].shape == (5,)
    assert x[:, ::-1].shape == (4, 5, 6)
    assert x[1:3, 0].shape == (2, 6)
    assert x[-2:].shape == (2, 5, 6)
    s = x[1:3, ::2]
    op = s.producer
    assert op.type == "slice" and op.attrs["axes"] == (0, 1) and op.attrs["steps"] == (1, 2)
    data = np.arange(120).reshape(4, 5, 6)
    assert data[op.attrs["index"]].shape == s.shape
    r = x[:, ::-1].producer
    assert data[r.attrs["index"]].tolist() == data[:, ::-1].tolist()
    assert x[-1].producer.type == "reshape"  # the int index is squeezed
    assert ops.slice(x) is x and x[:].shape == x.shape
    with pytest.raises(IndexError):
        x[4]
    with pytest.raises(IndexError):
        x[0, 0, 0, 0]
    with pytest.raises(TypeError):
        x["a"]
    for bad in ((Ellipsis, 0), (0, None), (0, "a")):  # not host index data either: the same TypeError
        with pytest.raises(TypeError, match="Not a valid index"):
            x[bad]


def test_getitem_gather_and_mask(main, var):
    x = var((4, 3), name="x")
    idx = popxl.constant([0, 2], popxl.int32)
    g = x[idx]
    assert g.producer.type == "gather" and g.shape == (2, 3)
    assert x[[3, 1, 1]].shape == (3, 3)
    mask = popxl.constant([True, False, True, True])
    m = x[mask]
    assert m.producer.type == "where" and m.shape == (4, 3)
    assert x[np.ones((4, 3), bool)].shape == (4, 3)


def test_methods(main, var):
    x = var((2, 3, 4))
    assert x.T.shape == (4, 3, 2) and x.transpose((1, 0, 2)).shape == (3, 2, 4)
    assert x.reshape((6, -1)).shape == (6, 4) and x.flatten().shape == (24,)
    assert x.T_.producer.aliases == {0: 0} and x.reshape_((24,)).producer.aliases == {0: 0}
    assert x.flatten_().producer.inplace
    assert x.detach().producer.type == "detach" and x.detach_().producer.aliases == {0: 0}
    with pytest.raises(ValueError, match="2-dimensional"):
        x.diag()
    assert var((3, 5)).diag().shape == (3,) and var((4, 2)).diag().shape == (2,)
    assert x.copy_to_ipu(1, 0).ipu == 1


def test_tensor_from_other_graph_is_rejected(ir, var):
    with ir.main_graph:
        outer = var((2,), name="outer")

        def body(a):
            return a + outer

        with pytest.raises(ValueError) as e:
            ir.create_graph(body, outer)
    msg = str(e.value)
    assert "main graph" in msg and "body_0" in msg and "graph input" in msg
    assert all(g.id != "body_0" for g in ir.graphs)  # the half-built graph was dropped


def test_variable_outside_main_graph(ir):
    sub = ir.create_empty_graph("sub")
    with sub:
        with pytest.raises(ValueError, match="main graph"):
            popxl.variable(1.0)
        c = popxl.constant(1.0, name="c")  # constants are fine anywhere
    assert c.id == "sub_0/c" and c.name == "c" and c.scope == "sub_0"


def test_no_graph_selected():
    with pytest.raises(RuntimeError, match="graph"):
        popxl.constant(1.0)


def test_graph_inputs_and_outputs_rules(ir, var):
    with ir.main_graph:
        with pytest.raises(ValueError):
            popxl.graph_input((2,), popxl.float32)
    g = ir.create_empty_graph()
    with g:
        a = popxl.graph_input((2,), popxl.float32, "a", by_ref=True)
        b = popxl.graph_input([3], "int32", "b", meta_shape=(6,))
        popxl.graph_output(a)
    assert g.inputs == (a, b) and g.outputs == (a,) and g.by_ref_inputs == (a,)
    assert b.meta_shape == (6,) and b.dtype == popxl.int32
    assert g.inputs_by_name == {"a": a, "b": b}
    with ir.main_graph:
        x = var((2,))
    with g:
        with pytest.raises(ValueError):
            popxl.graph_output(x)


def test_remote_and_sharded_variables(main):
    buf = popxl.remote_buffer((2,), popxl.float32, 3)
    assert buf.entries == 3 and buf.tensor_shape == (2,) and buf.remote_buffer_id >= 1
    rv = popxl.remote_variable(np.zeros(2, np.float32), buf, 1)  # tests/remote runs it
    assert rv.location_info.storage == popxl.TensorStorage.OffChip and rv._remote_offset == 1
    var, shard = popxl.replica_sharded_variable(np.zeros(2, np.float32))  # one replica: one shard
    assert var.shape == (2,) and shard.shape == (2,) and shard.meta_shape == (2,)
    assert popxl.replica_sharded_buffer((2,), popxl.float32).tensor_shape == (2,)
