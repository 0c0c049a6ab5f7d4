"""No module of ipu/ reaches into another module's private state.

A name with a leading underscore belongs to the module that defines it. This static check over
the AST of every ipu/ module fails on:
- importing a private name from another module (`from .compiler import _runs`);
- reading, writing or calling a private attribute (`comp._addresses`, `engine._view(...)`,
  `obj._x = 1`) on anything but `self` / `cls`, unless this module itself defines that name
  (a class of this module touching its own instances).
"""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
IPU = os.path.join(ROOT, "ipu")
MODULES = sorted(f for f in os.listdir(IPU) if f.endswith(".py"))


# private-looking names of other libraries that are their public way of doing something
EXTERNAL = {"_getvalue"}  # Numba's struct proxies: the LLVM value of the struct (cgutils)


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _own_names(tree: ast.Module) -> set:
    """Private names this module defines: functions, classes, assigned names and attributes of self / cls."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            own.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            own.add(node.id)
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            own.add(node.target.id)
        elif (isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store)
              and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls")):
            own.add(node.attr)
    return {n for n in own if _private(n)}


def violations(source: str, filename: str) -> list:
    tree = ast.parse(source, filename)
    own = _own_names(tree)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            for alias in node.names:
                if _private(alias.name):
                    out.append(f"{filename}:{node.lineno}: imports private {alias.name!r} from "
                               f"{'.' * node.level}{node.module or ''}")
        elif isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            if isinstance(base, ast.Name) and base.id in ("self", "cls"):
                continue
            if node.attr in own or node.attr in EXTERNAL:
                continue
            what = "writes" if isinstance(node.ctx, (ast.Store, ast.Del)) else "uses"
            out.append(f"{filename}:{node.lineno}: {what} another module's private attribute {node.attr!r} "
                       f"({ast.unparse(node)})")
    return out


@pytest.mark.parametrize("module", MODULES)
def test_no_module_touches_another_modules_private_state(module):
    with open(os.path.join(IPU, module)) as f:
        found = violations(f.read(), module)
    assert not found, "\n".join(found)


@pytest.mark.parametrize("code", [
    "from .compiler import _runs\n",
    "def f(comp):\n    comp._addresses(1, 2)\n",
    "def f(comp, s):\n    comp._steps.append(s)\n",
    "def f(step):\n    step._collective = 1\n",
])
def test_the_check_catches_what_it_should(code):
    assert violations(code, "x.py")


@pytest.mark.parametrize("code", [
    "class A:\n    def __init__(self):\n        self._x = 1\n    def same(self, other):\n        return other._x\n",
    "def _helper():\n    pass\ndef f():\n    return _helper()\n",
    "import datetime as _dt\nx = _dt.date\n",
    "def f(x):\n    return x.__class__\n",
])
def test_the_check_allows_a_modules_own_names(code):
    assert not violations(code, "x.py")


@pytest.mark.parametrize("module", [m for m in MODULES if m != "__init__.py"])
def test_every_module_says_what_it_exports(module):
    """An explicit __all__ naming only names the module defines or imports."""
    with open(os.path.join(IPU, module)) as f:
        tree = ast.parse(f.read(), module)
    exported = None
    defined = set()
    for node in tree.body:
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets) and node.value is not None:
            exported = ast.literal_eval(node.value)
        for sub in ast.walk(node):
            if isinstance(sub, (ast.FunctionDef, ast.ClassDef)) and sub in tree.body:
                defined.add(sub.name)
            elif isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                defined.add(sub.id)
            elif isinstance(sub, ast.alias):
                defined.add((sub.asname or sub.name).split(".")[0])
    assert exported is not None, f"ipu/{module} has no __all__"
    assert not set(exported) - defined, f"ipu/{module} exports names it does not define: {set(exported) - defined}"


@pytest.mark.parametrize("module", MODULES)
def test_no_module_imports_inside_a_function(module):
    """ipu/'s data types live in leaf modules (graph_objects.py, nodes.py, ...), so no import
    needs hiding in a function to break a cycle: every import is at the top of its module."""
    with open(os.path.join(IPU, module), encoding="utf-8") as fh:
        tree = ast.parse(fh.read(), module)
    functions = [node for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]
    inside = [f"line {sub.lineno}" for node in functions for sub in ast.walk(node)
              if isinstance(sub, (ast.Import, ast.ImportFrom))]
    assert not inside, f"ipu/{module} imports inside a function ({', '.join(inside)})"
