"""docs/options.md lists every IPU_SIM_* environment variable the code names, and the code reads
them only where the table says: the machine's in ipu/env.py, the session's in its options."""
import ast
import os
import re

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGES = ("ipu", "codelets", "profiler", "popxl", "popart", "poptorch", "popdist", "pva")
# the modules that read an IPU_SIM_* variable from the environment
READERS = {"ipu/env.py", "popxl/_run_options.py", "profiler/options.py", "profiler/testing.py"}
NAME = re.compile(r"IPU_SIM_[A-Z0-9_]+")


def _sources():
    for pkg in PACKAGES:
        for dirpath, dirnames, files in os.walk(os.path.join(ROOT, pkg)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for f in files:
                if f.endswith(".py"):
                    path = os.path.join(dirpath, f)
                    yield os.path.relpath(path, ROOT).replace(os.sep, "/"), open(path, encoding="utf-8").read()


def _table_rows() -> dict:
    text = open(os.path.join(ROOT, "docs", "options.md"), encoding="utf-8").read()
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `"):
            cells = [c.strip() for c in line.strip("|").split("|")]
            for name in NAME.findall(cells[0]):
                rows[name] = cells[-1]
    return rows


def _reads(tree) -> set:
    """IPU_SIM_* names read from a mapping by a literal key: x.get("IPU_SIM_X"), x["IPU_SIM_X"]."""
    out = set()
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" \
                and node.args:
            key = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        if isinstance(key, ast.Constant) and isinstance(key.value, str) and NAME.fullmatch(key.value):
            out.add(key.value)
    return out


def test_every_variable_the_code_names_is_in_the_table_and_no_other():
    named = set()
    for _, text in _sources():
        named |= set(NAME.findall(text))
    rows = _table_rows()
    assert named - set(rows) == set(), "add these to the table of docs/options.md"
    assert set(rows) - named == set(), "the table of docs/options.md lists variables no code reads"


def test_only_the_listed_modules_read_them():
    readers = {}
    for rel, text in _sources():
        for name in _reads(ast.parse(text)):
            readers.setdefault(rel, set()).add(name)
    assert set(readers) <= READERS, f"read IPU_SIM_* through ipu.env or the session's options: {readers}"
    rows = _table_rows()
    for rel, names in readers.items():
        for name in names:
            assert rel in rows[name] or rel == "popxl/_run_options.py", f"{name}: docs/options.md omits {rel}"
