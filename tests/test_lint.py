"""The lint gate of .ci/run, in the suite: `ruff check` over ipu/, codelets/, profiler/ and popxl/
with the rules of pyproject.toml (pycodestyle, pyflakes, pep8-naming; 120 columns)."""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_ruff_is_clean():
    pytest.importorskip("ruff", reason="ruff is in the test extra: pip install -e '.[test]'")
    out = subprocess.run([sys.executable, "-m", "ruff", "check", "--output-format", "concise", "ipu", "codelets",
                          "profiler", "popxl"], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
