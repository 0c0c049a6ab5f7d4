"""ipu-profile: run a script with profiling on, report a profile, compare two.

    ipu-profile run [--dir DIR] [--html F] [--trace F] [--json] script.py [script args ...]
    ipu-profile report DIR_OR_FILE [--html F] [--trace F] [--trace-tiles SPEC] [--json] [--top N]
    ipu-profile compare A B [--json]
    ipu-profile DIR_OR_FILE            (short for report)

Also `python -m profiler ...`.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager

from ._format import ProfileError, find_profiles, load

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMANDS = ("run", "report", "compare")


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="ipu-profile", description="Profiles of the simulated IPU: cycles, memory "
                                "per tile, liveness and execution traces.")
    sub = p.add_subparsers(dest="command", metavar="{run,report,compare}")

    def outputs(q):
        q.add_argument("--html", metavar="OUT.html", help="write one self-contained HTML page with pictures")
        q.add_argument("--trace", metavar="OUT.json", help="write a Chrome / Perfetto trace-event file")
        q.add_argument("--trace-tiles", metavar="SPEC", default=None,
                       help="tile lanes in the trace: '0-3,17', 'busiest:N' (default busiest:4) or 'none'")
        q.add_argument("--json", action="store_true", help="print the totals as JSON (nothing else on stdout)")
        q.add_argument("--top", type=int, default=12, help="rows in the costliest steps / ops tables")

    r = sub.add_parser("run", help="run a Python script with profiling on, then report")
    r.add_argument("--dir", help="where the profile goes (default: a new temporary directory)")
    outputs(r)
    r.add_argument("script", help="the Python script to run")
    r.add_argument("args", nargs=argparse.REMAINDER, help="arguments of the script")

    q = sub.add_parser("report", help="report a profile (a profile.json or a directory of them)")
    q.add_argument("path")
    outputs(q)

    c = sub.add_parser("compare", help="what changed between two profiles")
    c.add_argument("a")
    c.add_argument("b")
    c.add_argument("--json", action="store_true", help="print the comparison as JSON")
    c.add_argument("--top", type=int, default=15)
    return p


@contextmanager
def _progress(console, enabled: bool = True):
    """A rich progress bar on stderr for long work; `step(description, fraction)` updates it."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    if not enabled or not console.is_terminal:
        yield lambda *a, **k: None
        return
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), TextColumn("{task.percentage:>3.0f}%"),
                  TimeElapsedColumn(), console=console, transient=True) as prog:
        task = prog.add_task("loading", total=1.0)

        def step(desc: str, frac: float | None = None):
            if frac is None:
                prog.update(task, description=desc)
            else:
                prog.update(task, description=desc, completed=frac)

        yield step


def _outputs(docs: list[dict], args, console, err) -> None:
    from . import analysis

    doc = docs[0]
    big = ((doc.get("execution") or {}).get("trace") or {}).get("length", 0) > 50_000 or len(doc["steps"]) > 5_000
    if args.html or args.trace:
        with _progress(err, enabled=True) as step:
            if args.html:
                from .html import write_html

                step("writing HTML page", 0.1)
                write_html(doc, args.html)
                err.print(f"[green]HTML page[/] {args.html}")
            if args.trace:
                from .trace import parse_tiles, write_trace

                step("writing trace", 0.5)
                tiles = parse_tiles(args.trace_tiles, doc)

                def prog(k, n):
                    step("writing trace", 0.5 + 0.5 * k / max(n, 1))

                tr = write_trace(doc, args.trace, tiles, progress=prog if big else None)
                err.print(f"[green]trace[/] {args.trace} ({len(tr['traceEvents']):,} events; open it in "
                          f"https://ui.perfetto.dev or chrome://tracing)")
        _say_which(docs, " and ".join(w for w, on in (("the page", args.html), ("the trace", args.trace)) if on)
                   + (" show" if args.html and args.trace else " shows"), err)
    from .instances import instance_docs, instances_summary, render_instances

    if args.json:
        sums = [analysis.summary(d) for d in docs]
        out = sums[0] if len(sums) == 1 else sums
        if instance_docs(docs):  # a PopDist run: the instances side by side too
            out = {"instances": instances_summary(docs), "profiles": sums}
        print(json.dumps(out, indent=2))
    else:
        from .report import render

        inst = instance_docs(docs)
        shown = [d for d in docs if d not in inst] + inst[:1]  # one instance in full, all side by side
        for d in shown:
            render(d, console, top=args.top)
        if render_instances(docs, console) and len(inst) > 1:
            console.print(f"[dim]instances 1.. in full: ipu-profile report {inst[1].get('_file')} (and so on)[/]")
        elif len(docs) > 1:
            console.print(f"[dim]{len(docs)} profiles (one per session)[/]")


def _say_which(docs: list[dict], what: str, err) -> None:
    """With several profiles in a directory (one per session), name the one used and the others."""
    if len(docs) > 1:
        others = ", ".join(os.path.basename(d.get("_file", "?")) for d in docs[1:])
        err.print(f"[yellow]{len(docs)} profiles (one per session): {what} {docs[0].get('_file')}; "
                  f"name another file ({others}) to use it[/]")


def _load_all(path, err) -> list[dict]:
    files = find_profiles(path)
    docs = []
    with _progress(err, enabled=True) as step:
        for i, f in enumerate(files):
            step(f"reading {os.path.basename(f)}", i / len(files))
            docs.append(load(f))
    return docs


def cmd_report(args, console, err) -> int:
    docs = _load_all(args.path, err)
    _outputs(docs, args, console, err)
    return 0


def cmd_compare(args, console, err) -> int:
    from . import analysis

    a, b = load(args.a), load(args.b)
    for path in (args.a, args.b):
        if os.path.isdir(path) and len(find_profiles(path)) > 1:
            _say_which([{"_file": f} for f in find_profiles(path)], "compare reads", err)
    cmp = analysis.compare(a, b)
    if args.json:
        print(json.dumps(cmp, indent=2))
    else:
        from .report import render_compare

        render_compare(cmp, console, top=args.top)
    return 0


def cmd_run(args, console, err) -> int:
    if not os.path.exists(args.script):
        err.print(f"[red]no such script: {args.script}[/]")
        return 2
    out_dir = args.dir or tempfile.mkdtemp(prefix="ipu-profile-")
    out_dir = os.path.abspath(out_dir)
    os.makedirs(out_dir, exist_ok=True)
    env = dict(os.environ)
    env["IPU_SIM_PROFILE"] = out_dir
    env["PYTHONPATH"] = _ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    for f in os.listdir(out_dir):  # a stale profile must not pass for this run's
        if f.startswith("profile") and f.endswith(".json"):
            os.remove(os.path.join(out_dir, f))
    args_ = list(args.args)
    if args_ and args_[0] == "--":
        args_ = args_[1:]
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, args.script, *args_], env=env,
                          stdout=sys.stderr if args.json else None)
    wall = time.perf_counter() - t0
    try:
        files = find_profiles(out_dir)
    except ProfileError:
        err.print(f"[red]the script wrote no profile[/] (exit code {proc.returncode}); did it run a popxl.Session?")
        return proc.returncode or 1
    if proc.returncode:
        err.print(f"[yellow]the script exited with code {proc.returncode}; reporting what it profiled[/]")
    docs = _load_all(out_dir, err)
    if not args.json:
        console.rule(f"ipu-profile · {os.path.basename(args.script)} · {wall:.2f} s wall")
    _outputs(docs, args, console, err)
    err.print(f"[dim]profile: {', '.join(files)}[/]")
    return proc.returncode


def main(argv=None) -> int:
    from .report import make_console

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv and argv[0] not in COMMANDS and not argv[0].startswith("-") and os.path.exists(argv[0]):
        argv = ["report", *argv]
    args = _parser().parse_args(argv)
    if not args.command:
        _parser().print_help()
        return 2
    console = make_console()
    err = make_console(stderr=True)
    try:
        return {"run": cmd_run, "report": cmd_report, "compare": cmd_compare}[args.command](args, console, err)
    except ProfileError as e:
        err.print(f"[red]ipu-profile: {e}[/]")
        return 2
    except BrokenPipeError:  # pragma: no cover - e.g. piped into head
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
