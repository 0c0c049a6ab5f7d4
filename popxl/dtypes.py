"""Element types of PopXL tensors.

Every popxl dtype is a unique instance of :class:`dtype`; compare them with ``==`` or ``is``.
The module-level names (``popxl.float32`` ...) are those instances.  The two float8
formats have no native NumPy type: as in PopXL, their host arrays are structured dtypes of one
uint8 field named after the format (``np_dtype_float8_143`` = ``np.dtype([("float8_143", "u1")])``),
holding the encoded bytes.
"""

import builtins
from typing import Any, Dict, Optional, Union

import numpy as np

__all__ = [
    "dtype", "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float8_143", "float8_152", "float16", "float32", "float64", "complex64", "complex128",
    "half", "float", "double", "downcast_np_dtypes", "downcast_numpy_dtype",
    "np_dtype_float8_143", "np_dtype_float8_152",
]

np_dtype_float8_143 = np.dtype([("float8_143", "u1")])
np_dtype_float8_152 = np.dtype([("float8_152", "u1")])

_BY_NAME: Dict[str, "dtype"] = {}
_BY_NUMPY: Dict[np.dtype, "dtype"] = {}
_BY_PYTHON: Dict[Any, "dtype"] = {}

# 64-bit host data is narrowed to the IPU's 32-bit types when ``downcast=True``.
downcast_np_dtypes = {
    np.dtype("int64"): np.dtype("int32"),
    np.dtype("uint64"): np.dtype("uint32"),
    np.dtype("float64"): np.dtype("float32"),
}


def downcast_numpy_dtype(np_dtype: np.dtype) -> np.dtype:
    """The 32-bit NumPy dtype a 64-bit one is narrowed to (others are returned unchanged)."""
    np_dtype = np.dtype(np_dtype)
    return downcast_np_dtypes.get(np_dtype, np_dtype)


class dtype:
    """The type of the elements of a tensor.

    Instances cannot be created by users; use the module-level instances such as
    ``popxl.float32`` or the constructors :meth:`from_name` and :meth:`as_dtype`.
    Aliases: ``half`` is ``float16``, ``float`` is ``float32``, ``double`` is ``float64``.
    """

    __slots__ = ("_name", "_is_complex", "_is_int", "_is_floating_point", "_is_signed",
                 "_np_type", "_py_type", "_itemsize")
    # set by _make (the constructor is closed to users); `bool` etc. are dtypes in this module
    _name: builtins.str
    _is_complex: builtins.bool
    _is_int: builtins.bool
    _is_floating_point: builtins.bool
    _is_signed: builtins.bool
    _itemsize: builtins.int
    _np_type: np.dtype  # float8: the structured dtype of the encoded bytes
    _py_type: Any  # the Python type that maps to it (int, float, ...), or None

    def __init__(self) -> None:
        raise TypeError(f"Cannot create {self.__module__}.dtype instances.")

    @classmethod
    def _make(cls, name: str, kind: str, signed: builtins.bool, itemsize: int,
              np_type: Union[str, np.dtype], py_type: Any = None) -> "dtype":
        self = object.__new__(cls)
        self._name = name
        self._is_complex = kind == "complex"
        self._is_int = kind == "int"
        self._is_floating_point = kind == "float"
        self._is_signed = signed
        self._itemsize = itemsize
        self._np_type = np.dtype(np_type)
        self._py_type = py_type
        _BY_NAME[name] = self
        _BY_NUMPY[self._np_type] = self
        if py_type is not None:
            _BY_PYTHON[py_type] = self
        return self

    @property
    def name(self) -> str:
        """The name of the dtype, for example ``'float32'``."""
        return self._name

    @property
    def is_complex(self) -> builtins.bool:
        return self._is_complex

    @property
    def is_int(self) -> builtins.bool:
        return self._is_int

    @property
    def is_floating_point(self) -> builtins.bool:
        return self._is_floating_point

    @property
    def is_signed(self) -> builtins.bool:
        return self._is_signed

    @property
    def itemsize(self) -> int:
        """Bytes per element on the device."""
        return self._itemsize

    @classmethod
    def from_name(cls, name: str) -> "dtype":
        """Return the dtype called ``name`` (``'float32'``, ``'half'``, ...)."""
        try:
            return _BY_NAME[name]
        except (KeyError, TypeError):
            raise ValueError(f"There is no popxl.dtype with the name: {name!r}.") from None

    @classmethod
    def as_dtype(cls, type_value: Any) -> "dtype":
        """Convert a popxl dtype, dtype name, NumPy dtype / scalar type, Python type, PyTorch dtype
        or array / torch tensor (anything with a ``.dtype``) to a popxl dtype."""
        if isinstance(type_value, dtype):
            return type_value
        from_torch = _from_torch(type_value)
        if from_torch is not None:
            return from_torch
        if isinstance(type_value, str):
            if type_value in _BY_NAME:
                return _BY_NAME[type_value]
        else:
            try:
                if type_value in _BY_PYTHON:
                    return _BY_PYTHON[type_value]
            except TypeError:
                pass
        if hasattr(type_value, "dtype") and not isinstance(type_value, type):
            inner = type_value.dtype
            if isinstance(inner, dtype):
                return inner
            try:
                return _BY_NUMPY[np.dtype(inner)]
            except (KeyError, TypeError):
                pass
        try:
            return _BY_NUMPY[np.dtype(type_value)]
        except (KeyError, TypeError):
            pass
        raise ValueError(
            f"There is no popxl.dtype compatible with value: {type_value!r}, type: {type(type_value)}.")

    def as_numpy(self) -> np.dtype:
        """The NumPy dtype of this dtype (for float8: the structured dtype of the encoded bytes)."""
        return self._np_type

    def as_torch(self):
        """The PyTorch dtype of this dtype (needs PyTorch installed)."""
        try:
            import torch  # noqa: F401
        except ModuleNotFoundError:
            raise ModuleNotFoundError("PyTorch is not installed.") from None
        import torch
        pt = getattr(torch, self._name, None) if self._name in _TORCH_NAMES else None
        if pt is None:
            raise TypeError(f"popxl.{self._name} does not have a corresponding PyTorch dtype.")
        return pt

    def __repr__(self) -> str:
        return f"popxl.dtypes.{self._name}"

    def __reduce__(self):
        return (dtype.from_name, (self._name,))

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


# The popxl dtypes PyTorch has, by the name both libraries give them (PopXL maps no unsigned type
# wider than 8 bits and no float8 to torch). torch is imported only when a value is a torch object.
_TORCH_NAMES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "float16", "float32",
                          "float64", "complex64", "complex128"})


def _from_torch(value: Any) -> Optional["dtype"]:
    """The popxl dtype of a torch dtype or torch tensor; None for anything that is not from torch."""
    kind = type(value)
    if not kind.__module__.startswith("torch"):
        return None
    torch_dtype = value if kind.__name__ == "dtype" else getattr(value, "dtype", None)
    name = str(torch_dtype).rpartition(".")[2]
    if name in _TORCH_NAMES:
        return _BY_NAME[name]
    raise ValueError(
        f"There is no popxl.dtype compatible with value: {value!r}, type: {kind}. PopXL maps these PyTorch "
        f"dtypes: {', '.join('torch.' + n for n in sorted(_TORCH_NAMES))}.")


# name, kind, signed, bytes, numpy type, python type
bool = dtype._make("bool", "bool", False, 1, "bool", builtins.bool)
int8 = dtype._make("int8", "int", True, 1, "int8")
int16 = dtype._make("int16", "int", True, 2, "int16")
int32 = dtype._make("int32", "int", True, 4, "int32")
int64 = dtype._make("int64", "int", True, 8, "int64", builtins.int)
uint8 = dtype._make("uint8", "int", False, 1, "uint8")
uint16 = dtype._make("uint16", "int", False, 2, "uint16")
uint32 = dtype._make("uint32", "int", False, 4, "uint32")
uint64 = dtype._make("uint64", "int", False, 8, "uint64")
float8_143 = dtype._make("float8_143", "float", True, 1, np_dtype_float8_143)
float8_152 = dtype._make("float8_152", "float", True, 1, np_dtype_float8_152)
float16 = dtype._make("float16", "float", True, 2, "float16")
float32 = dtype._make("float32", "float", True, 4, "float32", builtins.float)
float64 = dtype._make("float64", "float", True, 8, "float64")
complex64 = dtype._make("complex64", "complex", True, 8, "complex64")
complex128 = dtype._make("complex128", "complex", True, 16, "complex128", builtins.complex)

half = float16
float = float32
double = float64

FLOAT8_DTYPES = (float8_143, float8_152)
