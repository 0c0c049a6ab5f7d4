"""Output shapes and dtypes of element-wise ops and reductions, against NumPy."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl.op_table import BinaryOpType, UnaryOpType, op_types

UNARY_RULES = {e.name: (e.inputs, e.output) for e in op_types(UnaryOpType)}
BINARY_RULES = {e.name: e.kind for e in op_types(BinaryOpType)}

SHAPES = [(), (1,), (5,), (2, 3), (4, 1, 3)]
BROADCAST = [((2, 3), (3,)), ((4, 1, 3), (2, 1)), ((1,), (5, 4)), ((), (2, 2)), ((3, 1), (1, 4))]


@pytest.mark.parametrize("name", sorted(UNARY_RULES))
@pytest.mark.parametrize("shape", SHAPES)
def test_unary(main, var, name, shape):
    x = var(shape, np.float32)
    out = getattr(ops, name)(x)
    assert out.shape == shape
    assert out.dtype == (popxl.bool if UNARY_RULES[name][1] == "bool" else popxl.float32)
    assert out.producer.type == name and out.producer.inputs[-1] is not None
    if hasattr(ops, name + "_"):
        inplace = getattr(ops, name + "_")(x)
        op = inplace.producer
        assert op.type == name and op.inplace and op.modified == (0,) and op.aliases == {0: 0}


@pytest.mark.parametrize("name", ["exp", "log", "sqrt", "tanh", "gelu", "cos"])
def test_unary_float_only(main, var, name):
    with pytest.raises(TypeError):
        getattr(ops, name)(var((2,), np.int32))


def test_unary_int_ok_and_logical_not_casts(main, var):
    assert ops.abs(var((2,), np.int32)).dtype == popxl.int32
    assert ops.relu(var((2,), np.int32)).dtype == popxl.int32
    out = ops.logical_not(var((2,), np.int32))
    assert out.dtype == popxl.bool and out.producer.inputs[0].producer.type == "cast"
    assert ops.log2(var((3,))).producer.type == "div"


@pytest.mark.parametrize("name", sorted(BINARY_RULES))
@pytest.mark.parametrize("a, b", BROADCAST)
def test_binary_broadcast(main, var, name, a, b):
    out = getattr(ops, name)(var(a), var(b))
    assert out.shape == np.broadcast_shapes(a, b)
    assert out.dtype == (popxl.float32 if BINARY_RULES[name] == "arith" else popxl.bool)
    assert out.producer.type == name


def test_binary_errors_and_scalars(main, var):
    with pytest.raises(ValueError, match="broadcast"):
        ops.add(var((2, 3)), var((4,)))
    with pytest.raises(TypeError, match="dtype"):
        ops.add(var((2,)), var((2,), np.float16))
    with pytest.raises(TypeError):
        ops.add(1, 2)
    x = var((2, 3), np.float16)
    out = ops.mul(x, 2)
    assert out.dtype == popxl.float16 and out.producer.inputs[1].dtype == popxl.float16
    assert ops.pow(x, 2).shape == (2, 3)
    assert ops.add(np.ones(3), x).shape == (2, 3)
    with pytest.raises(TypeError):
        ops.sub(var((2,), np.bool_), var((2,), np.bool_))
    lhs_bcast = var((3,))
    with pytest.raises(ValueError, match="in place"):
        ops.add_(lhs_bcast, var((2, 3)))
    assert ops.logical_and(var((2,), np.int32), var((2,), np.bool_)).dtype == popxl.bool


def test_where_maximum_clip_increment_mod_scaled_add(main, var):
    c = var((2, 1), np.bool_)
    assert ops.where(c, var((3,)), 0.0).shape == (2, 3)
    assert ops.where(var((3,), np.int32), var((3,)), var((3,))).producer.inputs[0].dtype == popxl.bool
    assert ops.maximum(var((2, 1)), var((3,)), var(())).shape == (2, 3)
    with pytest.raises(ValueError):
        ops.maximum()
    cl = ops.clip(var((4,)), -1, 1)
    assert cl.producer.attrs == {"min": -1.0, "max": 1.0}
    with pytest.raises(ValueError):
        ops.clip(var((4,)), 2, 1)
    inc = ops.increment_mod_(var((), np.int32), 1, 10)
    assert inc.producer.attrs == {"increment": 1.0, "modulus": 10.0} and inc.producer.modified == (0,)
    sa = ops.scaled_add(var((2, 2)), var((2, 2)), 0.5, popxl.constant(2.0))
    assert sa.producer.attrs["a"] == 0.5 and sa.producer.attrs["b"] is None
    assert sa.producer.attrs["input_names"] == ("X", "Y", "b") and len(sa.producer.inputs) == 3
    assert ops.scaled_add_(var((2,)), var((2,))).producer.aliases == {0: 0}
    with pytest.raises(ValueError):
        ops.scaled_add(var((2,)), var((2,)), popxl.constant([1.0, 2.0]))


def test_scaled_add_mixed_precision_dtypes(main, var):
    """PopART's ScaledAddOp::setup gives the output X's type; poplibs mixes float32 and float16 only."""
    assert ops.scaled_add(var((3,), np.float32), var((3,), np.float16)).dtype == popxl.float32
    assert ops.scaled_add_(var((3,), np.float16), var((3,), np.float32), b=-0.1).dtype == popxl.float16
    with pytest.raises(TypeError, match="same dtype"):
        ops.scaled_add(var((3,), np.int32), var((3,), np.float32))
    with pytest.raises(TypeError, match="same dtype"):
        ops.scaled_add(var((3,), np.float16), var((3,), np.int32))


REDUCTIONS = ["sum", "mean", "max", "min", "prod", "logsum", "logsumexp", "l1", "l2", "sumsquare", "median"]


@pytest.mark.parametrize("name", REDUCTIONS)
@pytest.mark.parametrize("axis", [None, 0, -1, (0, 2), [-1, -3], 1])
@pytest.mark.parametrize("keepdims", [False, True])
def test_reductions(main, var, name, axis, keepdims):
    shape = (2, 3, 4)
    out = getattr(ops, name)(var(shape), axis=axis, keepdims=keepdims)
    np_axis = tuple(axis) if isinstance(axis, list) else axis
    assert out.shape == np.sum(np.zeros(shape), axis=np_axis, keepdims=keepdims).shape
    assert out.dtype == popxl.float32 and out.producer.type == name
    assert out.producer.attrs["axes"] == tuple(sorted(a % 3 for a in (
        range(3) if axis is None else (axis if isinstance(axis, (tuple, list)) else [axis]))))
    if name == "median":
        assert out.producer.outputs[1].dtype == popxl.int32


def test_reduction_errors(main, var):
    with pytest.raises(ValueError):
        ops.sum(var((2, 3)), axis=2)
    with pytest.raises(ValueError):
        ops.sum(var((2, 3)), axis=(0, -2))
    with pytest.raises(ValueError, match="axis 0 of tensor .* is empty"):
        ops.max(var((0, 3)), axis=0)
    assert ops.sum(var((0, 3)), axis=1).shape == (0,)  # an empty axis that is kept is fine


def test_arg_reductions_cumsum_topk(main, var):
    x = var((2, 3, 4))
    assert ops.argmax(x, 1).shape == (2, 4) and ops.argmax(x, 1).dtype == popxl.int32
    assert ops.argmin(x, -1, keepdim=True).shape == (2, 3, 1)
    assert ops.argmax(x).producer.attrs["axis"] == 0
    assert ops.cumsum(x, -1).shape == x.shape and ops.cumsum(x, -1).producer.attrs["axis"] == 2
    values, indices = ops.topk(x, 2, axis=-2, largest=True, sorted=True)
    assert values.shape == (2, 2, 4) and indices.dtype == popxl.int32 and values.dtype == popxl.float32
    with pytest.raises(ValueError):
        ops.topk(x, 5, axis=1, largest=True, sorted=False)
