import numpy as np
import pytest

import popxl
from popxl import dtypes
from popxl.utils import table_to_string, to_numpy


def test_module_level_dtypes_and_properties():
    assert popxl.float32 is dtypes.float32 and popxl.float is popxl.float32
    assert popxl.half is popxl.float16 and popxl.double is popxl.float64
    assert popxl.float32.name == "float32"
    assert popxl.int8.is_int and popxl.int8.is_signed and not popxl.int8.is_floating_point
    assert popxl.uint16.is_int and not popxl.uint16.is_signed
    assert popxl.float16.is_floating_point and popxl.float16.is_signed
    assert popxl.complex64.is_complex and not popxl.bool.is_int
    assert not popxl.bool.is_floating_point and not popxl.bool.is_signed
    assert popxl.float8_143.is_floating_point
    with pytest.raises(TypeError):
        popxl.dtype()


@pytest.mark.parametrize("value, expected", [
    ("float16", dtypes.float16), ("int32", dtypes.int32), (np.float32, dtypes.float32),
    (np.dtype("uint8"), dtypes.uint8), (float, dtypes.float32), (bool, dtypes.bool), (int, dtypes.int64),
    (np.zeros(2, np.int16), dtypes.int16), (np.float64(1.0), dtypes.float64), (dtypes.uint64, dtypes.uint64),
    ("half", dtypes.float16), (complex, dtypes.complex128),
])
def test_as_dtype(value, expected):
    assert dtypes.dtype.as_dtype(value) is expected


def test_from_name_and_errors():
    assert dtypes.dtype.from_name("bool") is popxl.bool
    with pytest.raises(ValueError):
        dtypes.dtype.from_name("float128")
    with pytest.raises(ValueError):
        dtypes.dtype.as_dtype(object)


def test_as_numpy():
    for d in (popxl.bool, popxl.int8, popxl.int16, popxl.int32, popxl.int64, popxl.uint8, popxl.uint16,
              popxl.uint32, popxl.uint64, popxl.float16, popxl.float32, popxl.float64, popxl.complex64,
              popxl.complex128):
        assert dtypes.dtype.as_dtype(d.as_numpy()) is d
    assert popxl.float8_152.as_numpy() == np.dtype([("float8_152", "u1")])  # the encoded bytes, as PopXL
    assert dtypes.dtype.as_dtype(popxl.float8_143.as_numpy()) is popxl.float8_143


@pytest.mark.parametrize("data, downcast, expected", [
    (np.zeros(3, np.float64), True, np.float32), (np.zeros(3, np.int64), True, np.int32),
    (np.zeros(3, np.uint64), True, np.uint32), (np.zeros(3, np.float64), False, np.float64),
    (1.5, True, np.float32), (3, True, np.int32), ([1, 2], False, np.int64), (True, True, np.bool_),
    (np.zeros(2, np.float16), True, np.float16),
])
def test_to_numpy_downcast(data, downcast, expected):
    assert to_numpy(data, downcast=downcast).dtype == expected


def test_to_numpy_explicit_dtype_and_copy():
    src = np.arange(4, dtype=np.float64)
    out = to_numpy(src, popxl.int16)
    assert out.dtype == np.int16 and out.flags.c_contiguous
    same = to_numpy(np.arange(3, dtype=np.float32))
    assert same.dtype == np.float32
    arr = np.arange(3, dtype=np.float32)
    assert not np.shares_memory(to_numpy(arr), arr)
    assert to_numpy(np.arange(6, dtype=np.float32).reshape(2, 3).T).flags.c_contiguous
    f8 = to_numpy([1.0, 3.0], popxl.float8_143, log2_scale=1)
    assert f8.dtype == popxl.float8_143.as_numpy() and f8.view(np.uint8).tolist() == [0x48, 0x54]
    assert to_numpy(f8, popxl.float8_143).view(np.uint8).tolist() == [0x48, 0x54]  # already encoded: kept
    with pytest.raises(TypeError, match="host_pow2scale_cast_from_fp8"):
        to_numpy(f8, popxl.float8_152)
    with pytest.raises(RuntimeError):
        to_numpy([1.0], popxl.float32, log2_scale=1)


def test_variable_and_constant_data_conversion(main):
    user = np.arange(6, dtype=np.float64).reshape(2, 3)
    v = popxl.variable(user, name="v")
    assert v.dtype == popxl.float32 and v._data.dtype == np.float32
    user[0, 0] = 100.0
    assert v._data[0, 0] == 0.0  # the user's array was copied
    v64 = popxl.variable(user, downcast=False)
    assert v64.dtype == popxl.float64
    c = popxl.constant([1, 2, 3], popxl.uint8)
    assert c.dtype == popxl.uint8 and c._data.dtype == np.uint8
    assert popxl.constant(7).dtype == popxl.int32 and popxl.constant(7).shape == ()
    f16 = popxl.variable(np.ones(2, np.float32), popxl.float16)
    assert f16._data.dtype == np.float16
    f8 = popxl.variable([1.0, 500.0], popxl.float8_143, nan_on_overflow=False)
    assert f8.dtype == popxl.float8_143 and f8._data.view(np.uint8).tolist() == [0x40, 0x7F]


def test_table_to_string():
    text = table_to_string([("a", "long"), (10, 2)])
    lines = text.splitlines()
    assert lines[0].startswith("a ") and set(lines[1]) == {"-"} and lines[2].startswith("10")
