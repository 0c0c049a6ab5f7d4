"""`_ir.patterns`: PopART's graph rewrites, as far as this IR needs them.

PopART's pre-alias patterns rewrite ops into ones its lowering can handle (gradient ops into
simpler ops, `OpToIdentity` for ops that became identities after autodiff, ...), and the inplace
pattern turns outplace ops into their inplace forms to save memory. Here every op the frontend
and autodiff record is lowered directly, and gradient rules already emit the simple forms
(identities included), so no rewrite is required for correctness: the patterns that apply are the
ones listed in `_PRE_ALIAS`, each a function over a graph. The level and the patterns set are
recorded on the Ir view (`Ir.getPatterns()`), so scripts that set and read them run unchanged.
"""
from __future__ import annotations

from enum import Enum

__all__ = ["PatternsLevel", "Patterns", "apply_pre_alias", "apply_inplace"]


class PatternsLevel(Enum):
    NoPatterns = 0
    Minimal = 1
    Default = 2
    All = 3


class Patterns:
    """A set of pattern names enabled at a level (`_ir.patterns.Patterns`)."""

    def __init__(self, level=PatternsLevel.Default):
        if isinstance(level, (list, tuple, set)):
            self.level = None
            self._enabled = set(level)
        else:
            self.level = level if isinstance(level, PatternsLevel) else PatternsLevel[str(level)]
            self._enabled = set(_BY_LEVEL[self.level])
        self.inplaceEnabled = self.level not in (PatternsLevel.NoPatterns,)

    def isPatternEnabled(self, name: str) -> bool:  # noqa: N802
        return name in self._enabled

    def enablePattern(self, name: str, enabled: bool = True) -> "Patterns":  # noqa: N802
        (self._enabled.add if enabled else self._enabled.discard)(name)
        return self

    def enableInPlace(self, enabled: bool) -> "Patterns":  # noqa: N802
        self.inplaceEnabled = bool(enabled)
        return self

    def isInPlaceEnabled(self) -> bool:  # noqa: N802
        return self.inplaceEnabled

    def __repr__(self) -> str:
        return f"Patterns({self.level.name if self.level else sorted(self._enabled)})"


def _remove_unused_identities(graph) -> None:
    """OpToIdentity's follow-up in PopART (PostNRepl): an identity whose output nothing reads and
    that is not a graph output does nothing; drop it."""
    from .views import graph_view
    outs = {id(t) for t in graph._outputs}
    for op in list(graph._ops):
        if op.type == "identity" and not op.modified and all(not t.consumers and id(t) not in outs
                                                              for t in op.outputs):
            graph_view(graph).eraseOp(op.id)


def _op_to_identity(graph) -> None:
    """PopART's OpToIdentity: an op that passes one input through unchanged (a custom op whose
    `identity_of` says so, e.g. an all-reduce of identical inputs) becomes an identity of it."""
    from popxl.custom_op import custom_op_types, custom_op
    types = set(custom_op_types())
    for op in graph.ops:
        if op.type not in types:
            continue
        d = custom_op(op.type)
        i = d.identity_of(**{k: v for k, v in op.attrs.items() if k in d.attrs})
        if i is None or op.modified or op.aliases:
            continue
        keep = op.inputs[i]
        for t in set(op.inputs) - {keep}:
            t._remove_consumer(op)
        op.inputs = (keep,)
        op.type = "identity"
        op.attrs = {}


_PRE_ALIAS = {"OpToIdentity": _op_to_identity, "PostNRepl": _remove_unused_identities}
_BY_LEVEL = {PatternsLevel.NoPatterns: (), PatternsLevel.Minimal: ("PostNRepl",),
             PatternsLevel.Default: ("PostNRepl", "OpToIdentity"),
             PatternsLevel.All: ("PostNRepl", "OpToIdentity")}


def apply_pre_alias(patterns: Patterns, graph) -> None:
    for name, fn in _PRE_ALIAS.items():
        if patterns.isPatternEnabled(name):
            fn(graph)


def apply_inplace(patterns: Patterns, graph) -> None:
    """Inplacing changes memory, not values; the lowering already writes outputs of element-wise
    ops over dead inputs' memory through liveness, so nothing is rewritten here."""
