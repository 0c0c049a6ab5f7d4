"""The session side of profiling: what a popxl Session calls after each run and on exit.

`session_event(session, event)` and `trace_limit(session)` are the entry points; they return at
once when profiling is off (the session's options, resolved when it was made: popxl/_run_options.py).
When on, it records where each run starts in the engine's step log,
and writes DIR/profile.json (DIR/profile-1.json, ... for later sessions of the process writing to
DIR) when the session exits, at interpreter exit for sessions never exited, and every `REWRITE_SECONDS` during
long runs. The first MAX_RUN_RECORDS runs are described one by one (execution.runs); the
execution trace keeps the first MAX_TRACE_ENTRIES executed steps, the per-step counts and totals
cover every run. The document itself is built and written by the profiler (`profiler.build_profile`,
`profiler.write_document`) from the session's executable, engine, wall times and popxl ops, handed
over as plain data.
"""
from __future__ import annotations

import atexit
import os
import re
import sys
import time
import weakref

from profiler import build_profile, write_document

from ._run_options import RunOptions

REWRITE_SECONDS = 30.0
MAX_RUN_RECORDS = 1000  # runs described one by one in the document
MAX_TRACE_ENTRIES = 2_000_000  # executed steps traced per session (32 MB); counts cover the rest
# with profiling off a session still keeps its first executed steps (1 MiB) and runs, for
# `session._pb_session.getReport()` (a pva report, as the IPU model's engine always has one)
QUIET_TRACE_ENTRIES = 65_536
QUIET_RUN_RECORDS = 100

_states: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_sessions_per_dir: dict = {}  # profile directory -> sessions of this process that wrote there
_cleaned_dirs: set = set()
_atexit_registered = False


class _State:
    def __init__(self, opts, index):
        self.opts = opts
        self.index = index
        self.runs: list[dict] = []
        self.run_count = 0
        self.trace_cap = None  # trace entries to keep once executionProfileProgramRunCount runs ran
        self.log_len = 0
        self.cycles = 0
        self.run_seconds = 0.0
        self.created = time.monotonic()
        self.last_write = None
        self.dirty = True
        self.path = None
        self.instance = None  # PopDist instance index of a multi-instance run (in the file name)


def _options_for(session):
    """The session's profiling options, resolved when it was made (popxl._run_options)."""
    resolved = getattr(session, "options", None)
    return resolved.profile if isinstance(resolved, RunOptions) else None


def trace_limit(session) -> int:
    """How many executed steps the session's engine keeps in its trace: none with profiling off
    (so nothing grows per run), otherwise the first MAX_TRACE_ENTRIES, or fewer once the runs
    that autoReport.executionProfileProgramRunCount asks for are traced. Per-step counts and the
    totals always cover every run."""
    opts = _options_for(session)
    if opts is None:
        return QUIET_TRACE_ENTRIES
    if not opts.execution or opts.run_count == 0:
        return 0
    st = _states.get(session)
    if st is not None and st.trace_cap is not None:
        return min(st.trace_cap, MAX_TRACE_ENTRIES)
    return MAX_TRACE_ENTRIES


def session_event(session, event: str) -> None:
    """Called by popxl.Session: event "run" after every run, "exit" when the session detaches."""
    opts = _options_for(session)
    if opts is None:
        if event == "run":
            _quiet_run(session)
        return
    try:
        _event(session, event, opts)
    except Exception as e:  # a profile must never break the user's program
        print(f"ipu-profile: could not write the profile: {type(e).__name__}: {e}", file=sys.stderr)


def _state(session, opts) -> _State:
    global _atexit_registered
    st = _states.get(session)
    if st is None:
        # the first session of the process writing to a directory writes profile.json there, the
        # next ones profile-1.json, profile-2.json, ...
        key = os.path.abspath(opts.directory)
        st = _State(opts, _sessions_per_dir.get(key, 0))
        st.instance = _instance_index(session)
        _sessions_per_dir[key] = st.index + 1
        _states[session] = st
        if not _atexit_registered:
            atexit.register(_flush_all)
            _atexit_registered = True
    return st


def _instance_info(session):
    """The PopDist instance facts of a multi-instance session (None for one process)."""
    fn = getattr(session, "instance_info", None)
    return fn() if callable(fn) else None


def _instance_index(session):
    info = _instance_info(session)
    return None if not info else int(info["index"])


def _event(session, event, opts) -> None:
    st = _state(session, opts)
    engine = session.engine
    if event == "run":
        n = len(engine.log)
        run_s = float(session.run_seconds)
        if len(st.runs) < MAX_RUN_RECORDS:  # a training loop may call run() a million times
            st.runs.append({"program": 0, "first_entry": st.log_len, "entries": n - st.log_len,
                            "start_cycle": st.cycles, "cycles": int(engine.cycles) - st.cycles,
                            "wall_seconds": round(run_s - st.run_seconds, 6)})
        st.log_len, st.cycles, st.run_seconds = n, int(engine.cycles), run_s
        st.run_count += 1
        if opts.run_count is not None and st.run_count == opts.run_count:
            st.trace_cap = n
        st.dirty = True
        now = time.monotonic()
        if now - (st.last_write or st.created) > REWRITE_SECONDS:
            write(session, st)
    elif event in ("exit", "close"):
        if st.dirty:
            write(session, st)


_quiet: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # session -> _State without options


def _quiet_run(session) -> None:
    """Where a run starts in the trace a session keeps without profiling (its first runs only)."""
    st = _quiet.get(session)
    if st is None:
        st = _quiet[session] = _State(None, 0)
    if len(st.runs) >= QUIET_RUN_RECORDS:
        return
    engine = session.engine
    n = len(engine.log)
    run_s = float(session.run_seconds)
    st.runs.append({"program": 0, "first_entry": st.log_len, "entries": n - st.log_len, "start_cycle": st.cycles,
                    "cycles": int(engine.cycles) - st.cycles, "wall_seconds": round(run_s - st.run_seconds, 6)})
    st.log_len, st.cycles, st.run_seconds = n, int(engine.cycles), run_s


def document(session) -> dict:
    """The profile document of a session now, whether profiling is on or not (with it off, the
    trace holds the first QUIET_TRACE_ENTRIES executed steps)."""
    return build(session, _states.get(session) or _quiet.get(session))


def _flush_all() -> None:
    for session, st in list(_states.items()):
        if st.dirty:
            try:
                write(session, st)
            except Exception as e:  # pragma: no cover - interpreter shutdown
                print(f"ipu-profile: could not write the profile: {e}", file=sys.stderr)


def op_table(ir) -> dict:
    """popxl op name -> {"type", "scope", "graph"} for every op of every graph (first one wins)."""
    out: dict = {}
    for g in ir.graphs:
        for op in g.ops:
            name = op.name
            if not name:
                continue
            rec = {"type": op.type, "scope": op.scope or "", "graph": g.name}
            have = out.get(name)
            if have is None:
                out[name] = rec
            elif have["graph"] != rec["graph"]:
                have["graph"] = None  # the same op name in several graphs: the graph is not known
    return out


def _path_for(st: _State) -> str:
    d = st.opts.directory
    os.makedirs(d, exist_ok=True)
    key = os.path.abspath(d)
    if key not in _cleaned_dirs:
        # profiles of later sessions of an earlier process would read as this process's
        _cleaned_dirs.add(key)
        own = "" if st.instance is None else re.escape(f".instance{st.instance}")
        for name in os.listdir(d):
            if re.match(rf"^profile-\d+{own}\.json$", name):
                try:
                    os.remove(os.path.join(d, name))
                except OSError:
                    pass
    name = "profile" if st.index == 0 else f"profile-{st.index}"
    inst = st.instance
    return os.path.join(d, f"{name}.json" if inst is None else f"{name}.instance{inst}.json")


def build(session, st: _State | None = None) -> dict:
    """The profile document of a session (its executable, engine, wall times and popxl ops)."""
    runs = st.runs if st is not None and st.runs else None
    trace_entries = None
    opts = st.opts if st is not None else None
    if opts is not None and opts.run_count is not None and runs:
        kept = runs[:opts.run_count]
        trace_entries = (kept[-1]["first_entry"] + kept[-1]["entries"]) if kept else 0
    info = {
        "compile_seconds": session.compile_seconds,
        "lowering_seconds": session.lowering_seconds,
        "run_seconds": session.run_seconds,
        "session_total_cycles": session.total_cycles,
        "device_desc": session.device_desc,
        "script": os.path.abspath(sys.argv[0]) if sys.argv and sys.argv[0] else None,
        "argv": list(sys.argv[1:]),
        "session_index": st.index if st is not None else 0,
        "frontend": getattr(session, "frontend", "popxl"),
    }
    instance = _instance_info(session)
    if instance:
        info["instance"] = instance
    return build_profile(session.executable, session.engine, info=info, ops=op_table(session.ir),
                         step_ops=dict(session._lowered.op_names), runs=runs,
                         execution=opts.execution if opts is not None else True, trace_entries=trace_entries)


def write(session, st: _State | None = None) -> str:
    if st is None:
        opts = _options_for(session)
        if opts is None:
            raise RuntimeError("profiling is off for this session: set IPU_SIM_PROFILE=DIR or POPLAR_ENGINE_OPTIONS "
                               "before making it")
        st = _state(session, opts)
    if st.path is None:
        st.path = _path_for(st)
    path = write_document(build(session, st), st.path)
    st.last_write = time.monotonic()
    st.dirty = False
    return path
