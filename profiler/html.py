"""One self-contained HTML page of a profile: pictures drawn by inline JavaScript, no network.

Pictures: tile memory heat map (by category, always live, busy cycles, code saved by loading),
liveness over program steps, execution trace per tile (the BSP view: busy and waiting per tile in
every step, code loads in their own colour; zoom with the wheel, drag to pan), code memory when
code is loaded from streaming memory (resident vs loaded per tile, loaded code over program
positions, the saving, the loads), cycles by op, memory by category and a histogram of memory over
tiles.
The page records script errors in #js-errors and sets data-rendered="ok" on #status once every
picture is drawn (the headless-browser test reads both).

The page's markup, style and script are package data (profiler/page/page.html, page.css,
page.js); the markup's __TITLE__, __CSS__, __DATA__ (the payload JSON) and __JS__ are filled here.
"""
from __future__ import annotations

import html as _html
import json
import re
from functools import lru_cache
from importlib import resources

from . import analysis
from ._format import CLASS_LABELS, CLASSES, class_order, decode_trace, kind_classes, tile_total

MAX_TRACE_ENTRIES = 200_000


def _payload(doc: dict, max_trace: int = MAX_TRACE_ENTRIES) -> dict:
    s = analysis.summary(doc)
    mem = doc["memory"]
    ids, starts = decode_trace(doc)
    n = int(ids.size)
    keep = min(n, max_trace)
    live = doc.get("liveness") or {}
    ex = doc.get("execution") or {}
    steps = [[r["id"], r["kind"], r["name"], r.get("op") or "", int(r["cycles"]), r.get("tile_cycles"),
              int(r.get("executions", 0)), int(r.get("executed_cycles", 0)), r.get("op_type") or ""]
             for r in doc["steps"]]
    tot = tile_total(doc)
    return {
        "kindClass": kind_classes(doc),
        "classes": class_order([*CLASSES, *kind_classes(doc).values()]),
        "classLabels": CLASS_LABELS,
        "file": doc.get("_file") or "",
        "target": doc["target"],
        "summary": s,
        "info": {k: v for k, v in (doc.get("info") or {}).items() if isinstance(v, (str, int, float, type(None)))},
        "categories": mem["categories"],
        "mem": mem["tiles"],
        "total": mem["tile_total"],
        "alwaysLive": mem["always_live"]["tile"],
        "busy": ex.get("tile_busy_cycles") or {},
        "liveness": {"values": live.get("not_always_live", []), "steps": live.get("step_of_position"),
                     "peak": live.get("peak", {}), "always": mem["always_live"]["total"]},
        "code": _code_payload(doc),
        "steps": steps,
        "tcTable": doc["tile_cycles_table"],
        "trace": {"ids": ids[:keep].tolist(), "starts": starts[:keep].tolist(), "length": n,
                  "truncated": bool(keep < n or ex.get("trace_truncated"))},
        "ops": {"op": analysis.ops(doc)[:40], "type": analysis.grouped(doc, "type")[:40],
                "scope": analysis.grouped(doc, "scope")[:40]},
        "hist": analysis.histogram(tot, int(doc["target"]["bytes_per_tile"]), 16),
        "worst": analysis.worst_tiles(doc, 10),
    }


def _code_payload(doc: dict) -> dict | None:
    """The document's `code` section for the page (per-function tile arrays left out), plus the
    figures of analysis.code_memory."""
    c = doc.get("code")
    if not c:
        return None
    out = {k: v for k, v in c.items() if k != "functions"}
    out["functions"] = [{k: v for k, v in f.items() if k != "tile_bytes"} for f in c.get("functions", [])]
    out["summary"] = analysis.code_memory(doc)
    return out


@lru_cache(maxsize=None)
def page_file(name: str) -> str:
    """One of the page's files (page.html, page.css, page.js), read from the package."""
    return resources.files(__package__).joinpath("page", name).read_text(encoding="utf-8")


def render_html(doc: dict, title: str | None = None) -> str:
    data = json.dumps(_payload(doc), separators=(",", ":")).replace("<", "\\u003c").replace("\u2028", "\\u2028")
    title = title or f"IPU profile · {doc['target']['name']}"
    parts = {"TITLE": _html.escape(title), "DATA": data, "CSS": page_file("page.css"), "JS": page_file("page.js")}
    # one pass, so nothing a part holds (a tensor name in the data) is taken for a placeholder
    return re.sub(r"__(TITLE|DATA|CSS|JS)__", lambda m: parts[m.group(1)], page_file("page.html"))


def write_html(doc: dict, path: str, title: str | None = None) -> str:
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(render_html(doc, title))
    return path
