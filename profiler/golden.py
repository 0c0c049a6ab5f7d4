"""Cycle regression: the examples' total cycles and memory, kept in tests/golden/examples.json.

    python -m profiler.golden            check: run the examples, report any drift (exit 1)
    python -m profiler.golden --update   rewrite the golden file on purpose (then commit it)

Each example runs in its own process with profiling on, on a fixed target (GC200, whatever
IPU_SIM_TARGET says), and the numbers come from its profile document. tests/profiler/test_golden.py
runs the check under pytest.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

from ._format import load

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOLDEN = os.path.join(ROOT, "tests", "golden", "examples.json")
EXAMPLES = ("simple_addition", "tensor_addition", "subgraph_call", "repeat_loop", "mlp_inference")
TARGET = "GC200"


def numbers(doc: dict) -> dict:
    """The figures a golden file keeps for one profile."""
    ex = doc.get("execution") or {}
    mem = doc["memory"]
    return {
        "total_cycles": int(ex.get("total_cycles", 0)),
        "cycles_by_kind": {k: int(v) for k, v in sorted((ex.get("cycles_by_kind") or {}).items())},
        "steps": len(doc["steps"]),
        "steps_executed": int(ex.get("steps_executed", 0)),
        "memory_total": int(mem["total"]),
        "memory_by_category": {k: int(v) for k, v in mem["totals"].items()},
        "max_tile_bytes": int(mem["max_tile"]["bytes"]),
        "not_always_live_peak": int((doc.get("liveness") or {}).get("peak", {}).get("bytes", 0)),
    }


def run_example(name: str, workdir: str) -> dict:
    script = os.path.join(ROOT, "examples", f"{name}.py")
    out = os.path.join(workdir, name)
    env = dict(os.environ)
    env.pop("POPLAR_ENGINE_OPTIONS", None)
    env["IPU_SIM_PROFILE"] = out
    env["IPU_SIM_TARGET"] = TARGET
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    p = subprocess.run([sys.executable, script], env=env, cwd=workdir, capture_output=True, text=True)
    if p.returncode:
        raise RuntimeError(f"example {name} failed (exit {p.returncode}):\n{p.stderr[-3000:]}")
    return numbers(load(out))


def collect(examples=EXAMPLES, jobs: int | None = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="ipu-golden-") as d:
        with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 2)) as pool:
            results = list(pool.map(lambda n: run_example(n, d), examples))
    return dict(zip(examples, results))


def read_golden(path: str = GOLDEN) -> dict:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    return data["examples"]


def _source_of(entry: dict, figure: str) -> str:
    """Where an example's expected figure came from: its own entry in `sources`, else the
    example's default (`*`)."""
    src = (entry or {}).get("sources") or {}
    top = figure.split(".")[0]
    return src.get(figure) or src.get(top) or src.get("*") or "unknown (no source recorded)"


def write_golden(results: dict, path: str = GOLDEN, before: dict | None = None) -> None:
    """Write the golden file; every example carries `sources` (figure -> where its value came from,
    `*` for the rest). Figures recorded now come from this simulator; an example whose numbers did
    not change keeps the sources it had."""
    from .testing import simulator_source

    os.makedirs(os.path.dirname(path), exist_ok=True)
    before = before or {}
    examples = {}
    for name, nums in results.items():
        nums = {k: v for k, v in nums.items() if k != "sources"}
        old = before.get(name) or {}
        same = {k: v for k, v in old.items() if k != "sources"} == nums
        sources = old.get("sources") if same and old.get("sources") else {
            "*": f"{simulator_source()}, recorded by python -m profiler.golden --update"}
        examples[name] = {**nums, "sources": sources}
    data = {
        "about": "Total cycles and memory of examples/*.py on a simulated GC200, each figure with where its value "
                 "came from (`sources`). Update on purpose with `python -m profiler.golden --update` and commit the "
                 "change with the change that caused it.",
        "target": TARGET,
        "examples": examples,
    }
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh, indent=2, sort_keys=False)
        fh.write("\n")


def drift(golden: dict, current: dict) -> list[str]:
    """Human-readable differences, empty when nothing drifted; each names where the expected value
    came from."""
    out = []

    def walk(example, prefix, a, b):
        if isinstance(a, dict) and isinstance(b, dict):
            for k in sorted((set(a) | set(b)) - {"sources"}):
                walk(example, f"{prefix}.{k}" if prefix else k, a.get(k), b.get(k))
        elif a != b:
            figure = prefix.split(".", 1)[1] if "." in prefix else prefix
            src = f"  [expected value from: {_source_of(golden.get(example) or {}, figure)}]"
            if isinstance(a, int) and isinstance(b, int) and a:
                out.append(f"{prefix}: {a:,} -> {b:,} ({100 * (b - a) / a:+.2f}%){src}")
            else:
                out.append(f"{prefix}: {a!r} -> {b!r}{src}")

    for name in sorted(set(golden) | set(current)):
        walk(name, name, golden.get(name), current.get(name))
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m profiler.golden", description=__doc__.splitlines()[0])
    p.add_argument("--update", action="store_true", help="rewrite tests/golden/examples.json")
    p.add_argument("examples", nargs="*", help=f"examples to run (default: {', '.join(EXAMPLES)})")
    args = p.parse_args(argv)
    names = tuple(args.examples) or EXAMPLES
    current = collect(names)
    if args.update:
        merged = {}
        if os.path.exists(GOLDEN) and args.examples:
            merged = read_golden()
        merged.update(current)
        before = read_golden() if os.path.exists(GOLDEN) else {}
        write_golden(merged, before=before)
        changes = drift(before, merged)
        print(f"wrote {os.path.relpath(GOLDEN)}"
              + (":\n  " + "\n  ".join(changes) if changes else " (no figure changed)"))
        return 0
    golden = read_golden()
    changes = drift({k: golden.get(k) for k in names}, current)
    if changes:
        print("cycle / memory drift against tests/golden/examples.json:\n  " + "\n  ".join(changes))
        print("If the change is intended: python -m profiler.golden --update")
        return 1
    print(f"no drift in {len(names)} examples")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
