"""A kernel compile longer than a second shows progress on standard error (ipu/compile_progress.py):
a first run on a new install compiles for tens of seconds and must not leave a silent terminal."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PROBE = """
import time
import ipu
from ipu import compile_progress
compile_progress.SHOW_AFTER = {show_after}
src = '''
from numba import njit
@njit(cache=False)
def probe(n):
    s = 0
    for i in range(n):
        s += i * {k}
    return s
'''
ns = {{"__name__": "ipu._progress_probe"}}  # counted as one of the project's kernels
exec(src, ns)
assert ns["probe"](10) == 45 * {k}
time.sleep({wait})
print(compile_progress.stats()[0])
"""


def _run(show_after, progress="1", wait=1.5):
    env = dict(os.environ, PYTHONPATH=ROOT, IPU_SIM_PROGRESS=progress)
    p = subprocess.run([sys.executable, "-c", PROBE.format(show_after=show_after, k=3, wait=wait)], env=env,
                       capture_output=True, text=True, check=True)
    return p.stdout.strip(), p.stderr


def test_a_long_compile_shows_a_line_and_a_summary():
    out, err = _run(0.0)
    assert out == "1"
    assert "compiling simulator kernels (once per install" in err
    assert "compiled 1 simulator kernels in" in err


def test_a_short_compile_or_progress_off_prints_nothing():
    out, err = _run(60.0)
    assert out == "1" and "compil" not in err
    out, err = _run(0.0, progress="0")
    assert out == "0" and "compil" not in err


def test_a_process_ending_while_it_compiles_still_prints_the_summary():
    out, err = _run(0.0, wait=0.3)  # shown after a tick, the burst not over when the process exits
    assert "compiling simulator kernels (once per install" in err
    assert "compiled 1 simulator kernels in" in err
