"""Where each rule of an op type lives, from its op table entry: `python -m popxl.op_table erf`
prints the entry, then the file and line of its frontend function, lowering, gradient and
reference rules, its codelet op (code and poplibs name) with its cost table rows, and its ONNX
name."""
from __future__ import annotations

import inspect
import os
import sys
from typing import List, Optional, Tuple

import ipu
from codelets import elementwise as codelet_ops
from codelets import elementwise_costs

from . import op_table, ops
from .lowering.registry import LOWERING_RULES, get_rule
from .reference import REFERENCE_RULES, get_reference_rule
from .transforms.grad_rules import GRAD_RULES, NON_DIFFERENTIABLE, has_grad_rule

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _load_rules() -> None:
    """The built-in rules register themselves when their registries are first asked."""
    get_rule("add")
    has_grad_rule("add")
    get_reference_rule("add")


def where(fn) -> str:
    """`module.function  path:line` of a function (relative to the project root)."""
    fn = inspect.unwrap(fn)
    try:
        path, line = inspect.getsourcefile(fn), inspect.getsourcelines(fn)[1]
    except (TypeError, OSError):
        return f"{fn.__module__}.{fn.__qualname__}"
    rel = os.path.relpath(path, ROOT) if path and path.startswith(ROOT) else path
    return f"{fn.__module__}.{fn.__qualname__}  {rel}:{line}"


def _codelet_rows(entry: op_table.OpType) -> List[Tuple[str, str]]:
    if isinstance(entry, op_table.UnaryOpType) and entry.codelet != "UnaryOp":  # a codelet of its own
        codelet = ipu.get_codelet(entry.codelet)
        return [("codelet", f"{entry.codelet}  {where(type(codelet))}"), ("cost", where(codelet.cycles))]
    if isinstance(entry, op_table.UnaryOpType):
        vertex, codes, poplibs = "UnaryOp", codelet_ops.UNARY_OPS, codelet_ops.POPLIBS_UNARY
    elif isinstance(entry, op_table.BinaryOpType):
        vertex, codes, poplibs = "BinaryOp", codelet_ops.BINARY_OPS, codelet_ops.POPLIBS_BINARY
    else:
        return [("codelets", "the vertices its lowering rule adds")]
    op = entry.codelet_op
    names = [k for k, v in poplibs.items() if v == op]
    rows = [("codelet", f"{vertex} op {op!r} (code {codes[op]}; poplibs {', '.join(names) or '-'})  "
                        f"codelets/elementwise_kernels.py")]
    for table, key, value in elementwise_costs.cost_rows(op):
        rows.append(("cost", f"{table}[{key!r}] = {tuple(value) if isinstance(value, tuple) else value}  "
                                     "codelets/elementwise_costs.py"))
    return rows


def describe(name: str) -> List[Tuple[str, str]]:
    """(what, where) rows for op type `name`; KeyError when the table lacks it."""
    _load_rules()
    entry = op_table.op_type(name)
    rows = [("entry", f"{type(entry).__name__}({name!r}, family {entry.family!r})  popxl/op_table.py"),
            ("attrs", " ".join(sorted(entry.attrs)) or "-")]
    if entry.doc:
        rows.append(("doc", entry.doc))
    for fname in (name, name + "_"):
        fn = getattr(ops, fname, None)
        if callable(fn):
            rows.append(("frontend", where(fn)))
    lowering = LOWERING_RULES.get(name)
    rows.append(("lowering", where(lowering) if lowering else "none"))
    if name in NON_DIFFERENTIABLE:
        rows.append(("gradient", "none (not differentiable)"))
    else:
        grad = GRAD_RULES.get(name)
        rows.append(("gradient", where(grad) if grad else f"missing (entry says {entry.gradient!r})"))
    reference = REFERENCE_RULES.get(name)
    rows.append(("reference", where(reference) if reference else "none"))
    rows += _codelet_rows(entry)
    rows.append(("onnx", f"{entry.onnx} (PopART translates it to this op: popart/_translate)" if entry.onnx
                 else "-"))
    return rows


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if not argv or argv[0] in ("-h", "--help"):
        print("usage: python -m popxl.op_table OP_TYPE [OP_TYPE ...]   (or --list)")
        return 0 if argv else 2
    if argv[0] == "--list":
        print(" ".join(sorted(op_table.OP_TYPES)))
        return 0
    status = 0
    for name in argv:
        try:
            rows = describe(name)
        except KeyError as e:
            print(e.args[0], file=sys.stderr)
            status = 1
            continue
        print(name)
        for what, text in rows:
            print(f"  {what:<10} {text}")
    return status
