"""Codelets read their vertex tables by name: no kernel, check or cost model of codelets/ (or of
the custom-op example) indexes `views`, `types`, `off`, `cnt`, `fp` or `ip` with a number. A
column is `F.<field>` / `FP.<param>` / `IP.<param>` (ipu.Columns) or a `table(...)` attribute, so
reordering a declaration cannot silently swap two columns."""
import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TABLES = {"views", "types", "off", "cnt", "fp", "ip"}


def _sources():
    out = [os.path.join(ROOT, "examples", "custom_op.py")]
    for dirpath, dirnames, files in os.walk(os.path.join(ROOT, "codelets")):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        out += [os.path.join(dirpath, f) for f in sorted(files) if f.endswith(".py")]
    return sorted(out)


def numbered_reads(source: str) -> list:
    """(line, text) of every subscript of a table name with an integer in its index."""
    hits = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in TABLES:
            parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
            if any(isinstance(p, ast.Constant) and isinstance(p.value, int) for p in parts):
                hits.append((node.lineno, ast.unparse(node)))
    return hits


@pytest.mark.parametrize("path", _sources(), ids=lambda p: os.path.relpath(p, ROOT))
def test_tables_are_read_by_name(path):
    with open(path, encoding="utf-8") as fh:
        hits = numbered_reads(fh.read())
    assert not hits, f"{os.path.relpath(path, ROOT)} reads vertex tables by number: {hits[:5]}"


def test_the_check_finds_numbered_reads():
    assert [t for _, t in numbered_reads("x = ip[:, 4]\ny = views[0]\nz = off[v, F.a]\nw = cnt[v, 1]")] == \
        ["ip[:, 4]", "views[0]", "cnt[v, 1]"]
