"""TensorInfo, DataType and the dtype names PopART uses ("FLOAT", "FLOAT16", "INT32", ...)."""
from __future__ import annotations

import enum
from typing import Iterable

import numpy as np
import onnx

from .errors import popart_exception


class DataType(enum.Enum):
    UINT8 = "UINT8"
    INT8 = "INT8"
    UINT16 = "UINT16"
    INT16 = "INT16"
    INT32 = "INT32"
    INT64 = "INT64"
    UINT32 = "UINT32"
    UINT64 = "UINT64"
    BOOL = "BOOL"
    FLOAT = "FLOAT"
    FLOAT16 = "FLOAT16"
    BFLOAT16 = "BFLOAT16"
    FLOAT8_143 = "FLOAT8_143"
    FLOAT8_152 = "FLOAT8_152"
    DOUBLE = "DOUBLE"
    COMPLEX64 = "COMPLEX64"
    COMPLEX128 = "COMPLEX128"
    STRING = "STRING"
    UNDEFINED = "UNDEFINED"


# PopART type name -> (ONNX TensorProto enum, NumPy dtype or None)
_TYPES = {
    "UINT8": (onnx.TensorProto.UINT8, np.uint8), "INT8": (onnx.TensorProto.INT8, np.int8),
    "UINT16": (onnx.TensorProto.UINT16, np.uint16), "INT16": (onnx.TensorProto.INT16, np.int16),
    "INT32": (onnx.TensorProto.INT32, np.int32), "INT64": (onnx.TensorProto.INT64, np.int64),
    "UINT32": (onnx.TensorProto.UINT32, np.uint32), "UINT64": (onnx.TensorProto.UINT64, np.uint64),
    "BOOL": (onnx.TensorProto.BOOL, np.bool_), "FLOAT": (onnx.TensorProto.FLOAT, np.float32),
    "FLOAT16": (onnx.TensorProto.FLOAT16, np.float16), "BFLOAT16": (onnx.TensorProto.BFLOAT16, None),
    "DOUBLE": (onnx.TensorProto.DOUBLE, np.float64), "COMPLEX64": (onnx.TensorProto.COMPLEX64, np.complex64),
    "COMPLEX128": (onnx.TensorProto.COMPLEX128, np.complex128), "STRING": (onnx.TensorProto.STRING, None),
}
_ALIASES = {"FLOAT32": "FLOAT", "HALF": "FLOAT16", "FLOAT64": "DOUBLE"}
_BY_ONNX = {v[0]: k for k, v in _TYPES.items()}
_BY_NUMPY = {np.dtype(v[1]): k for k, v in _TYPES.items() if v[1] is not None}


def type_name(dtype) -> str:
    """PopART's upper-case type name of a DataType, a name ("float32", "FLOAT"), a NumPy dtype or
    an ONNX TensorProto enum."""
    if isinstance(dtype, DataType):
        return dtype.value
    if isinstance(dtype, str):
        key = dtype.upper()
        key = _ALIASES.get(key, key)
        if key in _TYPES:
            return key
        try:
            return _BY_NUMPY[np.dtype(dtype.lower())]
        except (TypeError, KeyError):
            pass
        raise popart_exception(f"Unknown data type {dtype!r}; use one of {sorted(_TYPES)}")
    if isinstance(dtype, (int, np.integer)) and not isinstance(dtype, bool):
        if int(dtype) in _BY_ONNX:
            return _BY_ONNX[int(dtype)]
        raise popart_exception(f"Unknown ONNX data type enum {dtype}")
    try:
        return _BY_NUMPY[np.dtype(dtype)]
    except (TypeError, KeyError):
        raise popart_exception(f"Unknown data type {dtype!r}") from None


def onnx_type(dtype) -> int:
    return _TYPES[type_name(dtype)][0]


def numpy_type(dtype) -> np.dtype:
    name = type_name(dtype)
    npt = _TYPES[name][1]
    if npt is None:
        raise popart_exception(f"Data type {name} has no NumPy equivalent")
    return np.dtype(npt)


class TensorInfo:
    """A data type and a shape: `TensorInfo("FLOAT", [2, 3])`, `TensorInfo(DataType.FLOAT, [2, 3])`
    or `TensorInfo(numpy_array)`."""

    def __init__(self, *args):
        if len(args) == 1 and isinstance(args[0], np.ndarray):
            self._type = type_name(args[0].dtype)
            self._shape = list(args[0].shape)
        elif len(args) == 2:
            self._type = type_name(args[0])
            if not isinstance(args[1], Iterable) or isinstance(args[1], str):
                raise TypeError(f"TensorInfo shape must be a list of ints, not {args[1]!r}")
            self._shape = [int(d) for d in args[1]]
        else:
            raise TypeError("TensorInfo takes (dtype, shape) or (numpy.ndarray,)")

    def shape(self) -> list:
        return list(self._shape)

    def rank(self) -> int:
        return len(self._shape)

    def nelms(self) -> int:
        return int(np.prod(self._shape, dtype=np.int64))

    def dataType(self) -> str:  # noqa: N802
        return self._type

    def data_type(self) -> str:
        return self._type

    def data_type_lcase(self) -> str:
        return self._type.lower()

    def numpy_dtype(self) -> np.dtype:
        return numpy_type(self._type)

    def nbytes(self) -> int:
        return self.nelms() * numpy_type(self._type).itemsize

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorInfo) and (self._type, self._shape) == (other._type, other._shape)

    def __repr__(self) -> str:
        return f"TensorInfo({self._type}, {self._shape})"

    __str__ = __repr__
