"""One instance of a poprun run: started by mpiexec on each rank, it completes the PopDist
environment with what depends on the rank, runs the user's command as its child, tags the child's
output lines with the rank (as `mpirun --tag-output` does) and exits with the child's exit code.

    python -m popdist._instance -- command [args ...]      (poprun builds this command line)

The child inherits every file descriptor (the MPI launcher's PMI connection among them) and is
killed if this process dies (PR_SET_PDEATHSIG), so stopping the run leaves nothing behind.
"""
from __future__ import annotations

import collections
import ctypes
import os
import signal
import subprocess
import sys
import threading

TAIL_LINES = 40  # stderr lines kept to show a failing instance's error when its output is filtered


def rank_from_launcher() -> int:
    for name in ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK"):
        v = os.environ.get(name)
        if v is not None and v.strip().isdigit():
            return int(v)
    raise SystemExit("popdist._instance: no MPI rank in the environment (PMI_RANK / OMPI_COMM_WORLD_RANK); "
                     "start programs with poprun")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    try:
        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass


def _pump(src, dst, tag: bytes, show: bool, tail) -> None:
    for line in iter(src.readline, b""):
        if not line.endswith(b"\n"):
            line += b"\n"
        if tail is not None:
            tail.append(line)
        if show:
            dst.write(tag + line)
            dst.flush()
    src.close()


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] == "--":
        argv = argv[1:]
    if not argv:
        print("popdist._instance: no command to run", file=sys.stderr)
        return 2
    rank = rank_from_launcher()
    env = dict(os.environ)
    local = int(env.get("POPDIST_NUM_LOCAL_REPLICAS", "1"))
    per_host = int(env.get("POPRUN_INSTANCES_PER_HOST", "0")) or int(env.get("POPRUN_NUM_INSTANCES", "1"))
    env["POPDIST_REPLICA_INDEX_OFFSET"] = str(rank * local)
    env["POPDIST_LOCAL_INSTANCE_INDEX"] = str(rank % max(1, per_host))
    env.setdefault("PYTHONUNBUFFERED", "1")  # lines reach the terminal as they are printed
    only = env.get("POPRUN_ONLY_OUTPUT_FROM_INSTANCE", "")
    show = only == "" or int(only) == rank
    tag = env.get("POPRUN_TAG_OUTPUT", "1") == "1"
    try:
        child = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, close_fds=False,
                                 preexec_fn=_die_with_parent)
    except OSError as e:
        print(f"[1,{rank}]<stderr>:poprun: instance {rank} could not start {argv[0]!r}: {e}", file=sys.stderr)
        _status(rank, 127)
        return 127

    def stop(signum, frame):  # mpiexec stopping the run: the child goes with us
        child.kill()
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    tail = collections.deque(maxlen=TAIL_LINES)
    out_tag = f"[1,{rank}]<stdout>:".encode() if tag else b""
    err_tag = f"[1,{rank}]<stderr>:".encode() if tag else b""
    pumps = [threading.Thread(target=_pump, args=(child.stdout, sys.stdout.buffer, out_tag, show, None), daemon=True),
             threading.Thread(target=_pump, args=(child.stderr, sys.stderr.buffer, err_tag, show, tail), daemon=True)]
    for p in pumps:
        p.start()
    code = child.wait()
    for p in pumps:
        p.join()
    if code != 0:
        if not show:  # its output was filtered out: its error is shown all the same
            for line in tail:
                sys.stderr.buffer.write(err_tag + line)
        how = f"signal {-code}" if code < 0 else f"exit code {code}"
        sys.stderr.buffer.write(f"{err_tag.decode()}poprun: instance {rank} failed ({how})\n".encode())
        sys.stderr.flush()
    _status(rank, code)
    return code if code >= 0 else 128 - code


def _status(rank: int, code: int) -> None:
    d = os.environ.get("POPRUN_STATUS_DIR")
    if d:
        try:
            with open(os.path.join(d, f"instance-{rank}.exit"), "w") as fh:
                fh.write(str(code))
        except OSError:
            pass


if __name__ == "__main__":
    raise SystemExit(main())
