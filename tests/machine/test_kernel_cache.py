"""Compiled kernels are cached under a fingerprint of ipu/ and codelets/: a change to a helper that
kernels inline (ipu.half, say) must not leave their stale machine code in use."""
import os
import subprocess
import sys

from ipu import kernel_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _tree(tmp_path):
    for pkg, files in {"ipu": ["__init__.py", "half.py"], "codelets": ["__init__.py", "select.py"]}.items():
        (tmp_path / pkg).mkdir()
        for f in files:
            (tmp_path / pkg / f).write_text(f"# {pkg}/{f}\n")
    return tmp_path


def test_the_fingerprint_follows_every_source_file(tmp_path):
    root = str(_tree(tmp_path))
    first = kernel_cache.fingerprint(root)
    assert kernel_cache.fingerprint(root) == first
    half = tmp_path / "ipu" / "half.py"
    half.write_text("# ipu/half.py, changed\n")  # a helper that other modules' kernels inline
    assert kernel_cache.fingerprint(root) != first
    (tmp_path / "codelets" / "__pycache__").mkdir()
    (tmp_path / "codelets" / "__pycache__" / "x.py").write_text("")  # caches do not count
    second = kernel_cache.fingerprint(root)
    (tmp_path / "README.md").write_text("not a source of kernels")
    assert kernel_cache.fingerprint(root) == second


def test_old_fingerprints_are_pruned(tmp_path):
    for i in range(6):
        (tmp_path / f"fp{i}").mkdir()
        os.utime(tmp_path / f"fp{i}", (1000 + i, 1000 + i))
    (tmp_path / "current").mkdir()
    kernel_cache._prune(str(tmp_path), "current")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["current", "fp4", "fp5"]


def test_numba_caches_under_the_fingerprint_unless_the_user_chose_a_directory(tmp_path):
    code = "import ipu, numba; print(numba.config.CACHE_DIR)"
    env = dict(os.environ, PYTHONPATH=ROOT)
    env.pop("NUMBA_CACHE_DIR", None)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert os.path.basename(out.strip()) == kernel_cache.fingerprint(ROOT)
    env["NUMBA_CACHE_DIR"] = str(tmp_path)
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(tmp_path)
