"""The layering of docs/architecture.md, for every package of the project.

Static imports and dynamic ones (`importlib.import_module("x")`, `__import__("x")`) both count.
`ipu/` imports nothing of the project; `codelets/` only `ipu`; `profiler/` never `popxl` (it reads `ipu`
executables and, in `profiler.calibrate`, the codelets' cost models).
"""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# package -> the project packages it may import (besides itself)
ALLOWED = {
    "ipu": set(),
    "codelets": {"ipu"},
    # builds documents from an ipu.Executable and calibrates the codelets' cost models; never popxl
    "profiler": {"ipu", "codelets"},
    "popxl": {"ipu", "codelets", "profiler"},
    # the other frontends sit on popxl (and may reach the layers below it)
    "popart": {"popxl", "ipu", "codelets", "profiler", "popdist"},
    "popdist": {"popxl", "ipu", "codelets", "profiler", "popart"},
}


# file -> project packages it may import besides its package's layer, with the reason
EXCEPTIONS = {
    # PopXL reads the PopDist settings of the process from the popdist package when it is installed
    "popxl/_popdist.py": {"popdist"},
}


def _packages():
    return sorted(d for d in os.listdir(ROOT)
                  if os.path.isfile(os.path.join(ROOT, d, "__init__.py")) and d not in ("tests", "build"))


PROJECT = set(_packages()) | set(ALLOWED)


def _sources(pkg):
    for dirpath, dirnames, filenames in os.walk(os.path.join(ROOT, pkg)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in sorted(filenames):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def _dynamic_target(node):
    """The module named by `import_module("x")`, `importlib.import_module("x")` or `__import__("x")`."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    fn = node.func
    name = fn.attr if isinstance(fn, ast.Attribute) else fn.id if isinstance(fn, ast.Name) else None
    if name not in ("import_module", "__import__"):
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        if arg.value.startswith("."):
            return None  # relative: inside the package
        return arg.value
    if _own_name(arg) or (isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.FormattedValue)
                          and _own_name(arg.values[0].value)):
        return None  # __name__ or f"{package.__name__}.x": the module's own package
    return "<computed>"


def _own_name(node):
    return ((isinstance(node, ast.Name) and node.id == "__name__")
            or (isinstance(node, ast.Attribute) and node.attr == "__name__"))


def imports(path):
    """(line, top-level module) of every absolute import of a file, static or dynamic."""
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.lineno, node.module.split(".")[0]
        else:
            target = _dynamic_target(node)
            if target is not None:
                yield node.lineno, target.split(".")[0]


def test_every_package_has_a_layer():
    missing = [p for p in _packages() if p not in ALLOWED]
    assert not missing, f"packages without a layer in tests/test_layering.py ALLOWED: {missing}"


@pytest.mark.parametrize("pkg", sorted(p for p in ALLOWED if os.path.isdir(os.path.join(ROOT, p))))
def test_imports_follow_the_layers(pkg):
    bad = []
    for path in _sources(pkg):
        for line, mod in imports(path):
            if mod == "<computed>":
                bad.append(f"{os.path.relpath(path, ROOT)}:{line}: imports a module whose name is computed")
            elif (mod in PROJECT and mod != pkg and mod not in ALLOWED[pkg]
                  and mod not in EXCEPTIONS.get(os.path.relpath(path, ROOT).replace(os.sep, "/"), ())):
                bad.append(f"{os.path.relpath(path, ROOT)}:{line}: imports {mod}")
    assert not bad, f"{pkg}/ may import only {sorted(ALLOWED[pkg]) or 'nothing'} of the project:\n" + "\n".join(bad)


def test_the_checker_sees_dynamic_imports(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("import importlib\nimportlib.import_module('codelets')\n__import__('popxl.ops')\n"
                 "from importlib import import_module\nimport_module('.x', 'ipu')\nimport_module(f'{__name__}.y')\n"
                 "import_module(name)\n")
    assert sorted(imports(str(p))) == [(1, "importlib"), (2, "codelets"), (3, "popxl"), (4, "importlib"),
                                       (7, "<computed>")]
