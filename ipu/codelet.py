"""The codelet interface and registry.

A codelet is a vertex type. It declares its fields (tensor connections, each a run of consecutive
elements on the vertex's tile) and per-vertex parameters, and provides:

- `kernel`: a Numba function that runs *all* vertices of one compute set that use this codelet
  with one field-type combination, in a single call:
  `kernel(views, off, cnt, fp, ip)` where `views[f]` is the typed view of tile memory for field f
  (see `ipu.half` for float16), `off[v, f]` the element offset of vertex v's field f in that view,
  `cnt[v, f]` its element count, `fp[v, :]` float parameters and `ip[v, :]` int parameters;
- `cycles`: the cost model, vectorised over vertices, with its source written beside the formula;
- `code_bytes` and `state_bytes`: what the vertex code and each vertex's state occupy on a tile;
- `reference`: a NumPy implementation of the same arithmetic, for tests.

Codelets register themselves by name with `register`, which refuses a second codelet of a name.
`ipu/` has none of its own and imports nothing of the project: the built-in ones live in the
`codelets` package, registered when the layer above imports it (`import codelets`; popxl does).
"""
from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass

import numpy as np

__all__ = ["IN", "INOUT", "OUT", "Codelet", "Field", "get_codelet", "register", "registered_codelets"]

IN, OUT, INOUT = "in", "out", "inout"


@dataclass(frozen=True)
class Field:
    name: str
    direction: str = IN


class Codelet:
    name: str = ""
    fields: tuple = ()
    float_params: tuple = ()
    int_params: tuple = ()
    # A supervisor vertex occupies all worker contexts of its tile and its cycles are tile cycles;
    # a worker vertex runs on one context and its cycles are that context's (thread) cycles.
    supervisor: bool = False
    # Element types the kernel accepts, per field; None means any type tile memory holds.
    allowed_types: tuple | None = None
    # float8 data reaches only codelets that say they take it (the casts, the float8 AMP, copies):
    # elsewhere its one-byte records would be misread as numbers
    takes_float8: bool = False

    def kernel(self):
        raise NotImplementedError

    def cycles(self, types, cnt: np.ndarray, fp: np.ndarray, ip: np.ndarray, target) -> np.ndarray:
        raise NotImplementedError

    def code_bytes(self, types) -> int:
        """Bytes of vertex code for one field-type combination (held once per tile that uses it)."""
        return 256

    def state_bytes(self) -> int:
        """Bytes of state per vertex: a 4-byte pointer and a 2-byte size per field, 4 per parameter
        (Poplar vertex state layout: ScaledPtr32 + count)."""
        return 6 * len(self.fields) + 4 * (len(self.float_params) + len(self.int_params))

    def check(self, types, cnt: np.ndarray, fp: np.ndarray, ip: np.ndarray) -> None:
        """Raise ValueError if the vertices' fields or parameters do not fit this codelet."""

    def reference(self, *arrays, **params):
        raise NotImplementedError

    @property
    def field_names(self) -> tuple:
        return tuple(f.name for f in self.fields)

    def __repr__(self) -> str:
        return f"<codelet {self.name}>"


_REGISTRY: dict[str, Codelet] = {}


def register(codelet):
    """Register a codelet instance (or class, which is instantiated). Returns it, so it can decorate.

    A name is registered once: a codelet of another class under a registered name raises
    ValueError. The same class defined again (a reloaded module) replaces its earlier definition."""
    inst = codelet() if isinstance(codelet, type) else codelet
    if not inst.name:
        raise ValueError(f"{codelet!r} has no name")
    have = _REGISTRY.get(inst.name)
    if have is not None:
        if have is inst:
            return codelet
        if not _same_class(type(have), type(inst)):
            raise ValueError(
                f"A codelet named {inst.name!r} is already registered ({type(have).__module__}."
                f"{type(have).__qualname__}); give {type(inst).__qualname__} another name.")
    _REGISTRY[inst.name] = inst
    return codelet


def _same_class(a: type, b: type) -> bool:
    """The same class, or the same class defined again: a reloaded module, or a script's module
    run both as __main__ and imported (Numba's cache imports it to rebuild a cached kernel)."""
    if a is b:
        return True
    if a.__qualname__ != b.__qualname__:
        return False
    return a.__module__ == b.__module__ or _source(a) == _source(b) is not None


def _source(cls):
    try:
        return os.path.realpath(inspect.getsourcefile(cls))
    except (TypeError, OSError):
        return None


def get_codelet(name_or_codelet) -> Codelet:
    if isinstance(name_or_codelet, Codelet):
        return name_or_codelet
    try:
        return _REGISTRY[name_or_codelet]
    except KeyError:
        known = ", ".join(sorted(_REGISTRY)) or "none"
        hint = ("" if "codelets" in sys.modules else
                " The built-in codelets register when their package is imported: `import codelets`.")
        raise KeyError(
            f"No codelet named {name_or_codelet!r}. Registered codelets: {known}.{hint} "
            f"Define one by subclassing ipu.Codelet and decorating it with @ipu.register."
        ) from None


def registered_codelets() -> dict:
    return dict(_REGISTRY)
