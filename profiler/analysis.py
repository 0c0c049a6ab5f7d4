"""Numbers derived from a profile document, shared by the terminal report, --json, compare and HTML."""
from __future__ import annotations

import numpy as np

from ._format import class_order, kind_classes, memory_by_category, step_class, tile_total, unrle


def cycles_by_class(doc: dict) -> dict:
    """Executed cycles by class (compute, exchange, sync, host, streaming, control, and any class
    of a program kind of one's own), from the cycles by step kind and the steps' classes
    (documents of minor version 0 had `remote` and `code_load` classes)."""
    ex = doc.get("execution") or {}
    by_kind = ex.get("cycles_by_kind")
    if by_kind is None:
        return {c: int(v) for c, v in (ex.get("cycles_by_class") or {}).items()}
    classes = kind_classes(doc)
    out: dict = {}
    for k, v in by_kind.items():
        cl = classes.get(k) or step_class({"kind": k})
        out[cl] = out.get(cl, 0) + int(v)
    return {c: out[c] for c in class_order(out)}


def code_memory(doc: dict) -> dict:
    """Vertex code resident vs loaded from streaming memory, in bytes, and the cost of the loads.

    From the document's `code` section; a profile without code loading has all its vertex code
    resident (`loading` False, nothing loaded or saved), so two profiles always compare."""
    c = doc.get("code")
    if c:
        loads = c.get("load_steps", [])
        return {
            "loading": True,
            **{k: int(v) for k, v in c["totals"].items()},
            "busiest_tile": dict(c["busiest_tile"]),
            "peak_tile_all_resident": int(c["peak_tile"]["all_resident"]["bytes"]),
            "peak_tile_with_loading": int(c["peak_tile"]["with_loading"]["bytes"]),
            "peak_tile_saved": int(c["peak_tile"]["saved"]),
            "functions": len(c.get("functions", [])),
            "load_steps": len(loads),
            "load_executions": sum(int(x.get("executions", 0)) for x in loads),
            "load_cycles": sum(int(x.get("executed_cycles", 0)) for x in loads),
            "load_bytes": sum(int(x.get("bytes", 0)) * int(x.get("executions", 0)) for x in loads),
            "live_peak": int((c.get("live_peak") or {}).get("bytes", 0)),
        }
    vc = memory_by_category(doc).get("vertex_code")
    if vc is None or vc.size == 0:
        vc = np.zeros(max(int(doc["target"]["num_tiles"]), 1), np.int64)
    t = int(np.argmax(vc))
    top = int(vc[t])
    return {
        "loading": False, "resident": int(vc.sum()), "loaded_peak": 0, "with_loading": int(vc.sum()),
        "all_resident": int(vc.sum()), "saved": 0,
        "busiest_tile": {"tile": t, "resident": top, "loaded_peak": 0, "with_loading": top, "all_resident": top,
                         "saved": 0},
        "peak_tile_all_resident": top, "peak_tile_with_loading": top, "peak_tile_saved": 0, "functions": 0,
        "load_steps": 0, "load_executions": 0, "load_cycles": 0, "load_bytes": 0, "live_peak": 0,
    }


def op_key(step: dict) -> str:
    """What a step is charged to: its popxl op, else the first part of its name."""
    if step.get("op"):
        return step["op"]
    name = step.get("name") or f"step {step['id']}"
    if name.startswith("sync (") and name.endswith(")"):
        name = name[6:-1]
    return name.split("/")[0] if "/" in name else name


def summary(doc: dict) -> dict:
    """The totals of a profile: what `ipu-profile report --json` prints."""
    t = doc["target"]
    mem = doc["memory"]
    ex = doc.get("execution") or {}
    total = tile_total(doc)
    cats = mem["totals"]
    cycles_total = int(ex.get("total_cycles", 0))
    by_class = cycles_by_class(doc)
    live = doc.get("liveness") or {}
    peak = live.get("peak") or {}
    wall = doc.get("wall") or {}
    data = sum((unrle(mem["tiles"][c]) for c in ("variables", "constants", "temporaries") if c in mem["tiles"]),
               np.zeros(total.size, np.int64))
    used_tiles = int(np.count_nonzero(data))
    return {
        "file": doc.get("_file"),
        "target": {k: t.get(k) for k in ("name", "num_tiles", "tiles_per_ipu", "ipus", "bytes_per_tile",
                                          "clock_hz")},
        "cycles": {
            "total": cycles_total,
            "seconds_at_clock": cycles_total / float(t["clock_hz"]) if t.get("clock_hz") else None,
            "by_class": by_class,
            "by_kind": dict(ex.get("cycles_by_kind", {})),
            "steps_executed": int(ex.get("steps_executed", 0)),
            "runs": len(ex.get("runs", []) or []),
        },
        "memory": {
            "total": int(mem["total"]),
            "capacity": int(mem["capacity"]),
            "free": int(mem["free"]),
            "used_fraction": mem["total"] / mem["capacity"] if mem["capacity"] else 0.0,
            "by_category": {c: int(v) for c, v in cats.items()},
            "max_tile": mem["max_tile"],
            "mean_tile": float(total.mean()) if total.size else 0.0,
            "tiles_with_data": used_tiles,
            "tiles_over_capacity": int(mem.get("tiles_over_capacity", 0)),
            "always_live": int(mem["always_live"]["total"]),
            "not_always_live_peak": int(peak.get("bytes", 0)),
            "not_always_live_peak_step": peak.get("name"),
        },
        "code": code_memory(doc),
        "steps": len(doc["steps"]),
        "wall": {k: wall.get(k) for k in ("compile_seconds", "lowering_seconds", "run_seconds",
                                          "simulated_cycles_per_second")},
    }


def ops(doc: dict) -> list[dict]:
    """Executed cycles per op (or step-name prefix), costliest first, split by class."""
    rows: dict[str, dict] = {}
    for s in doc["steps"]:
        c = int(s.get("executed_cycles", 0))
        if not s.get("executions"):
            continue
        k = op_key(s)
        r = rows.get(k)
        if r is None:
            r = rows[k] = {"op": k, "type": s.get("op_type") or "", "scope": s.get("scope") or "",
                           "cycles": 0, "steps": 0, "executions": 0, "by_class": {}}
        r["cycles"] += c
        r["steps"] += 1
        r["executions"] += int(s["executions"])
        cl = step_class(s)
        r["by_class"][cl] = r["by_class"].get(cl, 0) + c
    return sorted(rows.values(), key=lambda r: -r["cycles"])


def grouped(doc: dict, by: str = "type") -> list[dict]:
    """Executed cycles per op type ("type") or name scope ("scope"), split by class, costliest first.
    Rows have the shape of `ops` rows, with the group in "op"."""
    rows: dict[str, dict] = {}
    for r in ops(doc):
        k = (r["type"] if by == "type" else r["scope"]) or ("(no op)" if by == "type" else "(top level)")
        x = rows.setdefault(k, {"op": k, "type": "", "scope": "", "cycles": 0, "steps": 0, "executions": 0,
                                "ops": 0, "by_class": {}})
        x["cycles"] += r["cycles"]
        x["steps"] += r["steps"]
        x["executions"] += r["executions"]
        x["ops"] += 1
        for c, v in r["by_class"].items():
            x["by_class"][c] = x["by_class"].get(c, 0) + v
    return sorted(rows.values(), key=lambda r: -r["cycles"])


def op_types(doc: dict) -> list[dict]:
    return grouped(doc, "type")


def costliest_steps(doc: dict, n: int = 15) -> list[dict]:
    s = [x for x in doc["steps"] if x.get("executions")]
    return sorted(s, key=lambda x: -int(x.get("executed_cycles", 0)))[:n]


def histogram(values: np.ndarray, capacity: int, bins: int = 12) -> list[tuple[int, int, int]]:
    """(low, high, tiles) buckets of bytes per tile from 0 to max(capacity, max value)."""
    if values.size == 0:
        return []
    top = max(int(values.max()), 1)
    hi = top if top > capacity else capacity
    if top < capacity / 4:  # small programs: zoom in on where the tiles are
        hi = top
    edges = np.linspace(0, hi, bins + 1)
    counts, _ = np.histogram(values, bins=edges)
    return [(int(edges[i]), int(edges[i + 1]), int(counts[i])) for i in range(bins)]


def worst_tiles(doc: dict, n: int = 8) -> list[dict]:
    rows = list(doc["memory"].get("worst_tiles", []))[:n]
    if len(rows) < n:
        tot = tile_total(doc)
        cats = memory_by_category(doc)
        have = {r["tile"] for r in rows}
        for t in np.argsort(-tot, kind="stable"):
            if len(rows) >= n:
                break
            if int(t) in have:
                continue
            rows.append({"tile": int(t), "total": int(tot[t]),
                         "categories": {c: int(v[t]) for c, v in cats.items() if v[t]}, "largest": []})
    return rows


def busy_cycles(doc: dict) -> dict:
    ex = doc.get("execution") or {}
    return {k: unrle(v) for k, v in (ex.get("tile_busy_cycles") or {}).items()}


def compare(a: dict, b: dict) -> dict:
    """What changed from profile a to profile b: totals, categories, cycles by class and by op."""
    sa, sb = summary(a), summary(b)

    def pair(x, y):
        d = None if x is None or y is None else y - x
        rel = (d / x) if (d is not None and x) else None
        return {"a": x, "b": y, "delta": d, "relative": rel}

    rows = {
        "total_cycles": pair(sa["cycles"]["total"], sb["cycles"]["total"]),
        "steps_executed": pair(sa["cycles"]["steps_executed"], sb["cycles"]["steps_executed"]),
        "memory_total": pair(sa["memory"]["total"], sb["memory"]["total"]),
        "max_tile_bytes": pair(sa["memory"]["max_tile"]["bytes"], sb["memory"]["max_tile"]["bytes"]),
        "always_live": pair(sa["memory"]["always_live"], sb["memory"]["always_live"]),
        "not_always_live_peak": pair(sa["memory"]["not_always_live_peak"], sb["memory"]["not_always_live_peak"]),
    }
    for c in sorted(set(sa["cycles"]["by_class"]) | set(sb["cycles"]["by_class"])):
        rows[f"cycles.{c}"] = pair(sa["cycles"]["by_class"].get(c, 0), sb["cycles"]["by_class"].get(c, 0))
    cats = list(sa["memory"]["by_category"]) + [c for c in sb["memory"]["by_category"]
                                               if c not in sa["memory"]["by_category"]]
    for c in cats:
        rows[f"memory.{c}"] = pair(sa["memory"]["by_category"].get(c, 0), sb["memory"]["by_category"].get(c, 0))
    ca, cb = sa["code"], sb["code"]
    if ca["loading"] or cb["loading"]:
        rows["code.resident"] = pair(ca["resident"], cb["resident"])
        rows["code.loaded_peak"] = pair(ca["loaded_peak"], cb["loaded_peak"])
        rows["code.with_loading"] = pair(ca["with_loading"], cb["with_loading"])
        rows["code.peak_tile"] = pair(ca["peak_tile_with_loading"], cb["peak_tile_with_loading"])
        rows["code.saved"] = pair(ca["saved"], cb["saved"])
        rows["code.load_cycles"] = pair(ca["load_cycles"], cb["load_cycles"])
    for k in ("compile_seconds", "run_seconds"):
        rows[f"wall.{k}"] = pair(sa["wall"].get(k), sb["wall"].get(k))
    oa = {r["op"]: r["cycles"] for r in ops(a)}
    ob = {r["op"]: r["cycles"] for r in ops(b)}
    op_rows = [{"op": k, "a": oa.get(k, 0), "b": ob.get(k, 0), "delta": ob.get(k, 0) - oa.get(k, 0)}
               for k in set(oa) | set(ob)]
    op_rows = [r for r in op_rows if r["delta"]]
    op_rows.sort(key=lambda r: -abs(r["delta"]))
    return {"a": sa["file"], "b": sb["file"], "target": {"a": sa["target"]["name"], "b": sb["target"]["name"]},
            "totals": rows, "ops": op_rows}
