"""Element types held in tile memory.

Each type has a host NumPy dtype (what users read and write) and a storage dtype: the typed view
of tile memory that kernels receive. float16 is stored as a one-field record of uint16 bits, so
Numba (which has no CPU float16) sees a distinct type and kernels convert through
`ipu.half.load`/`store`.

The two float8 formats (Graphcore's 1-4-3 and 1-5-2, poplar QUARTER) take one byte per element.
Their host encoding, as PopXL has it, is a NumPy structured dtype of one uint8 field named after
the format; storage is the same record, so Numba sees two distinct types (told apart by the field
name, `float8_format`) and no kernel mistakes them for half's record of uint16 bits.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

__all__ = ["ALL_TYPES", "BOOL", "FLOAT16", "FLOAT32", "HALF_STORAGE", "INT8", "INT16", "INT32", "UINT8",
           "UINT16", "UINT32", "ElementType", "element_type"]

HALF_STORAGE = np.dtype([("bits", np.uint16)])
FLOAT8_143_NUMPY = np.dtype([("float8_143", np.uint8)])
FLOAT8_152_NUMPY = np.dtype([("float8_152", np.uint8)])


@dataclass(frozen=True)
class ElementType:
    name: str
    numpy: np.dtype
    storage: np.dtype

    @property
    def itemsize(self) -> int:
        return self.numpy.itemsize

    @property
    def is_float(self) -> bool:
        return self.numpy.kind == "f"

    @property
    def is_float8(self) -> bool:
        return self.name in FLOAT8_NAMES

    def __repr__(self) -> str:
        return self.name


FLOAT32 = ElementType("float32", np.dtype(np.float32), np.dtype(np.float32))
FLOAT16 = ElementType("float16", np.dtype(np.float16), HALF_STORAGE)
INT32 = ElementType("int32", np.dtype(np.int32), np.dtype(np.int32))
UINT32 = ElementType("uint32", np.dtype(np.uint32), np.dtype(np.uint32))
INT16 = ElementType("int16", np.dtype(np.int16), np.dtype(np.int16))
UINT16 = ElementType("uint16", np.dtype(np.uint16), np.dtype(np.uint16))
INT8 = ElementType("int8", np.dtype(np.int8), np.dtype(np.int8))
UINT8 = ElementType("uint8", np.dtype(np.uint8), np.dtype(np.uint8))
BOOL = ElementType("bool", np.dtype(np.bool_), np.dtype(np.bool_))
FLOAT8_143 = ElementType("float8_143", FLOAT8_143_NUMPY, FLOAT8_143_NUMPY)
FLOAT8_152 = ElementType("float8_152", FLOAT8_152_NUMPY, FLOAT8_152_NUMPY)
FLOAT8_NAMES = ("float8_143", "float8_152")

# the types codelets compute with; float8 data is only moved and converted (the casts, the AMP)
ALL_TYPES = (FLOAT32, FLOAT16, INT32, UINT32, INT16, UINT16, INT8, UINT8, BOOL)
FLOAT8_TYPES = (FLOAT8_143, FLOAT8_152)
_BY_NAME = {t.name: t for t in ALL_TYPES + FLOAT8_TYPES}
_BY_NUMPY = {t.numpy: t for t in ALL_TYPES + FLOAT8_TYPES}


def element_type(x) -> ElementType:
    """An ElementType from an ElementType, a name, or anything NumPy accepts as a dtype."""
    if isinstance(x, ElementType):
        return x
    if isinstance(x, str) and x in _BY_NAME:
        return _BY_NAME[x]
    try:
        npd = np.dtype(x)
    except TypeError:
        npd = None
    if npd is not None and npd in _BY_NUMPY:
        return _BY_NUMPY[npd]
    raise TypeError(
        f"{x!r} is not a type tile memory holds; use one of {', '.join(_BY_NAME)} "
        f"(64-bit data must be cast to 32-bit first)."
    )
