"""The profile document: everything a run measured, as plain JSON-ready data.

`build_profile(executable, engine)` returns a dict (schema in docs/profile-format.md) holding the
target, the program tree, every step with its cycles on every tile, memory on every tile by
category and by liveness, the execution trace (executed step ids and start cycles) and wall times.
It only reads the Executable and the Engine: building it never changes cycles or results.

Arrays over tiles are stored run-length encoded (`rle`): a flat list [value, count, value, count,
...], which keeps 1472-tile arrays small when tiles look alike. The execution trace is stored as
runs of consecutive step ids (`[first_step, count, repeat]` triples) plus the few start cycles that
do not follow from the previous step's cycles. `ipu/` imports nothing of the project, so this
module takes extra facts (op names, wall times) as plain dicts.
"""
from __future__ import annotations

import dataclasses
import datetime as _dt
import time

import numpy as np

from . import costs
from .memory import CATEGORIES

SCHEMA = "ipu-sim-profile"
VERSION = 1  # the major version: readers refuse another one
MINOR_VERSION = 1  # fields added within the major version (1: the `code` section, the `streaming` class)

# Step kinds and the class each one counts towards in the compute / exchange / sync split.
KIND_CLASS = {
    "compute": "compute",
    "exchange": "exchange",
    "sync": "sync",
    "host_to_device": "host",
    "device_to_host": "host",
    "remote_load": "streaming",
    "remote_store": "streaming",
    "code_load": "streaming",
    "branch": "control",
}

# Memory categories that are not always live: temporaries, and vertex code loaded from streaming
# memory (live from a load to the last call before the next load; ipu/codeload.py). Every other
# category, including ones the machine adds later, counts as always live.
NOT_ALWAYS_LIVE = ("temporaries", "code_loaded")
ALWAYS_LIVE = tuple(c for c in CATEGORIES if c not in NOT_ALWAYS_LIVE)
# the order of categories in the document: loaded code next to resident vertex code
CATEGORY_ORDER = tuple(x for c in CATEGORIES for x in ((c, "code_loaded") if c == "vertex_code" else (c,)))


# ------------------------------------------------------------------------------------------------
# encodings


def rle(a) -> list:
    """Run-length encode a 1-D integer array as [value, count, value, count, ...]."""
    a = np.asarray(a).reshape(-1)
    if a.size == 0:
        return []
    brk = np.flatnonzero(a[1:] != a[:-1]) + 1
    starts = np.concatenate(([0], brk))
    counts = np.diff(np.append(starts, a.size))
    out = np.empty(2 * starts.size, np.int64)
    out[0::2] = a[starts]
    out[1::2] = counts
    return out.tolist()


def unrle(runs) -> np.ndarray:
    """Inverse of `rle`."""
    r = np.asarray(runs, np.int64).reshape(-1, 2) if len(runs) else np.zeros((0, 2), np.int64)
    return np.repeat(r[:, 0], r[:, 1])


def encode_trace(step_ids, start_cycles, step_cycles) -> dict:
    """Compact form of an execution trace (see docs/profile-format.md, `execution.trace`)."""
    ids = np.asarray(step_ids, np.int64)
    starts = np.asarray(start_cycles, np.int64)
    n = int(ids.size)
    if n == 0:
        return {"encoding": "runs-v1", "length": 0, "runs": [], "first_start": 0, "start_exceptions": []}
    brk = np.ones(n, bool)
    brk[1:] = ids[1:] != ids[:-1] + 1
    seg_at = np.flatnonzero(brk)
    seg_first = ids[seg_at]
    seg_len = np.diff(np.append(seg_at, n))
    same = np.zeros(seg_at.size, bool)
    same[1:] = (seg_first[1:] == seg_first[:-1]) & (seg_len[1:] == seg_len[:-1])
    grp_at = np.flatnonzero(~same)
    grp_rep = np.diff(np.append(grp_at, seg_at.size))
    triples = np.empty((grp_at.size, 3), np.int64)
    triples[:, 0] = seg_first[grp_at]
    triples[:, 1] = seg_len[grp_at]
    triples[:, 2] = grp_rep
    cyc = np.asarray(step_cycles, np.int64)[ids]
    expected = starts[:-1] + cyc[:-1]
    exc = np.flatnonzero(starts[1:] != expected) + 1
    exceptions = np.stack([exc, starts[exc]], axis=1) if exc.size else np.zeros((0, 2), np.int64)
    return {
        "encoding": "runs-v1",
        "length": n,
        "runs": triples.reshape(-1).tolist(),
        "first_start": int(starts[0]),
        "start_exceptions": exceptions.reshape(-1).tolist(),
    }


def decode_trace(trace: dict, step_cycles) -> tuple[np.ndarray, np.ndarray]:
    """(step ids, start cycles) of an encoded trace."""
    n = int(trace.get("length", 0))
    if n == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    t = np.asarray(trace["runs"], np.int64).reshape(-1, 3)
    parts = [np.tile(np.arange(f, f + c, dtype=np.int64), r) for f, c, r in t]
    ids = np.concatenate(parts)[:n]
    delta = np.asarray(step_cycles, np.int64)[ids]
    cs = np.concatenate(([0], np.cumsum(delta)))
    ex = np.asarray(trace.get("start_exceptions", []), np.int64).reshape(-1, 2)
    anchor_idx = np.concatenate(([0], ex[:, 0]))
    anchor_val = np.concatenate(([int(trace["first_start"])], ex[:, 1]))
    k = np.searchsorted(anchor_idx, np.arange(n), side="right") - 1
    starts = anchor_val[k] + cs[:n] - cs[anchor_idx[k]]
    return ids, starts


# ------------------------------------------------------------------------------------------------
# program tree


def _node_json(node):
    kind = node[0]
    if kind == "step":
        return int(node[1])
    if kind == "seq":
        return {"seq": [_node_json(n) for n in node[1]]}
    if kind == "repeat":
        return {"repeat": int(node[1]), "body": _node_json(node[2])}
    if kind == "call":
        return {"call": int(node[1])}
    if kind == "if":
        return {"if": int(node[1]), "then": _node_json(node[3]), "else": _node_json(node[4])}
    if kind == "switch":
        return {"switch": int(node[1]), "cases": {str(k): _node_json(v) for k, v in node[3].items()},
                "default": _node_json(node[4])}
    return {"unknown": str(kind)}


_TRANSFER_KINDS = ("exchange", "host_to_device", "device_to_host", "remote_load", "remote_store")


def timeline_steps(exe) -> list | None:
    """The step at each liveness timeline position (program order, calls expanded, one pass through
    loop bodies and every branch), or None when it cannot be matched with `exe.timeline_length`.

    The compiler inserts a sync before every exchange and host transfer; those syncs take no
    position of their own (the transfer after them does)."""
    steps = exe.steps
    out: list[int] = []
    budget = [max(exe.timeline_length, 1) * 4 + 64]

    def walk(node, stack):
        budget[0] -= 1
        if budget[0] < 0:
            raise RecursionError
        kind = node[0]
        if kind == "step":
            out.append(int(node[1]))
        elif kind == "seq":
            kids = node[1]
            if (len(kids) == 2 and kids[0][0] == "step" and kids[1][0] == "step"
                    and steps[kids[0][1]].kind == "sync" and steps[kids[1][1]].kind in _TRANSFER_KINDS):
                out.append(int(kids[1][1]))
            else:
                for k in kids:
                    walk(k, stack)
        elif kind == "repeat":
            walk(node[2], stack)
        elif kind == "call":
            f = int(node[1])
            if f in stack:
                raise RecursionError
            walk(exe.functions[f], stack | {f})
        elif kind == "if":
            out.append(int(node[1]))
            walk(node[3], stack)
            walk(node[4], stack)
        elif kind == "switch":
            out.append(int(node[1]))
            for v in node[3].values():
                walk(v, stack)
            walk(node[4], stack)

    try:
        for p in exe.programs:
            walk(p, frozenset())
    except (RecursionError, IndexError):
        return None
    if len(out) == exe.timeline_length or (exe.timeline_length == 1 and not out):
        return out
    return None


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
        info = getattr(s, "remote", None)
        tb = getattr(info, "tile_bytes", None)
        tb = np.zeros(resident.size, np.int64) if tb is None else np.asarray(tb, np.int64)
        runs = int(counts[sid]) if sid < len(counts) else 0
        loads.append({"step": int(sid), "name": s.name, "functions": [str(x) for x in getattr(info, "functions", ())],
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
    if engine is not None:
        ids, starts = engine.log.arrays()
    else:
        ids = starts = np.zeros(0, np.int64)
    counts = np.bincount(ids, minlength=nsteps) if ids.size else np.zeros(nsteps, np.int64)

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
        row = {"id": s.id, "kind": s.kind, "name": s.name, "cycles": int(s.cycles), "tile_cycles": tc_idx}
        if tc_idx is not None:
            row["active_tiles"] = int(np.count_nonzero(table_arrays[tc_idx]))
        if s.vertices:
            row["vertices"] = int(s.vertices)
        if s.bytes_moved:
            row["bytes_moved"] = int(s.bytes_moved)
        if s.debug:
            row["debug"] = s.debug
        if s.stream is not None:
            row["stream"] = getattr(s.stream, "name", str(s.stream))
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
        executed = counts * step_cycles
        for s in steps:
            c = int(executed[s.id])
            if c or counts[s.id]:
                by_kind[s.kind] = by_kind.get(s.kind, 0) + c
                cl = KIND_CLASS.get(s.kind, s.kind)
                by_class[cl] = by_class.get(cl, 0) + c
        busy = {}
        if table_arrays:
            w = np.zeros((len(table_arrays), 2), np.int64)
            for s in steps:
                if s.tile_cycles is not None and counts[s.id]:
                    col = 0 if s.kind == "compute" else 1
                    w[by_obj[id(s.tile_cycles)], col] += counts[s.id]
            mat = np.stack(table_arrays)
            busy = {"compute": rle(w[:, 0] @ mat), "transfer": rle(w[:, 1] @ mat)}
        if runs is None:
            runs = [{"program": 0, "first_entry": 0, "entries": int(ids.size),
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
            "steps_executed": int(ids.size),
            "cycles_by_kind": by_kind,
            "cycles_by_class": by_class,
            "tile_busy_cycles": busy,
        }
        if execution:
            exe_doc["trace"] = encode_trace(ids[:keep], starts[:keep], step_cycles)
            exe_doc["trace_truncated"] = keep < ids.size
        else:
            exe_doc["trace"] = None
            exe_doc["trace_truncated"] = bool(ids.size)

    run_s = info.get("run_seconds")
    wall = {k: info.pop(k) for k in ("compile_seconds", "lowering_seconds", "run_seconds") if k in info}
    wall["simulated_cycles_per_second"] = (total_cycles / run_s) if run_s else None
    wall["profile_build_seconds"] = round(time.perf_counter() - t0, 6)

    doc = {
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
