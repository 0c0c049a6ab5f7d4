"""Chrome / Perfetto trace-event JSON of a profile's execution.

Open the file in https://ui.perfetto.dev or chrome://tracing (both work offline once loaded).
Process 1 is the IPU program: one lane with every executed step, one lane per step class
(compute, exchange, sync, host, ...). Process 2 holds one lane per chosen tile with the cycles that
tile was busy in each step (the rest of the step it waits for the slowest tile). Times are in
microseconds at the target's clock; every event also carries its cycles in `args`.
"""
from __future__ import annotations

import json

import numpy as np

from . import analysis
from ._format import CLASSES, class_order, decode_trace, step_class, tile_total, unrle

PID_PROGRAM = 1
PID_TILES = 2


def parse_tiles(spec: str | None, doc: dict) -> list[int]:
    """'0-3,17' -> [0, 1, 2, 3, 17]; 'busiest:N' (default N=4) -> the N tiles with most memory and
    compute; 'none' or '' -> []."""
    n = int(doc["target"]["num_tiles"])
    if spec is None:
        spec = "busiest:4"
    spec = spec.strip().lower()
    if spec in ("", "none"):
        return []
    if spec.startswith("busiest"):
        k = int(spec.partition(":")[2] or 4)
        busy = analysis.busy_cycles(doc).get("compute")
        score = busy if busy is not None and busy.size == n and busy.any() else tile_total(doc)
        return sorted(int(t) for t in np.argsort(-score, kind="stable")[:k])
    out: list[int] = []
    for part in spec.split(","):
        part = part.strip()
        if "-" in part:
            a, b = part.split("-", 1)
            out.extend(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    bad = [t for t in out if not 0 <= t < n]
    if bad:
        raise ValueError(f"tiles {bad[:5]} do not exist on a {n}-tile target")
    return sorted(set(out))


def build_trace(doc: dict, tiles: list[int] | None = None, max_events: int = 2_000_000, progress=None) -> dict:
    """The trace-event document (a dict with "traceEvents")."""
    clock = float(doc["target"]["clock_hz"])
    us = 1e6 / clock
    steps = doc["steps"]
    ids, starts = decode_trace(doc)
    if tiles is None:
        tiles = parse_tiles(None, doc)
    ev: list[dict] = []
    meta = ev.append
    meta({"ph": "M", "name": "process_name", "pid": PID_PROGRAM, "tid": 0,
          "args": {"name": f"IPU program ({doc['target']['name']})"}})
    meta({"ph": "M", "name": "thread_name", "pid": PID_PROGRAM, "tid": 0, "args": {"name": "all steps"}})
    cls_tid = {c: i + 1 for i, c in enumerate(class_order([*CLASSES, *(step_class(s) for s in steps)]))}
    for c, tid in cls_tid.items():
        meta({"ph": "M", "name": "thread_name", "pid": PID_PROGRAM, "tid": tid, "args": {"name": c}})
        meta({"ph": "M", "name": "thread_sort_index", "pid": PID_PROGRAM, "tid": tid, "args": {"sort_index": tid}})
    if tiles:
        meta({"ph": "M", "name": "process_name", "pid": PID_TILES, "tid": 0, "args": {"name": "tiles"}})
        for t in tiles:
            meta({"ph": "M", "name": "thread_name", "pid": PID_TILES, "tid": t, "args": {"name": f"tile {t}"}})
            meta({"ph": "M", "name": "thread_sort_index", "pid": PID_TILES, "tid": t, "args": {"sort_index": t}})

    # per-step constants, computed once
    per_step = []
    tiles_arr = np.asarray(tiles, np.int64)
    table_cache: dict = {}
    for s in steps:
        i = s.get("tile_cycles")
        if i is None:
            tc = None
        else:
            if i not in table_cache:
                table_cache[i] = unrle(doc["tile_cycles_table"][i])
            tc = table_cache[i][tiles_arr] if tiles_arr.size else None
        args = {"step": s["id"], "cycles": s["cycles"], "kind": s["kind"]}
        if s.get("op"):
            args["op"] = s["op"]
        if s.get("op_type"):
            args["op_type"] = s["op_type"]
        if s.get("scope"):
            args["scope"] = s["scope"]
        if s.get("active_tiles") is not None:
            args["active_tiles"] = s["active_tiles"]
        if s.get("bytes_moved"):
            args["bytes"] = s["bytes_moved"]
        per_step.append((s["name"] or f"step {s['id']}", s["kind"], step_class(s), args, tc,
                         s["cycles"]))

    n = int(ids.size)
    truncated = False
    for k in range(n):
        if len(ev) >= max_events:
            truncated = True
            break
        sid = int(ids[k])
        name, kind, cl, args, tc, cyc = per_step[sid]
        ts = float(starts[k]) * us
        dur = cyc * us
        e = {"ph": "X", "name": name, "cat": kind, "pid": PID_PROGRAM, "tid": 0, "ts": ts, "dur": dur, "args": args}
        ev.append(e)
        ev.append({"ph": "X", "name": name, "cat": kind, "pid": PID_PROGRAM, "tid": cls_tid.get(cl, 0), "ts": ts,
                   "dur": dur})
        if tiles:
            if tc is None:
                for t in tiles:
                    ev.append({"ph": "X", "name": name, "cat": kind, "pid": PID_TILES, "tid": t, "ts": ts, "dur": dur})
            else:
                for t, c in zip(tiles, tc.tolist()):
                    if c:
                        ev.append({"ph": "X", "name": name, "cat": kind, "pid": PID_TILES, "tid": t, "ts": ts,
                                   "dur": c * us, "args": {"cycles": c}})
        if progress is not None and k % 4096 == 0:
            progress(k, n)
    if progress is not None:
        progress(n, n)
    ex = doc.get("execution") or {}
    return {
        "traceEvents": ev,
        "displayTimeUnit": "ns",
        "otherData": {
            "generator": "ipu-profile",
            "target": doc["target"]["name"],
            "clock_hz": clock,
            "total_cycles": ex.get("total_cycles", 0),
            "tiles": list(tiles),
            "truncated": truncated or bool(ex.get("trace_truncated")),
        },
    }


def write_trace(doc: dict, path: str, tiles: list[int] | None = None, progress=None) -> dict:
    tr = build_trace(doc, tiles, progress=progress)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(tr, fh, separators=(",", ":"))
    return tr
