"""Start poprun as users do (the console script's module) and look for processes left behind."""
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def poprun(args, timeout=120, env=None, cwd=ROOT, target="small:4"):
    """subprocess.CompletedProcess of `poprun ARGS` (text output); target: IPU_SIM_TARGET of the
    instances (None: the environment's, the simulated GC200 when unset)."""
    e = dict(os.environ if env is None else env)
    if target is not None:
        e["IPU_SIM_TARGET"] = target
    e["PYTHONPATH"] = ROOT + (os.pathsep + e["PYTHONPATH"] if e.get("PYTHONPATH") else "")
    return subprocess.run([sys.executable, "-m", "popdist.poprun", *args], capture_output=True, text=True,
                          timeout=timeout, env=e, cwd=cwd)


def processes_with(marker: str) -> list:
    """PIDs of live processes whose command line contains `marker` (zombies excluded)."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) == os.getpid():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                cmd = fh.read().replace(b"\0", b" ").decode(errors="replace")
            with open(f"/proc/{pid}/stat") as fh:
                state = fh.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmd and state != "Z":
            out.append(int(pid))
    return out


def wait_gone(marker: str, seconds: float = 5.0) -> list:
    end = time.monotonic() + seconds
    while True:
        left = processes_with(marker)
        if not left or time.monotonic() > end:
            return left
        time.sleep(0.1)
