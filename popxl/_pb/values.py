"""Small value types of `_internal.ir`: GraphId, TensorInfo, Region, expected connections of
gradient graphs, BwdGraphInfo and the settings of an op about to be created."""
from __future__ import annotations

import builtins  # the classes below have PopART's method `str`, which hides the type in their bodies
from enum import Enum
from typing import Iterable, List, Optional, Sequence

from popxl.context import ExecutionContext

__all__ = ["GraphId", "TensorInfo", "Region", "Regions", "any_modified", "ExpectedConnectionType",
           "ExpectedConnection", "BwdGraphInfo", "OpSettings"]


class GraphId:
    """A graph's id (`_ir.GraphId`): compares equal to another GraphId of the same string."""

    def __init__(self, s: str = ""):
        self._s = str(s)

    def str(self) -> str:  # noqa: A003 - PopART's name
        return self._s

    def __eq__(self, other) -> bool:
        if isinstance(other, GraphId):
            return self._s == other._s
        return isinstance(other, str) and self._s == other

    def __hash__(self) -> int:
        return hash(self._s)

    def __str__(self) -> builtins.str:
        return self._s

    def __repr__(self) -> builtins.str:
        return f"GraphId({self._s!r})"


_DATA_TYPES = {"float32": "FLOAT", "float16": "FLOAT16", "float64": "DOUBLE", "int8": "INT8", "int16": "INT16",
               "int32": "INT32", "int64": "INT64", "uint8": "UINT8", "uint16": "UINT16", "uint32": "UINT32",
               "uint64": "UINT64", "bool": "BOOL", "float8_143": "FLOAT8_143", "float8_152": "FLOAT8_152"}


class TensorInfo:
    """Shape and type of a tensor (`_ir.TensorInfo`)."""

    def __init__(self, dtype, shape, meta_shape=()):
        self._dtype = dtype
        self._shape = tuple(int(s) for s in shape)
        self._meta = tuple(meta_shape or ())

    def shape(self) -> List[int]:
        return list(self._shape)

    def metaShape(self) -> List[int]:  # noqa: N802
        return list(self._meta)

    def rank(self) -> int:
        return len(self._shape)

    def nelms(self) -> int:
        n = 1
        for s in self._shape:
            n *= s
        return n

    def nbytes(self) -> int:
        return self.nelms() * self._dtype.itemsize

    def dataType(self) -> str:  # noqa: N802
        return _DATA_TYPES.get(self._dtype.name, self._dtype.name.upper())

    def data_type_lcase(self) -> str:
        return self._dtype.name

    def __eq__(self, other) -> bool:
        return isinstance(other, TensorInfo) and (self._dtype, self._shape) == (other._dtype, other._shape)

    def __repr__(self) -> str:
        return f"TensorInfo({self.dataType()}, {list(self._shape)})"


class Region:
    """A box of a tensor (`_ir.view.Region`): lower and upper corner, or empty.

    The simulator's IR records whether an op modifies an input, not which part: a non-empty region
    marks the whole input modified (what PopART does when it cannot prove less)."""

    def __init__(self, lower: Sequence[int], upper: Sequence[int]):
        self._lower = [int(x) for x in lower]
        self._upper = [int(x) for x in upper]
        if len(self._lower) != len(self._upper):
            raise ValueError("Region: lower and upper must have the same rank")

    @staticmethod
    def getFull(shape: Sequence[int]) -> "Region":  # noqa: N802
        return Region([0] * len(shape), list(shape))

    @staticmethod
    def getEmpty(rank: int) -> "Region":  # noqa: N802
        return Region([0] * rank, [0] * rank)

    def isEmpty(self) -> bool:  # noqa: N802
        return any(u <= lo for lo, u in zip(self._lower, self._upper)) if self._lower else False

    def getLower(self) -> List[int]:  # noqa: N802
        return list(self._lower)

    def getUpper(self) -> List[int]:  # noqa: N802
        return list(self._upper)

    def rank(self) -> int:
        return len(self._lower)

    def nelms(self) -> int:
        n = 1
        for lo, u in zip(self._lower, self._upper):
            n *= max(0, u - lo)
        return n

    def __eq__(self, other) -> bool:
        return isinstance(other, Region) and (self._lower, self._upper) == (other._lower, other._upper)

    def __repr__(self) -> str:
        return f"Region(L={self._lower}, U={self._upper})"


Regions = List[Region]


def any_modified(regions) -> bool:
    if isinstance(regions, Region):
        regions = [regions]
    return any(not r.isEmpty() for r in regions)


class ExpectedConnectionType(Enum):
    Fwd = 0
    FwdGrad = 1


class ExpectedConnection:
    """`_ir.ExpectedConnection`: a forward tensor id and how a gradient graph connects to it."""

    def __init__(self, fwdId: str, type: ExpectedConnectionType):  # noqa: N803,A002
        if not isinstance(type, ExpectedConnectionType):
            type = ExpectedConnectionType[getattr(type, "name", str(type))]
        self.fwdId = str(fwdId)
        self.type = type

    def __eq__(self, other) -> bool:
        return isinstance(other, ExpectedConnection) and (self.fwdId, self.type) == (other.fwdId, other.type)

    def __repr__(self) -> str:
        return f"ExpectedConnection({self.fwdId!r}, {self.type.name})"


class BwdGraphInfo:
    """`_ir.BwdGraphInfo`: a backward graph id and its expected inputs and outputs."""

    def __init__(self, bwdGraphId, expectedInputs: Iterable[ExpectedConnection],  # noqa: N803
                 expectedOutputs: Iterable[ExpectedConnection]):  # noqa: N803
        self.bwdGraphId = bwdGraphId if isinstance(bwdGraphId, GraphId) else GraphId(bwdGraphId)
        self.expectedInputs = list(expectedInputs)
        self.expectedOutputs = list(expectedOutputs)

    def __repr__(self) -> str:
        return f"BwdGraphInfo({self.bwdGraphId.str()!r}, {self.expectedInputs}, {self.expectedOutputs})"


class OpSettings:
    """`Op::Settings` of an op about to be created: where it goes and what it is called.

    `ctx._get_op_settings(name)` makes one from the build context (graph, name scope, IPU, tile
    set, execution context); custom ops' `createOpInGraph` read it."""

    def __init__(self, graph, name: str, scope: str, ipu: Optional[int], tile_set: str,
                 execution_context: ExecutionContext, debug_context=()):
        self.graph = graph
        self.name = name
        self.scope = scope
        self.vgraphId = ipu
        self.tileSet = tile_set
        self.executionContext = execution_context
        self.debug_context = tuple(debug_context)

    def __repr__(self) -> str:
        return f"OpSettings(name={self.name!r}, ipu={self.vgraphId}, tiles={self.tileSet})"


