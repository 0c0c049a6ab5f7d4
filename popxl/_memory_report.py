"""Out-of-memory errors in PopXL's terms: which name scopes own the bytes that overflow.

`ipu.compile` names what fills the worst tile by owner (tensors by the op that made them, exchanges
and compute sets by their step names); here each owner is traced to its popxl op, and the bytes
are added up by the op's name scope (gradient ops carry the scope of the forward op, so a layer's
backward pass counts under the layer).
"""
from __future__ import annotations

from typing import Callable, Dict, Optional

import ipu
from popxl.op import Op

UNSCOPED = "(no name scope)"


# the categories of code and vertex state: what an op costs on a tile besides its tensors
CODE_CATEGORIES = ("exchange_code", "control_code", "vertex_state", "vertex_code")


class _OpOfNames:
    """owner name (a step, compute set or tensor) -> the popxl op it came from, or None (ops may
    share a name: the first stands for them; `same_name[name]` counts them)."""

    def __init__(self, ir, lowered):
        self._ops: Dict[str, Op] = {}
        self.same_name: Dict[str, int] = {}
        for g in ir.graphs:
            for op in g.ops:
                self._ops.setdefault(op.name, op)
                self.same_name[op.name] = self.same_name.get(op.name, 0) + 1
        self._step_ops = dict(getattr(lowered, "op_names", {}) or {})

    def __call__(self, owner: str) -> Optional[Op]:
        name = self._step_ops.get(owner, owner)
        while name:
            if name in self._ops:
                return self._ops[name]
            if "/" not in name:
                return None
            name = name.rsplit("/", 1)[0]
        return None



def _scope_of_names(ir, lowered) -> Callable[[str], Optional[str]]:
    op_of = _OpOfNames(ir, lowered)

    def scope(owner: str) -> str | None:
        op = op_of(owner)
        return None if op is None else (op.scope or UNSCOPED)

    return scope


def op_kind(op) -> str:
    """What an op is, in the words of a model's layers: convolutions by their grouping."""
    if op.type in ("conv", "conv_transpose"):
        groups = int(op.attrs.get("groups", 1))
        channels = op.inputs[0].shape[1] if op.inputs and len(op.inputs[0].shape) > 1 else 0
        if groups > 1 and groups == channels:
            kind = "depthwise convolution"
        else:
            kind = "grouped convolution" if groups > 1 else "convolution"
        return kind if op.type == "conv" else "transposed " + kind
    if op.type == "conv_weights_grad":
        return "grouped convolution weight update"
    return op.type.replace("_", " ")


def _block_of(scope: str) -> str:
    """The block a scope belongs to: its first two path components (ONNX names, '/features/
    features.5/conv/...'), or its first (PopXL name scopes, 'layer3/attention')."""
    parts = [p for p in scope.split("/") if p]
    if not parts:
        return scope
    keep = 2 if scope.startswith("/") and len(parts) > 2 else 1
    return ("/" if scope.startswith("/") else "") + "/".join(parts[:keep])


def code_by_op_kind(owners: dict, op_of, categories=CODE_CATEGORIES, top: int = 3) -> list:
    """[(kind, ops, {category: bytes}, [(block, ops, bytes)])] of the code and vertex state one
    tile holds, by the kind of op that generates it (largest first), with the blocks (scopes)
    whose ops of that kind generate the most."""
    per_op: dict = {}
    for cat in categories:
        for owner, nbytes in owners.get(cat, []):
            op = op_of(owner)
            if op is None:
                continue
            d = per_op.setdefault(op, {})
            d[cat] = d.get(cat, 0) + nbytes
    kinds: dict = {}
    same = getattr(op_of, "same_name", {})
    for op, cats in per_op.items():
        n = same.get(op.name, 1)  # ops of one name share their steps' names: count them all
        k = kinds.setdefault(op_kind(op), {"ops": 0, "cats": {}, "blocks": {}})
        k["ops"] += n
        for c, b in cats.items():
            k["cats"][c] = k["cats"].get(c, 0) + b
        blk = k["blocks"].setdefault(_block_of(op.scope or op.name), [0, 0])
        blk[0] += n
        blk[1] += sum(cats.values())
    ranked = sorted(kinds.items(), key=lambda kv: -sum(kv[1]["cats"].values()))
    return [(kind, v["ops"], v["cats"],
             sorted(((b, n, t) for b, (n, t) in v["blocks"].items()), key=lambda x: -x[2])[:top])
            for kind, v in ranked]


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
    # code and state, and constants (work lists are constants): what ops generate besides tensors
    code = [c for c in err.categories if c in CODE_CATEGORIES + ("constants",)]
    if code:
        kinds = code_by_op_kind(owners, _OpOfNames(ir, lowered), code)[:4]
        lines = []
        for kind, n, cats, blocks in kinds:
            detail = ", ".join(f"{c} {b / 1024:,.1f} KiB" for c, b in sorted(cats.items(), key=lambda x: -x[1]))
            where = "; most in " + ", ".join(f"{b} ({k} op{'s' if k > 1 else ''}, {t / 1024:,.1f} KiB)"
                                            for b, k, t in blocks) if blocks else ""
            kib = sum(cats.values()) / 1024
            lines.append(f"  {n} {kind} op{'s' if n > 1 else ''}: {kib:,.1f} KiB ({detail}{where})")
        if lines:
            message += f"\nOps generating the most {', '.join(code)} on tile {tile}, by kind:\n" + "\n".join(lines)
            report[0]["code_by_op_kind"] = [{"kind": k, "ops": n, "categories": dict(c),
                                             "blocks": [{"block": b, "ops": m, "bytes": t} for b, m, t in bl]}
                                            for k, n, c, bl in kinds]
    return ipu.OutOfMemoryError(message, report, err.categories)
