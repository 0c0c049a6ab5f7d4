"""Out-of-memory errors in PopXL's terms: which name scopes own the bytes that overflow.

`ipu.compile` names what fills the worst tile by owner (tensors by the op that made them, exchanges
and compute sets by their step names); here each owner is traced to its popxl op, and the bytes
are added up by the op's name scope (gradient ops carry the scope of the forward op, so a layer's
backward pass counts under the layer).
"""
from __future__ import annotations

import ipu

UNSCOPED = "(no name scope)"


def _scope_of_names(ir, lowered) -> callable:
    scopes = {}
    for g in ir.graphs:
        for op in g.ops:
            scopes.setdefault(op.name, op.scope)
    step_ops = dict(getattr(lowered, "op_names", {}) or {})

    def scope(owner: str) -> str | None:
        name = step_ops.get(owner, owner)
        while name:
            if name in scopes:
                return scopes[name] or UNSCOPED
            if "/" not in name:
                return None
            name = name.rsplit("/", 1)[0]
        return None

    return scope


def with_name_scopes(err: ipu.OutOfMemoryError, ir, lowered) -> ipu.OutOfMemoryError:
    """The same error with the name scopes that own the overflowing categories on the worst tile."""
    report = err.report or []
    owners = report[0].get("owners") if report else None
    if not owners:
        return err
    scope = _scope_of_names(ir, lowered)
    by_scope: dict = {}
    for cat in err.categories:
        for owner, nbytes in owners.get(cat, []):
            s = scope(owner)
            if s is None:
                continue
            d = by_scope.setdefault(s, {})
            d[cat] = d.get(cat, 0) + nbytes
    if not by_scope:
        return err
    ranked = sorted(by_scope.items(), key=lambda kv: -sum(kv[1].values()))[:5]
    tile = report[0]["tile"]
    parts = []
    for s, cats in ranked:
        detail = ", ".join(f"{c} {b / 1024:,.1f} KiB" for c, b in sorted(cats.items(), key=lambda x: -x[1]))
        parts.append(f"{s} {sum(cats.values()) / 1024:,.1f} KiB ({detail})")
    message = (str(err) + f"\nName scopes owning the most of it on tile {tile} (largest owners of "
               f"{', '.join(err.categories)}): " + "; ".join(parts))
    report[0]["scopes"] = {s: dict(c) for s, c in ranked}
    return ipu.OutOfMemoryError(message, report, err.categories)
