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
    # libpva's names for the profiler's reading API
    "pva": {"profiler"},
    "popxl": {"ipu", "codelets", "profiler"},
    # the other frontends sit on popxl (and may reach the layers below it)
    "popart": {"popxl", "ipu", "codelets", "profiler", "popdist"},
    "popdist": {"popxl", "ipu", "codelets", "profiler", "popart", "poptorch"},
    # PopTorch sits on PopART's program builder, as the real one sits on PopART
    "poptorch": {"popxl", "ipu", "codelets", "profiler", "popart", "popdist"},
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


# ------------------------------------------------------------------------------------------------
# private state: a module writes the private attributes (`x._name`) only of objects of its own classes

# every package (ipu/ also has the stricter tests/machine/test_private_state.py: no reads either)
PRIVATE_STATE_PACKAGES = tuple(sorted(ALLOWED))
_MUTATORS = {"append", "extend", "update", "add", "pop", "remove", "insert", "clear", "setdefault", "discard",
             "popitem", "sort", "reverse"}


def _private(name):
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _owned(tree):
    """Private attributes a module owns: those its classes use through self / cls or declare in a
    class body (annotations, assignments, __slots__)."""
    own = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
            own.add(node.attr)
        if isinstance(node, ast.ClassDef):
            for b in node.body:
                targets = b.targets if isinstance(b, ast.Assign) else [b.target] if isinstance(b, ast.AnnAssign) else []
                for t in targets:
                    own.update(e.id for e in ast.walk(t) if isinstance(e, ast.Name))
                    if isinstance(t, ast.Name) and t.id == "__slots__" and isinstance(b, ast.Assign):
                        own.update(e.value for e in ast.walk(b.value) if isinstance(e, ast.Constant))
    return own


def _base_attribute(node):
    while isinstance(node, ast.Subscript):
        node = node.value
    return node if isinstance(node, ast.Attribute) and _private(node.attr) else None


def private_writes(tree):
    """(line, attribute node) of every write to a private attribute: assignment, augmented or
    annotated assignment, del, item assignment, a mutating method call, setattr with a name."""
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.Delete)):
            targets = node.targets
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
            targets = [node.target]
        for t in targets:
            for part in (t.elts if isinstance(t, ast.Tuple) else [t]):
                a = _base_attribute(part)
                if a is not None:
                    yield node.lineno, a
        if isinstance(node, ast.Call):
            fn = node.func
            if isinstance(fn, ast.Attribute) and fn.attr in _MUTATORS:
                a = _base_attribute(fn.value)
                if a is not None:
                    yield node.lineno, a
            if isinstance(fn, ast.Name) and fn.id == "setattr" and len(node.args) >= 2:
                name = node.args[1]
                if isinstance(name, ast.Constant) and isinstance(name.value, str) and _private(name.value):
                    yield node.lineno, ast.Attribute(value=node.args[0], attr=name.value)


# writes into a library's private state that its own design asks for, where it has no public API:
# (module, the attribute written) -> why
THIRD_PARTY_HOOKS = {
    ("codelets/_by_address.py", "context.active_code_library._reload_init"):
        "Numba's reload hooks: a kernel calling a helper by address binds the helper before it loads",
}


def foreign_private_writes(path):
    tree = ast.parse(open(path, encoding="utf-8").read(), path)
    own = _owned(tree)
    where = os.path.relpath(path, ROOT)
    for line, a in private_writes(tree):
        if isinstance(a.value, ast.Name) and a.value.id in ("self", "cls"):
            continue
        if a.attr not in own and (where, ast.unparse(a)) not in THIRD_PARTY_HOOKS:
            yield line, ast.unparse(a)


@pytest.mark.parametrize("pkg", [p for p in PRIVATE_STATE_PACKAGES if os.path.isdir(os.path.join(ROOT, p))])
def test_no_module_writes_another_modules_private_state(pkg):
    bad = [f"{os.path.relpath(path, ROOT)}:{line}: writes {what}"
           for path in _sources(pkg) for line, what in foreign_private_writes(path)]
    assert not bad, ("these write private state of objects of another module's classes; give the owning class a "
                     "method for it:\n" + "\n".join(bad))


def test_the_private_state_check_sees_writes(tmp_path):
    p = tmp_path / "m.py"
    p.write_text("class A:\n    def f(self):\n        self._mine = 1\n\n"
                 "def g(a, comp):\n    a._mine = 2\n    comp._addresses[3] = 4\n    comp._steps.append(5)\n"
                 "    comp.steps.append(6)\n    setattr(comp, '_x', 7)\n    comp._y += 1\n")
    assert sorted(w for _, w in foreign_private_writes(str(p))) == ["comp._addresses", "comp._steps", "comp._x",
                                                                    "comp._y"]
