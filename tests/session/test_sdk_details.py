"""Details of the SDK's popxl that scripts and tests rely on: its exception types and texts (our
advice comes after them), torch tensors as host data, and the seed helpers."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
from popxl.random_seed import create_seeds, two_uint32_to_uint64, uint64_to_two_uint32


def _ir():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((2, 3), np.float32), name="x")
        s = popxl.h2d_stream((2, 3), popxl.float32, "s")
        y = ops.host_load(s) + x
        o = popxl.d2h_stream(y.shape, y.dtype, "o")
        ops.host_store(o, y)
    return ir, x, y, s, o


def test_session_errors_use_the_sdk_words():
    ir, x, y, s, o = _ir()
    sess = popxl.Session(ir, "ipu_model")
    with pytest.raises(ValueError, match=r"^Must be attached to device before calling a runtime function\. Put the "
                                         r"call inside a `Session` context, for example `with session: session\.run\(\)`\."):
        sess.run({s: np.zeros((2, 3), np.float32)})
    with sess:
        with pytest.raises(TypeError, match=r"is not of type Constant or Variable\. get_tensor_data is not supported"):
            sess.get_tensor_data(y)
        with pytest.raises(TypeError, match=r"is not of type Constant or Variable"):
            sess.get_tensors_data([x, y])
        with pytest.raises(TypeError, match=r"^Tensor add_out\S* is not of type Variable\. write_variable_data is not "
                                            r"supported for this type\."):
            sess.write_variable_data(y, np.zeros((2, 3), np.float32))
        with pytest.raises(TypeError, match=r"^The dtype of the input array float64 must match the equivalent type of "
                                            r"the tensor x : popxl.dtypes.float32"):
            sess.write_variable_data(x, np.zeros((2, 3)))
        with pytest.raises(ValueError, match=r"^The shape of the input array \(3, 2\) must match the shape of the "
                                             r"tensor x : \(2, 3\)"):
            sess.write_variable_data(x, np.zeros((3, 2), np.float32))
        # nothing the user gave was changed by the refused calls
        np.testing.assert_array_equal(sess.get_tensor_data(x), np.zeros((2, 3), np.float32))


def test_comparing_an_ir_with_something_else_is_a_type_error():
    ir = popxl.Ir()
    assert ir == ir and not (ir == popxl.Ir())
    with pytest.raises(TypeError, match="Value must be of type popxl.Ir"):
        _ = ir == 3


def test_torch_tensors_as_host_data():
    torch = pytest.importorskip("torch", reason="PyTorch is optional; these checks need it installed")
    from popxl.dtypes import dtype
    assert dtype.as_dtype(torch.int32) is popxl.int32 and dtype.as_dtype(torch.float16) is popxl.float16
    assert dtype.as_dtype(torch.zeros(2, dtype=torch.bool)) is popxl.bool
    assert popxl.float32.as_torch() is torch.float32 and popxl.int8.as_torch() is torch.int8
    with pytest.raises(TypeError):
        popxl.uint32.as_torch()  # PopXL maps no unsigned type wider than 8 bits to torch
    with pytest.raises(ValueError, match="torch.bfloat16"):
        dtype.as_dtype(torch.bfloat16)
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(torch.arange(6, dtype=torch.float64).reshape(2, 3), name="w")  # downcast as NumPy data
        s = popxl.h2d_stream((2, 3), popxl.float32, "s")
        y = ops.host_load(s) * w
        o = popxl.d2h_stream(y.shape, y.dtype, "o")
        ops.host_store(o, y)
    assert w.dtype == popxl.float32
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run({s: torch.full((2, 3), 2.0, requires_grad=True)})[o]
    np.testing.assert_array_equal(out, 2 * np.arange(6, dtype=np.float32).reshape(2, 3))


def _stand_in_torch():
    """A module shaped like torch where popxl looks (torch is not installed here): `torch.dtype`
    objects printing as 'torch.<name>', tensors of class torch.Tensor with `.dtype` and
    `.detach().cpu().numpy()`; real torch has the same module and names."""
    import types
    torch = types.ModuleType("torch")

    class dtype:  # noqa: N801 - torch's name
        def __init__(self, name):
            self.name = name

        def __repr__(self):
            return f"torch.{self.name}"

    class Tensor:
        def __init__(self, data, requires_grad=False):
            self._data, self.requires_grad = np.asarray(data), requires_grad
            self.dtype = getattr(torch, self._data.dtype.name)

        def detach(self):
            return Tensor(self._data)

        def cpu(self):
            return self

        def numpy(self):
            if self.requires_grad:
                raise RuntimeError("Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy()")
            return self._data

    for cls in (dtype, Tensor):
        cls.__module__ = "torch"
    torch.dtype, torch.Tensor = dtype, Tensor
    for name in ("bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32", "float64", "bfloat16"):
        setattr(torch, name, dtype(name))
    return torch


def test_torch_objects_as_host_data_without_torch(monkeypatch):
    """The torch path of dtypes, variables and session inputs, run here without PyTorch."""
    import sys
    torch = _stand_in_torch()
    monkeypatch.setitem(sys.modules, "torch", torch)
    from popxl.dtypes import dtype
    assert dtype.as_dtype(torch.int32) is popxl.int32 and dtype.as_dtype(torch.float16) is popxl.float16
    assert dtype.as_dtype(torch.Tensor(np.zeros(2, bool))) is popxl.bool
    assert popxl.float32.as_torch() is torch.float32
    with pytest.raises(TypeError):
        popxl.uint32.as_torch()
    with pytest.raises(ValueError, match="torch.bfloat16"):
        dtype.as_dtype(torch.bfloat16)
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(torch.Tensor(np.arange(6.0).reshape(2, 3)), name="w")  # float64: downcast
        s = popxl.h2d_stream((2, 3), popxl.float32, "s")
        o = popxl.d2h_stream((2, 3), popxl.float32, "o")
        ops.host_store(o, ops.host_load(s) * w)
    assert w.dtype == popxl.float32
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run({s: torch.Tensor(np.full((2, 3), 2.0, np.float32), requires_grad=True)})[o]
    np.testing.assert_array_equal(out, 2 * np.arange(6, dtype=np.float32).reshape(2, 3))


def test_dtypes_do_not_import_torch(monkeypatch):
    import sys
    monkeypatch.setitem(sys.modules, "torch", None)  # importing torch would fail
    assert popxl.dtypes.dtype.as_dtype(np.float32) is popxl.float32
    assert popxl.dtypes.dtype.as_dtype("int8") is popxl.int8


def test_seed_helpers_follow_popxl():
    seeds = create_seeds(42, batches_per_step=4, replicas=2)
    assert seeds.shape == (4, 2, 2) and seeds.dtype == np.uint32
    assert create_seeds(42).shape == (2,)  # size-1 dims dropped
    assert np.array_equal(create_seeds(42, offset=1), create_seeds(43))
    # each seed is a uint64 drawn by NumPy's default generator, split most significant word first
    draw = np.random.default_rng(42).integers(0, 2**64 - 1, endpoint=True, dtype=np.uint64, size=1)[0]
    assert two_uint32_to_uint64(*create_seeds(42)) == int(draw)
    assert uint64_to_two_uint32(2**40 + 5) == (256, 5)
    with pytest.raises(ValueError, match="cannot be represented as a uint64"):
        uint64_to_two_uint32(2**64)
    with pytest.raises(ValueError, match="Either `a` or `b` are negative"):
        two_uint32_to_uint64(-1, 0)


def test_random_ops_take_a_two_word_uint32_seed():
    ir = popxl.Ir()
    with ir.main_graph:
        seed_s = popxl.h2d_stream((2,), popxl.uint32, "seed")
        seed = ops.host_load(seed_s)
        u = ops.random_uniform(seed, (1000,), low=-1.0, high=3.0)
        n = ops.random_normal(seed, (1000,), mean=5.0, std=0.5)
        o1, o2 = popxl.d2h_stream(u.shape, u.dtype, "u"), popxl.d2h_stream(n.shape, n.dtype, "n")
        ops.host_store(o1, u)
        ops.host_store(o2, n)
    with popxl.Session(ir, "ipu_model") as sess:
        a = sess.run({seed_s: create_seeds(7)})
        b = sess.run({seed_s: create_seeds(7)})
        c = sess.run({seed_s: create_seeds(8)})
    assert np.array_equal(a[o1], b[o1]) and not np.array_equal(a[o1], c[o1])  # the seed decides
    assert a[o1].min() >= -1.0 and a[o1].max() < 3.0 and abs(a[o1].mean() - 1.0) < 0.15
    assert abs(a[o2].mean() - 5.0) < 0.06 and abs(a[o2].std() - 0.5) < 0.05


def test_host_data_that_does_not_fit_its_narrower_type_is_refused():
    with popxl.Ir().main_graph:
        assert popxl.variable(np.array([1, 2**31 - 1])).dtype == popxl.int32  # downcast, values kept
        with pytest.raises(ValueError, match=r"int64 data does not fit the int32.*1099511627776"):
            popxl.variable(np.array([3, 2**40]))
        with pytest.raises(ValueError, match=r"does not fit the int16"):
            popxl.constant(np.array([70000], np.int32), popxl.int16)
        with pytest.raises(ValueError, match=r"would become inf"):
            popxl.constant(1e300)
        # a narrowing to a float type the user names follows IEEE (out of range is inf, with NumPy's warning)
        with pytest.warns(RuntimeWarning, match="overflow"):
            assert popxl.constant(1e300, popxl.float16).dtype == popxl.float16


def test_inputs_on_different_ipus_are_refused_in_popxl_words():
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.ones(4, np.float32))
        with popxl.ipu(0):
            x = ops.relu(v)
        with popxl.ipu(1):
            y = ops.relu(v)
        with pytest.raises(ValueError, match=r"The input tensors `lhs` and `rhs` are located on different IPUs: "
                                             r"0 != 1\. Copy one of them with `ops.ipu_copy` first"):
            ops.add(x, y)
        # PopXL's helper names the keyword arguments it is given
        from popxl.ops.utils import check_tensor_ipu_and_tile_set
        with pytest.raises(ValueError, match=r"`first` and `second` are located on different IPUs"):
            check_tensor_ipu_and_tile_set(first=x, second=y)


@pytest.mark.parametrize("build", [
    lambda: ops.relu([1.0]),
    lambda: ops.gather([1.0], popxl.constant(np.zeros(1, np.int32))),
    lambda: ops.sum([1.0]),
    lambda: ops.host_store(popxl.d2h_stream((1,), popxl.float32), [1.0]),
    lambda: ops.dropout([1.0], None, 0.5),
    lambda: ops.where([True], popxl.constant(1.0), popxl.constant(2.0)),
])
def test_a_non_tensor_input_is_refused_in_popxl_words(build):
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(TypeError, match=r"^The input `\w+` is not a Tensor\. Type: <class '\w+'>\. Value: "):
            build()
