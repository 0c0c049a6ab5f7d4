"""PopART builds on popxl's public API and its declared seams only: `popxl._frontends` (the
internals a frontend needs) and `popxl._pb` (PopART's internal IR views), taking from each only
the names its `__all__` declares. No other private popxl module or name is imported by popart/."""
import ast
import importlib
import os

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SEAMS = ("popxl._frontends", "popxl._pb")


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _imports():
    """(file, line, module, [names]) of every popxl import in popart/, at any depth."""
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, "popart")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in files:
            if not f.endswith(".py"):
                continue
            path = os.path.join(dirpath, f)
            rel = os.path.relpath(path, ROOT)
            for node in ast.walk(ast.parse(open(path, encoding="utf-8").read())):
                if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                        and node.module.split(".")[0] == "popxl":
                    yield rel, node.lineno, node.module, [a.name for a in node.names]
                elif isinstance(node, ast.Import):
                    for a in node.names:
                        if a.name.split(".")[0] == "popxl":
                            yield rel, node.lineno, a.name, []


def test_popart_imports_no_private_popxl_module_but_the_seams():
    bad = []
    for rel, line, module, names in _imports():
        if module in SEAMS:
            declared = set(importlib.import_module(module).__all__)
            bad += [f"{rel}:{line}: {module}.{n} is not in its __all__" for n in names if n not in declared]
        elif _private(module):
            bad.append(f"{rel}:{line}: imports the private module {module}")
        else:
            bad += [f"{rel}:{line}: imports the private name {module}.{n}" for n in names if n.startswith("_")]
    assert not bad, "\n".join(bad)


def test_the_seams_declare_what_they_export():
    for seam in SEAMS:
        m = importlib.import_module(seam)
        assert m.__doc__ and "seam" in m.__doc__, seam
        assert all(hasattr(m, n) for n in m.__all__), seam
