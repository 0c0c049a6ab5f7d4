"""Building the profile document: everything a run measured, as plain JSON-ready data.

`build_profile(executable, engine)` returns a dict (schema in docs/profile-format.md) holding the
target, the program tree, every step with its cycles on every tile, memory on every tile by
category and by liveness, the execution trace (executed step ids and start cycles) and wall times.
It only reads the `ipu.Executable` and the `ipu.Engine`: building it never changes cycles or
results. Facts of the frontend (op names, wall times) come in as plain dicts, so any frontend (or
a program written directly against `ipu/`) gets the same document. The encodings (rle, trace) are
those of `_format.py`, the one definition of the format.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import time
from typing import Any

import numpy as np

from ipu import costs
from ipu.memory import CATEGORIES
from ipu.nodes import Branch, CallRef, Loop, MultiBranch, Seq, StepRef
from ipu.streams import HostTransfer
from ipu.timeline import timeline_steps

from ._format import MINOR_VERSION, SCHEMA, VERSION, encode_trace, rle

# Memory categories that are not always live: temporaries, and vertex code loaded from streaming
# memory (live from a load to the last call before the next load; ipu/codeload.py). Every other
# category, including ones the machine adds later, counts as always live.
NOT_ALWAYS_LIVE = ("temporaries", "code_loaded")
ALWAYS_LIVE = tuple(c for c in CATEGORIES if c not in NOT_ALWAYS_LIVE)
# the order of categories in the document: loaded code next to resident vertex code
CATEGORY_ORDER = tuple(x for c in CATEGORIES for x in ((c, "code_loaded") if c == "vertex_code" else (c,)))


# ------------------------------------------------------------------------------------------------
# program tree


def _node_json(node):
    match node:
        case StepRef(step):
            return int(step)
        case Seq(items):
            return {"seq": [_node_json(n) for n in items]}
        case Loop(count, body):
            return {"repeat": int(count), "body": _node_json(body)}
        case CallRef(function):
            return {"call": int(function)}
        case Branch(step, _, then, otherwise):
            return {"if": int(step), "then": _node_json(then), "else": _node_json(otherwise)}
        case MultiBranch(step, _, arms, default):
            return {"switch": int(step), "cases": {str(k): _node_json(v) for k, v in arms},
                    "default": _node_json(default)}
    return {"unknown": type(node).__name__}


# ------------------------------------------------------------------------------------------------
# op attribution


def _attribute(name: str, ops: dict):
    """The op whose name is the longest '/'-prefix of `name` (op names carry their name scopes)."""
    if not ops or not name:
        return None
    if name.startswith("sync (") and name.endswith(")"):
        name = name[6:-1]
    parts = name.split("/")
    for k in range(len(parts), 0, -1):
        cand = "/".join(parts[:k])
        hit = ops.get(cand)
        if hit is not None:
            return cand, hit
        # compute-set names made unique with a ".N" suffix
        base = cand.rsplit(".", 1)[0]
        if base != cand and base in ops:
            return base, ops[base]
    return None


# ------------------------------------------------------------------------------------------------
# the document


def _target_json(t) -> dict:
    d = dataclasses.asdict(t)
    d.update(num_tiles=t.num_tiles, clock_ghz=t.clock_ghz, bytes_per_ipu=t.tiles_per_ipu * t.bytes_per_tile,
             total_bytes=t.num_tiles * t.bytes_per_tile, inter_ipu_sync_cycles=t.inter_ipu_sync_cycles(),
             host_latency_cycles=t.host_latency_cycles())
    return d


def _memory(exe, worst: int = 10) -> tuple[dict, np.ndarray]:
    t = exe.target
    n = t.num_tiles
    cats = exe.plan.categories
    names = [c for c in CATEGORY_ORDER if c in cats] + [c for c in cats if c not in CATEGORY_ORDER]
    arrs = {c: np.asarray(cats[c], np.int64).reshape(-1) for c in names}
    total = np.zeros(n, np.int64)
    always = np.zeros(n, np.int64)
    for c in names:
        total += arrs[c]
        if c not in NOT_ALWAYS_LIVE:
            always += arrs[c]
    order = np.argsort(-total, kind="stable")[:worst]

    by_tile_vars: dict[int, list] = {int(w): [] for w in order}
    var_rows = []
    by_dtype: dict[str, np.ndarray] = {}  # tensor bytes per tile by element type (float8: 1 byte each)
    for L in exe.layouts.values():
        v = L.variable
        isz = v.dtype.itemsize
        piece_bytes = (L.stops - L.starts) * isz
        if piece_bytes.size:
            acc = by_dtype.setdefault(v.dtype.name, np.zeros(n, np.int64))
            acc += np.bincount(np.asarray(L.tiles, np.int64), weights=piece_bytes, minlength=n).astype(np.int64)[:n]
        tiles_of = np.unique(L.tiles)
        var_rows.append({"name": v.name, "category": v.category, "dtype": v.dtype.name,
                         "shape": [int(s) for s in v.shape], "bytes": int(piece_bytes.sum()),
                         "tiles": int(tiles_of.size), "debug": v.debug})
        for w in by_tile_vars:
            m = L.tiles == w
            if m.any():
                by_tile_vars[w].append((v.name, int(piece_bytes[m].sum())))
    worst_rows = []
    for w in order:
        w = int(w)
        worst_rows.append({
            "tile": w, "total": int(total[w]),
            "categories": {c: int(arrs[c][w]) for c in names if arrs[c][w]},
            "largest": [list(x) for x in sorted(by_tile_vars[w], key=lambda x: -x[1])[:5]],
        })
    var_rows.sort(key=lambda r: -r["bytes"])
    cap = n * t.bytes_per_tile
    used = int(total.sum())
    mem = {
        "categories": names,
        "tiles": {c: rle(arrs[c]) for c in names},
        "tile_total": rle(total),
        "totals": {c: int(arrs[c].sum()) for c in names},
        "total": used,
        "capacity": cap,
        "free": cap - used,
        "max_tile": {"tile": int(np.argmax(total)) if n else 0, "bytes": int(total.max(initial=0))},
        "min_tile": {"tile": int(np.argmin(total)) if n else 0, "bytes": int(total.min(initial=0))},
        "tiles_over_capacity": int(np.count_nonzero(total > t.bytes_per_tile)),
        "always_live": {"total": int(always.sum()), "tile": rle(always)},
        "not_always_live_peak_tile": rle(np.asarray(exe.live_peak_tile, np.int64)),
        "data_bytes_allocated": int(exe.plan.total_bytes),
        "worst_tiles": worst_rows,
        "variables": var_rows,
        # bytes of tensor data (variables, constants, temporaries as allocated) per element type
        "dtypes": {d: {"total": int(a.sum()), "max_tile": int(a.max(initial=0)),
                       "tiles_holding": int(np.count_nonzero(a)), "tile": rle(a)}
                   for d, a in sorted(by_dtype.items(), key=lambda kv: -int(kv[1].sum()))},
    }
    return mem, total


def _code(exe, counts, tl_steps) -> dict | None:
    """The `code` section: vertex code resident vs loaded from streaming memory (None when no
    function's code is loaded). See ipu/codeload.py and docs/profile-format.md."""
    cl = getattr(exe, "code_liveness", None)
    if cl is None:
        return None
    steps = exe.steps
    resident = np.asarray(cl.resident, np.int64)
    loaded = np.asarray(cl.loaded_peak, np.int64)
    everything = np.asarray(cl.all_resident, np.int64)
    with_loading = resident + loaded
    saved = everything - with_loading
    b = int(cl.busiest_tile)
    r = int(np.argmax(everything)) if everything.size else 0
    w = int(np.argmax(with_loading)) if with_loading.size else 0

    def on_tile(t):
        return {"tile": t, "resident": int(resident[t]), "loaded_peak": int(loaded[t]),
                "with_loading": int(with_loading[t]), "all_resident": int(everything[t]), "saved": int(saved[t])}

    live = np.asarray(cl.live, np.int64)
    live_b = np.asarray(cl.live_busiest, np.int64)
    pk = int(np.argmax(live)) if live.size else 0
    live_peak = {"position": pk, "bytes": int(live[pk]) if live.size else 0,
                 "busiest_tile_bytes": int(live_b.max(initial=0))}
    if tl_steps and pk < len(tl_steps):
        live_peak.update(step=tl_steps[pk], name=steps[tl_steps[pk]].name)

    functions = []
    for name, f in cl.functions.items():
        tb = np.asarray(f["tile_bytes"], np.int64)
        functions.append({"name": name, "bytes": int(f["total"]), "max_tile": int(f["max_tile"]),
                          "tiles": int(np.count_nonzero(tb)), "tile_bytes": rle(tb),
                          "intervals": [[int(a), int(z)] for a, z in f["intervals"]]})
    sync = int(costs.sync_cycles(exe.target))
    loads = []
    for sid in cl.load_steps:
        s = steps[sid]
        info = s.payload  # remote.CodeLoadInfo
        tb = np.zeros(resident.size, np.int64) if info.tile_bytes is None else np.asarray(info.tile_bytes, np.int64)
        runs = int(counts[sid]) if sid < len(counts) else 0
        loads.append({"step": int(sid), "name": s.name, "functions": [str(x) for x in info.functions],
                      "bytes": int(s.bytes_moved or 0), "max_tile_bytes": int(tb.max(initial=0)),
                      "tiles": int(np.count_nonzero(tb)), "cycles": int(s.cycles), "sync_cycles": sync,
                      "transfer_cycles": max(int(s.cycles) - sync, 0), "executions": runs,
                      "executed_cycles": runs * int(s.cycles)})
    return {
        "resident": rle(resident),
        "loaded_peak": rle(loaded),
        "all_resident": rle(everything),
        "saved": rle(saved),
        "totals": {"resident": int(resident.sum()), "loaded_peak": int(loaded.sum()),
                   "with_loading": int(with_loading.sum()), "all_resident": int(everything.sum()),
                   "saved": int(saved.sum())},
        "busiest_tile": on_tile(b),
        "peak_tile": {"all_resident": {"tile": r, "bytes": int(everything[r]) if everything.size else 0},
                      "with_loading": {"tile": w, "bytes": int(with_loading[w]) if with_loading.size else 0},
                      "saved": int(everything.max(initial=0) - with_loading.max(initial=0))},
        "live": live.tolist(),
        "live_busiest": live_b.tolist(),
        "live_peak": live_peak,
        "functions": functions,
        "load_steps": loads,
        "load_cycles": {"steps": len(loads), "executions": sum(x["executions"] for x in loads),
                        "executed_cycles": sum(x["executed_cycles"] for x in loads)},
        "exact": bool(cl.exact),
    }


def build_profile(exe, engine=None, *, info: dict | None = None, ops: dict | None = None,
                  step_ops: dict | None = None, runs: list | None = None, execution: bool = True,
                  max_trace_entries: int | None = None, trace_entries: int | None = None) -> dict:
    """The profile document of an Executable and (optionally) the Engine that ran it.

    info: extra facts kept under "info" (wall times: compile_seconds, lowering_seconds,
          run_seconds; the script; anything JSON-ready).
    ops: popxl op name -> {"type": ..., "scope": ..., "graph": ...}; a step is attributed to the
         op whose name is the longest '/'-prefix of its debug name or name.
    step_ops: step name -> op name, when the lowering recorded it (wins over prefix matching).
    runs: [{"first_entry", "entries", "program", "start_cycle", "cycles", "wall_seconds"}, ...] as
          recorded by the caller around Engine.run; one run over the whole log when omitted.
    execution: False leaves out the execution trace (the graph profile only).
    trace_entries: keep only the first this many trace entries (e.g. the first N runs).
    max_trace_entries: a safety cap on the trace length.
    """
    t0 = time.perf_counter()
    info = dict(info or {})
    ops = ops or {}
    step_ops = step_ops or {}
    target = exe.target
    steps = exe.steps
    nsteps = len(steps)
    step_cycles = np.fromiter((s.cycles for s in steps), np.int64, nsteps)

    # executed entries
    # the trace holds the first entries only when the engine's trace limit was reached; the
    # per-step counts cover every run
    if engine is not None:
        ids, starts = engine.log.arrays()
        executed = len(engine.log)
        counts = np.zeros(nsteps, np.int64)
        c = np.asarray(engine.log.counts, np.int64)[:nsteps]
        counts[:c.size] = c
    else:
        ids = starts = np.zeros(0, np.int64)
        executed = 0
        counts = np.zeros(nsteps, np.int64)

    # per-tile cycles, deduplicated (steps of one compute set share one array)
    table: list = []
    table_arrays: list = []
    by_obj: dict = {}
    by_key: dict = {}
    step_rows = []
    tl_steps = timeline_steps(exe)
    for s in steps:
        tc_idx = None
        if s.tile_cycles is not None:
            key_obj = id(s.tile_cycles)
            tc_idx = by_obj.get(key_obj)
            if tc_idx is None:
                arr = np.asarray(s.tile_cycles, np.int64)
                key = arr.tobytes()
                tc_idx = by_key.get(key)
                if tc_idx is None:
                    tc_idx = len(table)
                    table.append(rle(arr))
                    table_arrays.append(arr)
                    by_key[key] = tc_idx
                by_obj[key_obj] = tc_idx
        row = {"id": s.id, "kind": s.kind, "class": s.profile_class, "name": s.name, "cycles": int(s.cycles),
               "tile_cycles": tc_idx}
        if tc_idx is not None:
            row["active_tiles"] = int(np.count_nonzero(table_arrays[tc_idx]))
        if s.vertices:
            row["vertices"] = int(s.vertices)
        if s.bytes_moved:
            row["bytes_moved"] = int(s.bytes_moved)
        if s.debug:
            row["debug"] = s.debug
        if isinstance(s.payload, HostTransfer):
            row["stream"] = s.payload.stream.name
        op_name = step_ops.get(s.name)
        hit = (op_name, ops.get(op_name, {})) if op_name else (_attribute(s.debug, ops) or _attribute(s.name, ops))
        if hit:
            row["op"] = hit[0]
            for k in ("type", "scope", "graph"):
                if hit[1].get(k) is not None:
                    row["op_" + k if k != "scope" else "scope"] = hit[1][k]
        row["executions"] = int(counts[s.id])
        row["executed_cycles"] = int(counts[s.id]) * int(s.cycles)
        step_rows.append(row)

    mem, _ = _memory(exe)

    # liveness over the timeline
    live = np.asarray(exe.liveness, np.int64)
    peak_pos = int(np.argmax(live)) if live.size else 0
    liveness = {
        "positions": int(live.size),
        "not_always_live": live.tolist(),
        "step_of_position": tl_steps,
        "always_live_bytes": mem["always_live"]["total"],
        "peak": {"position": peak_pos, "bytes": int(live[peak_pos]) if live.size else 0},
    }
    if tl_steps is not None and tl_steps:
        sid = tl_steps[peak_pos]
        liveness["peak"].update(step=sid, name=steps[sid].name)

    # execution
    exe_doc = None
    total_cycles = int(engine.cycles) if engine is not None else 0
    if engine is not None:
        by_kind: dict[str, int] = {}
        by_class: dict[str, int] = {}
        executed_cycles = counts * step_cycles
        for s in steps:
            cyc = int(executed_cycles[s.id])
            if cyc or counts[s.id]:
                by_kind[s.kind] = by_kind.get(s.kind, 0) + cyc
                by_class[s.profile_class] = by_class.get(s.profile_class, 0) + cyc
        busy = {}
        if table_arrays:
            w = np.zeros((len(table_arrays), 2), np.int64)
            for s in steps:
                if s.tile_cycles is not None and counts[s.id]:
                    col = 0 if s.profile_class == "compute" else 1
                    w[by_obj[id(s.tile_cycles)], col] += counts[s.id]
            mat = np.stack(table_arrays)
            busy = {"compute": rle(w[:, 0] @ mat), "transfer": rle(w[:, 1] @ mat)}
        if runs is None:
            runs = [{"program": 0, "first_entry": 0, "entries": int(executed),
                     "start_cycle": int(starts[0]) if ids.size else 0,
                     "cycles": total_cycles - (int(starts[0]) if ids.size else 0)}]
        keep = int(ids.size)
        if trace_entries is not None:
            keep = min(keep, int(trace_entries))
        if max_trace_entries is not None:
            keep = min(keep, int(max_trace_entries))
        exe_doc = {
            "total_cycles": total_cycles,
            "seconds_at_clock": total_cycles / target.clock_hz,
            "engine_runs": int(engine.runs),
            "replicas": int(engine.replicas),
            "runs": runs,
            "steps_executed": int(executed),
            "cycles_by_kind": by_kind,
            "cycles_by_class": by_class,
            "tile_busy_cycles": busy,
        }
        if execution:
            exe_doc["trace"] = encode_trace(ids[:keep], starts[:keep], step_cycles)
            exe_doc["trace_truncated"] = keep < executed
        else:
            exe_doc["trace"] = None
            exe_doc["trace_truncated"] = bool(executed)

    run_s = info.get("run_seconds")
    wall = {k: info.pop(k) for k in ("compile_seconds", "lowering_seconds", "run_seconds") if k in info}
    wall["simulated_cycles_per_second"] = (total_cycles / run_s) if run_s else None
    wall["profile_build_seconds"] = round(time.perf_counter() - t0, 6)

    doc: dict[str, Any] = {
        "schema": SCHEMA,
        "version": VERSION,
        "minor_version": MINOR_VERSION,
        "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "target": _target_json(target),
        "programs": {"programs": [_node_json(p) for p in exe.programs],
                     "functions": [_node_json(f) for f in exe.functions]},
        "steps": step_rows,
        "tile_cycles_table": table,
        "memory": mem,
        "liveness": liveness,
        "code": _code(exe, counts, tl_steps),
        "execution": exe_doc,
        "wall": wall,
        "info": info,
    }
    doc["wall"]["profile_build_seconds"] = round(time.perf_counter() - t0, 6)
    return doc
