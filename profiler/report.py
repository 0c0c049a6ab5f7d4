"""The terminal report of a profile (rich), and the comparison of two profiles."""
from __future__ import annotations

import os

import numpy as np
from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from . import analysis
from ._format import CLASS_LABELS, class_order, kind_classes, step_class, tile_total, unrle

CLASS_STYLE = {"compute": "green", "exchange": "magenta", "sync": "yellow", "host": "cyan",
               "streaming": "blue", "control": "white"}
KIND_LABELS = {"remote_load": "remote loads", "remote_store": "remote stores", "code_load": "code loads"}
SPARK = "▁▂▃▄▅▆▇█"
HIGHER_IS_BETTER = ("code.saved",)  # compare rows where growth is an improvement


def fmt_bytes(n) -> str:
    if n is None:
        return "-"
    n = float(n)
    sign = "-" if n < 0 else ""
    n = abs(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{sign}{n:,.0f} {unit}" if unit == "B" else f"{sign}{n:,.2f} {unit}"
        n /= 1024
    return f"{sign}{n:.2f} GiB"  # pragma: no cover


def fmt_seconds(s) -> str:
    if s is None:
        return "-"
    if s < 0:
        return "-" + fmt_seconds(-s)
    if s < 1e-6:
        return f"{s * 1e9:.1f} ns"
    if s < 1e-3:
        return f"{s * 1e6:.2f} µs"
    if s < 1:
        return f"{s * 1e3:.2f} ms"
    return f"{s:.3f} s"


def _bar(frac: float, width: int = 24, style: str = "green") -> Text:
    frac = max(0.0, min(1.0, frac))
    full = frac * width
    n = int(full)
    part = " ▏▎▍▌▋▊▉"[int((full - n) * 8)] if n < width else ""
    return Text("█" * n + part.strip(), style=style)


def make_console(**kw) -> Console:
    c = Console(**kw)
    if not c.is_terminal and "width" not in kw:
        c = Console(width=int(os.environ.get("COLUMNS", 120)), **kw)
    return c


def render(doc: dict, console: Console | None = None, top: int = 12) -> None:
    """Print the report of one profile document."""
    con = console or make_console()
    s = analysis.summary(doc)
    t = doc["target"]
    info = doc.get("info") or {}
    ex = doc.get("execution") or {}

    head = Text()
    head.append(f"{t['name']}", style="bold")
    head.append(f" · {t.get('ipus', 1)} IPU · {t['num_tiles']:,} tiles · {fmt_bytes(t['bytes_per_tile'])} per tile "
                f"({fmt_bytes(t['num_tiles'] * t['bytes_per_tile'])}) · {t['clock_hz'] / 1e9:.2f} GHz")
    if ex.get("replicas", 1) > 1:
        head.append(f" · {ex['replicas']} replicas")
    sub = []
    if info.get("script"):
        sub.append(os.path.basename(info["script"]))
    sub.append(f"{len(doc['steps'])} program steps")
    sub.append(f"{s['cycles']['runs']} run(s)")
    sub.append(f"{s['cycles']['steps_executed']:,} steps executed")
    title = f"IPU profile · {doc.get('_file') or ''}"
    con.print(Panel(Group(head, Text(" · ".join(sub), style="dim")), title=title, title_align="left",
                    box=box.ROUNDED))

    # -- execution
    total = s["cycles"]["total"]
    et = Table(title="Execution", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    et.add_column("", style="bold")
    et.add_column("cycles", justify="right")
    et.add_column("%", justify="right")
    et.add_column("", no_wrap=True)
    et.add_row("total", f"{total:,}", "100.0", Text(f"{fmt_seconds(s['cycles']['seconds_at_clock'])} at "
                                                    f"{t['clock_hz'] / 1e9:.2f} GHz", style="bold"))
    summed = sum(s["cycles"]["by_class"].values()) or 1
    by_kind = s["cycles"]["by_kind"]
    class_of = kind_classes(doc)  # the labelled kinds first, in their order
    streaming_kinds = [k for k in dict.fromkeys([*KIND_LABELS, *class_of]) if class_of.get(k) == "streaming"]
    for cl, c in sorted(s["cycles"]["by_class"].items(), key=lambda x: -x[1]):
        et.add_row(f"  {CLASS_LABELS.get(cl, cl)}", f"{c:,}", f"{100 * c / summed:.1f}",
                   _bar(c / summed, style=CLASS_STYLE.get(cl, "white")))
        if cl == "streaming":  # what streaming memory time went to
            for k in streaming_kinds:
                if k in by_kind:
                    v = int(by_kind[k])
                    et.add_row(Text(f"    {KIND_LABELS.get(k, k)}", style="dim"), Text(f"{v:,}", style="dim"),
                               Text(f"{100 * v / summed:.1f}", style="dim"), _bar(v / summed, style="dim blue"))
    con.print(et)
    w = s["wall"]
    cps = w.get("simulated_cycles_per_second")
    con.print(Text(f"  wall: compile {fmt_seconds(w.get('compile_seconds'))} · run {fmt_seconds(w.get('run_seconds'))}"
                   + (f" · {cps / 1e6:,.2f} M simulated cycles per second" if cps else ""), style="dim"))
    if ex.get("trace_truncated"):
        con.print(Text("  the execution trace in this profile is truncated "
                       "(see autoReport.executionProfileProgramRunCount)",
                       style="yellow"))

    # -- memory
    m = s["memory"]
    con.print()
    mt = Table(title="Memory", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    mt.add_column("category", style="bold")
    mt.add_column("total", justify="right")
    mt.add_column("% used", justify="right")
    mt.add_column("max tile", justify="right")
    mt.add_column("", no_wrap=True)
    from ._format import memory_by_category
    cats = memory_by_category(doc)
    used = m["total"] or 1
    for c, v in m["by_category"].items():
        mt.add_row(c, fmt_bytes(v), f"{100 * v / used:.1f}", fmt_bytes(int(cats[c].max(initial=0))),
                   _bar(v / used, style="blue"))
    mt.add_row(Text("used", style="bold"), Text(fmt_bytes(m["total"]), style="bold"), "100.0",
               fmt_bytes(m["max_tile"]["bytes"]), "")
    con.print(mt)
    cap = t["bytes_per_tile"]
    lines = [
        f"  used {fmt_bytes(m['total'])} of {fmt_bytes(m['capacity'])} ({100 * m['used_fraction']:.2f}%), "
        f"free {fmt_bytes(m['free'])}",
        f"  max tile {m['max_tile']['tile']}: {fmt_bytes(m['max_tile']['bytes'])} "
        f"({100 * m['max_tile']['bytes'] / cap:.1f}% "
        f"of {fmt_bytes(cap)}) · mean {fmt_bytes(m['mean_tile'])} · {m['tiles_with_data']:,} tiles hold data",
        f"  always live {fmt_bytes(m['always_live'])} · not-always-live peak {fmt_bytes(m['not_always_live_peak'])}"
        + (f" at {m['not_always_live_peak_step']!r}" if m.get("not_always_live_peak_step") else ""),
    ]
    if m["tiles_over_capacity"]:
        lines.append(f"  [bold red]{m['tiles_over_capacity']} tiles are over capacity[/]")
    for ln in lines:
        con.print(ln, style=None, highlight=False)
    if doc.get("code"):
        render_code(doc, con, total_cycles=summed)

    wt = Table(title="Worst tiles", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    wt.add_column("tile", justify="right")
    wt.add_column("total", justify="right")
    wt.add_column("% of tile", justify="right")
    wt.add_column("largest categories")
    wt.add_column("largest tensors")
    for r in analysis.worst_tiles(doc, 6):
        catl = sorted(r["categories"].items(), key=lambda x: -x[1])[:3]
        wt.add_row(str(r["tile"]), fmt_bytes(r["total"]), f"{100 * r['total'] / cap:.1f}",
                   ", ".join(f"{c} {fmt_bytes(b)}" for c, b in catl),
                   ", ".join(f"{n} {fmt_bytes(b)}" for n, b in r.get("largest", [])[:2]))
    con.print()
    con.print(wt)
    _render_dtypes(doc, con)

    tot = tile_total(doc)
    hist = analysis.histogram(tot, cap)
    ht = Table(title="Memory over tiles (tiles per bytes bucket)", title_justify="left", box=box.SIMPLE_HEAD,
               show_edge=False)
    ht.add_column("bytes per tile", justify="right")
    ht.add_column("tiles", justify="right")
    ht.add_column("", no_wrap=True)
    most = max((h[2] for h in hist), default=1) or 1
    for lo, hi, n in hist:
        ht.add_row(f"{fmt_bytes(lo)} – {fmt_bytes(hi)}", f"{n:,}", _bar(n / most, 40, "blue"))
    con.print()
    con.print(ht)

    # -- steps and ops
    if total:
        st = Table(title="Costliest steps", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        st.add_column("step", justify="right")
        st.add_column("name", overflow="fold", max_width=48)
        st.add_column("kind")
        st.add_column("op", overflow="fold", max_width=28)
        st.add_column("runs", justify="right")
        st.add_column("cycles", justify="right")
        st.add_column("%", justify="right")
        st.add_column("tiles", justify="right")
        for r in analysis.costliest_steps(doc, top):
            c = int(r["executed_cycles"])
            st.add_row(str(r["id"]), r["name"], Text(r["kind"], style=CLASS_STYLE.get(step_class(r), "")),
                       r.get("op") or "", f"{r['executions']:,}", f"{c:,}", f"{100 * c / summed:.1f}",
                       f"{r.get('active_tiles', t['num_tiles']):,}")
        con.print()
        con.print(st)

        ot = Table(title="Costliest ops", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        ot.add_column("op", overflow="fold", max_width=40)
        ot.add_column("type")
        ot.add_column("cycles", justify="right")
        ot.add_column("%", justify="right")
        op_rows = analysis.ops(doc)
        classes = ["compute", "exchange", "sync", "host"]
        if any(r["by_class"].get("streaming") for r in op_rows):
            classes.append("streaming")
        own = class_order([cl for r in op_rows for cl, c in r["by_class"].items() if c])  # program kinds of one's own
        classes += [cl for cl in own if cl not in classes and cl != "control"]
        for cl in classes:
            ot.add_column(cl, justify="right", style=CLASS_STYLE.get(cl, "white"))
        for r in op_rows[:top]:
            ot.add_row(r["op"], r["type"], f"{r['cycles']:,}", f"{100 * r['cycles'] / summed:.1f}",
                       *[f"{r['by_class'].get(cl, 0):,}" for cl in classes])
        con.print()
        con.print(ot)

        types = analysis.grouped(doc, "type")
        if len(types) < len(analysis.ops(doc)):
            tt = Table(title="Cycles by op type", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
            tt.add_column("op type")
            tt.add_column("ops", justify="right")
            tt.add_column("cycles", justify="right")
            tt.add_column("%", justify="right")
            tt.add_column("", no_wrap=True)
            for r in types[:top]:
                tt.add_row(r["op"], f"{r['ops']:,}", f"{r['cycles']:,}", f"{100 * r['cycles'] / summed:.1f}",
                           _bar(r["cycles"] / summed, 24, "green"))
            con.print()
            con.print(tt)


def _pct(part, whole) -> str:
    return f"{100 * part / whole:.1f}%" if whole else "-"


def sparkline(values, width: int = 60) -> str:
    """Values over program positions as one line of block characters (the most in each bucket)."""
    v = np.asarray(values, np.int64)
    if v.size == 0:
        return ""
    edges = np.linspace(0, v.size, min(width, v.size) + 1).astype(np.int64)
    top = np.maximum.reduceat(v, edges[:-1])
    hi = max(int(v.max()), 1)
    return "".join(" " if x <= 0 else SPARK[min(len(SPARK) - 1, int(x * len(SPARK) / (hi + 1)))] for x in top)


def render_code(doc: dict, con: Console, total_cycles: int | None = None) -> None:
    """The "Code memory" section: vertex code always live vs loaded from streaming memory, per tile,
    the saving against keeping all code resident, and the code-load steps."""
    c = doc["code"]
    tot, b = c["totals"], c["busiest_tile"]
    pk = c["peak_tile"]
    resident, loaded = unrle(c["resident"]), unrle(c["loaded_peak"])
    everything = unrle(c["all_resident"])
    con.print()
    ct = Table(title="Code memory (vertex code resident vs loaded from streaming memory)", title_justify="left",
               box=box.SIMPLE_HEAD, show_edge=False)
    ct.add_column("", style="bold")
    ct.add_column("all tiles", justify="right")
    ct.add_column(f"busiest tile ({b['tile']})", justify="right")
    ct.add_column("max tile", justify="right")
    ct.add_column("", no_wrap=True)
    top = max(int(b["all_resident"]), int(b["with_loading"]), 1)
    rows = [("always live (resident)", tot["resident"], b["resident"], int(resident.max(initial=0)), "blue"),
            ("loaded (peak live)", tot["loaded_peak"], b["loaded_peak"], int(loaded.max(initial=0)), "red"),
            ("with code loading", tot["with_loading"], b["with_loading"], pk["with_loading"]["bytes"], "magenta"),
            ("all code resident", tot["all_resident"], b["all_resident"], pk["all_resident"]["bytes"], "white")]
    for label, t_, bt, mx, style in rows:
        ct.add_row(label, fmt_bytes(t_), fmt_bytes(bt), fmt_bytes(mx), _bar(bt / top, 24, style))
    ct.add_row(Text("saved", style="bold green"),
               Text(f"{fmt_bytes(tot['saved'])} ({_pct(tot['saved'], tot['all_resident'])})", style="green"),
               Text(f"{fmt_bytes(b['saved'])} ({_pct(b['saved'], b['all_resident'])})", style="green"),
               Text(fmt_bytes(pk["saved"]), style="green"), "")
    con.print(ct)
    saved = pk["saved"]
    verdict = (f"[green]{fmt_bytes(saved)} less ({_pct(saved, pk['all_resident']['bytes'])})[/]" if saved > 0 else
               f"[yellow]{fmt_bytes(-saved)} more[/]" if saved < 0 else "[yellow]no lower[/]")
    con.print(f"  peak code on the busiest tile: {fmt_bytes(pk['all_resident']['bytes'])} all resident "
              f"(tile {pk['all_resident']['tile']}) -> {fmt_bytes(pk['with_loading']['bytes'])} with loading "
              f"(tile {pk['with_loading']['tile']}): {verdict}", highlight=False)
    fewer = int(np.count_nonzero(everything > resident + loaded))
    con.print(f"  less code than all-resident on {fewer:,} of {everything.size:,} tiles · loaded code is not "
              f"always live (the liveness counts it)", style="dim", highlight=False)
    live, live_b = c.get("live") or [], c.get("live_busiest") or []
    if live:
        lp = c.get("live_peak") or {}
        con.print(Text(f"  loaded code live over the program positions 0–{len(live) - 1} (the most in each column):",
                       style="dim"))
        con.print(Text("  all tiles    ", style="dim") + Text(sparkline(live), style="red")
                  + Text(f"  peak {fmt_bytes(lp.get('bytes', max(live)))}"
                         + (f" at position {lp['position']}" if "position" in lp else ""), style="dim"))
        if live_b:
            con.print(Text(f"  tile {b['tile']:<7,}", style="dim") + Text(sparkline(live_b), style="red")
                      + Text(f"  peak {fmt_bytes(max(live_b))}", style="dim"))
    if not c.get("exact", True):
        con.print("  [yellow]code liveness positions could not be matched: loaded code counted live everywhere[/]")

    if c.get("functions"):
        ft = Table(title="Functions whose code is in streaming memory", title_justify="left", box=box.SIMPLE_HEAD,
                   show_edge=False)
        ft.add_column("function", overflow="fold", max_width=40)
        ft.add_column("code", justify="right")
        ft.add_column("max tile", justify="right")
        ft.add_column("tiles", justify="right")
        ft.add_column("live (program positions)", overflow="fold", max_width=48)
        for f in c["functions"]:
            iv = f.get("intervals", [])
            shown = ", ".join(f"{a}–{z}" for a, z in iv[:6]) + (f", … ({len(iv)} in all)" if len(iv) > 6 else "")
            ft.add_row(f["name"], fmt_bytes(f["bytes"]), fmt_bytes(f["max_tile"]), f"{f['tiles']:,}", shown or "never")
        con.print()
        con.print(ft)

    loads = c.get("load_steps", [])
    if loads:
        lt = Table(title="Code loads", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        lt.add_column("step", justify="right")
        lt.add_column("name", overflow="fold", max_width=36)
        lt.add_column("bytes", justify="right")
        lt.add_column("max tile", justify="right")
        lt.add_column("cycles", justify="right")
        lt.add_column("sync + transfer", justify="right", style="dim")
        lt.add_column("runs", justify="right")
        lt.add_column("executed cycles", justify="right")
        lt.add_column("%", justify="right")
        for x in loads:
            lt.add_row(str(x["step"]), x["name"], fmt_bytes(x["bytes"]), fmt_bytes(x["max_tile_bytes"]),
                       f"{x['cycles']:,}", f"{x['sync_cycles']:,} + {x['transfer_cycles']:,}", f"{x['executions']:,}",
                       f"{x['executed_cycles']:,}",
                       f"{100 * x['executed_cycles'] / total_cycles:.1f}" if total_cycles else "-")
        lc = c.get("load_cycles") or {}
        ex_c = int(lc.get("executed_cycles", 0))
        lt.add_row(Text("total", style="bold"), "", fmt_bytes(sum(x["bytes"] * x["executions"] for x in loads)), "", "",
                   "", f"{int(lc.get('executions', 0)):,}", Text(f"{ex_c:,}", style="bold"),
                   f"{100 * ex_c / total_cycles:.1f}" if total_cycles else "-")
        con.print()
        con.print(lt)


def render_compare(cmp: dict, console: Console | None = None, top: int = 15) -> None:
    con = console or make_console()
    con.print(Panel(Text(f"a: {cmp['a']}\nb: {cmp['b']}"), title="IPU profile comparison", title_align="left",
                    box=box.ROUNDED))
    if cmp["target"]["a"] != cmp["target"]["b"]:
        con.print(f"[yellow]targets differ: {cmp['target']['a']} vs {cmp['target']['b']}[/]")
    tt = Table(box=box.SIMPLE_HEAD, show_edge=False)
    tt.add_column("")
    tt.add_column("a", justify="right")
    tt.add_column("b", justify="right")
    tt.add_column("change", justify="right")
    tt.add_column("%", justify="right")
    for k, r in cmp["totals"].items():
        is_bytes = (k.startswith("memory") or k in ("max_tile_bytes", "always_live", "not_always_live_peak")
                    or (k.startswith("code.") and k != "code.load_cycles"))
        is_s = k.startswith("wall.")
        f = fmt_bytes if is_bytes else (fmt_seconds if is_s else (lambda v: "-" if v is None else f"{v:,}"))
        d = r["delta"]
        worse = d is not None and (d < 0 if k in HIGHER_IS_BETTER else d > 0)
        style = "" if not d else ("red" if worse else "green")
        if is_s:
            style = "dim"
        ds = "-" if d is None else (("+" if d > 0 else "") + (f(d) if d else "0"))
        rel = "" if r["relative"] is None else f"{100 * r['relative']:+.1f}"
        tt.add_row(k, f(r["a"]), f(r["b"]), Text(ds, style=style), Text(rel, style=style))
    con.print(tt)
    if cmp["ops"]:
        ot = Table(title="Largest changes by op (executed cycles)", title_justify="left", box=box.SIMPLE_HEAD,
                   show_edge=False, min_width=60)
        ot.add_column("op", overflow="fold", max_width=48)
        ot.add_column("a", justify="right")
        ot.add_column("b", justify="right")
        ot.add_column("change", justify="right")
        for r in cmp["ops"][:top]:
            ot.add_row(r["op"], f"{r['a']:,}", f"{r['b']:,}",
                       Text(f"{r['delta']:+,}", style="red" if r["delta"] > 0 else "green"))
        con.print(ot)
    else:
        con.print("[dim]no op changed its executed cycles[/]")


def _render_dtypes(doc, con) -> None:
    """Tensor bytes by element type: total, the most on one tile, the tiles holding some."""
    dts = doc["memory"].get("dtypes")
    if not dts:
        return
    t = Table(title="Tensor memory by element type", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    t.add_column("dtype")
    t.add_column("bytes", justify="right")
    t.add_column("max on a tile", justify="right")
    t.add_column("tiles", justify="right")
    for name, d in dts.items():
        t.add_row(name, fmt_bytes(d["total"]), fmt_bytes(d["max_tile"]), f"{d['tiles_holding']:,}")
    con.print()
    con.print(t)
