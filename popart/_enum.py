"""The base of PopART's Python enums: pybind11 enums, as PopART's module binds them, convert to
int (``int(popart.RecomputationType.Standard)``, as PopTorch scripts pass them to
``Options._Popart.set``) and serve as an index."""
from __future__ import annotations

import enum


class PybindEnum(enum.Enum):
    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return int(self.value)
