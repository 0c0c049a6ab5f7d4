"""A kernel compile longer than a second shows progress on standard error (ipu/compile_progress.py):
a first run on a new install compiles for tens of seconds and must not leave a silent terminal."""
import os
import re
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


# A program's own compile (lowering, memory plan, step tables) shows its phases the same way.
PROGRAM = """
import numpy as np
import popxl
import popxl.ops as ops
from ipu import compile_progress
compile_progress.SHOW_AFTER = {show_after}
compile_progress.TICK = 0.001  # this small program compiles in a few hundredths of a second
ir = popxl.Ir()
with ir.main_graph:
    x = popxl.variable(np.ones((8, 8), np.float32), name="x")
    y = ops.matmul(ops.relu(x), x)
    s = popxl.d2h_stream(y.shape, y.dtype, "s")
    ops.host_store(s, y)
with popxl.Session(ir, "ipu_model") as session:
    print(session.run()[s].sum())
"""


def _program(show_after, progress="1", tty=False):
    env = dict(os.environ, PYTHONPATH=ROOT, IPU_SIM_PROGRESS=progress, TERM="xterm")
    cmd = [sys.executable, "-c", PROGRAM.format(show_after=show_after)]
    if not tty:
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, check=True)
        return p.stdout.strip(), p.stderr
    import pty
    leader, follower = pty.openpty()  # standard error on a terminal: rich's status line
    try:
        p = subprocess.run(cmd, env=env, stdout=subprocess.PIPE, stderr=follower, text=True, check=True)
        os.close(follower)
        follower = -1
        chunks = []
        while True:
            try:
                b = os.read(leader, 65536)
            except OSError:  # the terminal closed
                break
            if not b:
                break
            chunks.append(b)
        return p.stdout.strip(), b"".join(chunks).decode(errors="replace")
    finally:
        if follower >= 0:
            os.close(follower)
        os.close(leader)


def test_a_program_compile_shows_its_phases_and_one_summary_line():
    out, err = _program(0.0)  # not a terminal: one plain line at the end, no status line
    assert out == "512.0"
    lines = [ln for ln in err.splitlines() if "the program" in ln]
    assert len(lines) == 1 and lines[0].startswith("compiled the program in "), err
    # the summary names the phases that took a twentieth of a second or more: which ones do depends
    # on the host's speed, so only what is named is checked (a phase, in the order they run)
    phases = ["lowering ops", "planning memory", "building exchange and compute tables"]
    named = [n.strip() for n in re.findall(r"([a-z ]+?) \d+\.\d s", lines[0].partition("(")[2])]
    assert all(n in phases for n in named), lines[0]
    assert [phases.index(n) for n in named] == sorted(phases.index(n) for n in named), lines[0]
    out, err = _program(0.0, tty=True)  # a terminal: the live line names the phase, then the summary
    assert out == "512.0"
    assert "compiling the program... " in err and "compiled the program in " in err


def test_a_short_program_compile_or_progress_off_prints_nothing():
    out, err = _program(60.0)
    assert out == "512.0" and "program" not in err
    out, err = _program(0.0, progress="0")
    assert out == "512.0" and "program" not in err


WAIT = """
import time
from ipu import compile_progress
compile_progress.SHOW_AFTER = 0.0
compile_progress.install()
def matmul_kernel():
    pass
matmul_kernel.__module__ = "codelets.matmul"  # one of the project's kernels, compiled by another process
class Kernel:
    py_func = matmul_kernel
with compile_progress.waiting_for(Kernel()):
    time.sleep(0.5)
time.sleep(1.0)
print(compile_progress.stats()[0])
"""


def test_waiting_for_a_kernel_another_process_compiles_shows_like_a_compile():
    env = dict(os.environ, PYTHONPATH=ROOT, IPU_SIM_PROGRESS="1")
    p = subprocess.run([sys.executable, "-c", WAIT], env=env, capture_output=True, text=True, check=True)
    assert p.stdout.strip() == "1"
    assert "compiling simulator kernels (once per install" in p.stderr
    assert "compiled 1 simulator kernels in" in p.stderr
