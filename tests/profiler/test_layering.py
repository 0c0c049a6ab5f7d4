"""The layering of DESIGN.md: ipu/ imports nothing of the project; profiler/ never imports popxl."""
import ast
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _imports(path):
    tree = ast.parse(open(path, encoding="utf-8").read())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module.split(".")[0]


def test_profiler_never_imports_popxl():
    d = os.path.join(ROOT, "profiler")
    for name in os.listdir(d):
        if name.endswith(".py"):
            assert "popxl" not in set(_imports(os.path.join(d, name))), name


def test_ipu_profile_imports_nothing_of_the_project():
    mods = set(_imports(os.path.join(ROOT, "ipu", "profile.py")))
    assert not mods & {"popxl", "profiler", "codelets"}
