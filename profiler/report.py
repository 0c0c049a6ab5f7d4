"""The terminal report of a profile (rich), and the comparison of two profiles."""
from __future__ import annotations

import os

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from . import analysis
from ._format import tile_total

CLASS_STYLE = {"compute": "green", "exchange": "magenta", "sync": "yellow", "host": "cyan",
               "remote": "blue", "code_load": "red", "control": "white"}


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
    for cl, c in sorted(s["cycles"]["by_class"].items(), key=lambda x: -x[1]):
        et.add_row(f"  {cl}", f"{c:,}", f"{100 * c / summed:.1f}", _bar(c / summed, style=CLASS_STYLE.get(cl, "white")))
    con.print(et)
    w = s["wall"]
    cps = w.get("simulated_cycles_per_second")
    con.print(Text(f"  wall: compile {fmt_seconds(w.get('compile_seconds'))} · run {fmt_seconds(w.get('run_seconds'))}"
                   + (f" · {cps / 1e6:,.2f} M simulated cycles per second" if cps else ""), style="dim"))
    if ex.get("trace_truncated"):
        con.print(Text("  the execution trace in this profile is truncated (see autoReport.executionProfileProgramRunCount)",
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
        f"  max tile {m['max_tile']['tile']}: {fmt_bytes(m['max_tile']['bytes'])} ({100 * m['max_tile']['bytes'] / cap:.1f}% "
        f"of {fmt_bytes(cap)}) · mean {fmt_bytes(m['mean_tile'])} · {m['tiles_with_data']:,} tiles hold data",
        f"  always live {fmt_bytes(m['always_live'])} · not-always-live peak {fmt_bytes(m['not_always_live_peak'])}"
        + (f" at {m['not_always_live_peak_step']!r}" if m.get("not_always_live_peak_step") else ""),
    ]
    if m["tiles_over_capacity"]:
        lines.append(f"  [bold red]{m['tiles_over_capacity']} tiles are over capacity[/]")
    for ln in lines:
        con.print(ln, style=None, highlight=False)

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
            st.add_row(str(r["id"]), r["name"], Text(r["kind"], style=CLASS_STYLE.get(
                       analysis.KIND_CLASS.get(r["kind"], ""), "")), r.get("op") or "", f"{r['executions']:,}",
                       f"{c:,}", f"{100 * c / summed:.1f}", f"{r.get('active_tiles', t['num_tiles']):,}")
        con.print()
        con.print(st)

        ot = Table(title="Costliest ops", title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        ot.add_column("op", overflow="fold", max_width=40)
        ot.add_column("type")
        ot.add_column("cycles", justify="right")
        ot.add_column("%", justify="right")
        for cl in ("compute", "exchange", "sync", "host"):
            ot.add_column(cl, justify="right", style=CLASS_STYLE[cl])
        for r in analysis.ops(doc)[:top]:
            ot.add_row(r["op"], r["type"], f"{r['cycles']:,}", f"{100 * r['cycles'] / summed:.1f}",
                       *[f"{r['by_class'].get(cl, 0):,}" for cl in ("compute", "exchange", "sync", "host")])
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
        is_bytes = k.startswith("memory") or k in ("max_tile_bytes", "always_live", "not_always_live_peak")
        is_s = k.startswith("wall.")
        f = fmt_bytes if is_bytes else (fmt_seconds if is_s else (lambda v: "-" if v is None else f"{v:,}"))
        d = r["delta"]
        style = "" if not d else ("red" if d > 0 else "green")
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
