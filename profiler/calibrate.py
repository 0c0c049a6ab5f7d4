"""Calibration: the simulator's cost models against poplibs' estimators and hardware measurements.

    python -m profiler.calibrate [TABLE.csv] [--json] [--max-error 0.10]
    python -m profiler.calibrate --hardware [TABLE.csv] [--json] [--max-error 0.10] [--max-median 0.05]

TABLE.csv (default: codelets/reference_cycles.csv, shipped) has the columns

    vertex,dtype,n,params,cycles,source

vertex: the poplibs vertex (e.g. `popops::ScaledAddSupervisor`, `popops::Cast1D`) or `ipu::Exchange`;
dtype: poplibs type names (`float`, `half`, `int`, `unsigned char`, ...; `float->half` for casts);
n: elements of the vertex (bytes for `ipu::Exchange`); params: `key=value;...` (`op=ADD`,
`regionSize=16;numSubElements=3`, `probe=96` for hardware figures that include a measuring probe,
`tolerance=0.05` for a row's own limit); cycles: the reference figure (empty where poplibs has no
estimator: the row documents that and is not scored); source: where the figure comes from.

For every row the command computes our model's cycles through the codelet registry: the codelet
that names the row's poplibs vertex (`Codelet.poplibs_vertices`) builds the vertex from the row
(`Codelet.calibration_vertex`) and prices it with the same `Codelet.cycles` the simulator charges
(this module knows no codelet); `ipu::Exchange` rows use the exchange cost model. It prints a table
and a summary (Pearson r, mean absolute error, share of rows within 5% and 10%). `--json` prints
`{"rows": [...], "summary": {...}}`. With `--max-error E` it exits 1 when a scored row is off by
more than E (or its own tolerance), or when a row with a reference cannot be computed.

`--hardware` scores the other table, codelets/reference_hardware.csv: published measurements of real
IPUs (chip, clock, sizes, what was timed, exact source), each rebuilt as a workload against ipu/ and
codelets/ and simulated whole (launch, exchange, syncs, IPU-Links: profiler/hardware.py). It prints
published, simulated, error and source per row; with --max-error (default 0.10 there) and
--max-median (default 0.05) it exits 1 when a row, or the median, is past its limit.
"""
from __future__ import annotations

import argparse
import csv
import json
import math
import os
import sys
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_TABLE = os.path.join(ROOT, "codelets", "reference_cycles.csv")
COLUMNS = ("vertex", "dtype", "n", "params", "cycles", "source")

# poplibs type names -> ipu element type names
_TYPES = {"float": "float32", "half": "float16", "int": "int32", "unsigned int": "uint32", "short": "int16",
          "unsigned short": "uint16", "char": "int8", "signed char": "int8", "unsigned char": "uint8",
          "bool": "bool"}


class TableError(ValueError):
    """The calibration table is malformed (says which line and what is wrong)."""


@dataclass
class Row:
    vertex: str
    dtype: str
    n: int
    params: dict
    reference: int | None
    source: str
    line: int
    model: int | None = None
    reason: str = ""
    extra: dict = field(default_factory=dict)

    @property
    def probe(self) -> int:
        return int(self.params.get("probe", 0))

    @property
    def tolerance(self) -> float | None:
        t = self.params.get("tolerance")
        return float(t) if t is not None else None

    @property
    def error(self) -> float | None:
        """(model - reference) / reference, the reference less any measuring probe."""
        if self.model is None or self.reference is None:
            return None
        ref = self.reference - self.probe
        return (self.model - ref) / ref if ref else (0.0 if self.model == 0 else math.inf)


# ------------------------------------------------------------------------------------------------
# reading


def parse_params(text: str, line: int = 0) -> dict:
    out = {}
    for part in (text or "").split(";"):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            raise TableError(f"line {line}: params must be key=value;..., got {part!r}")
        k, v = part.split("=", 1)
        out[k.strip()] = v.strip()
    return out


def read_table(path: str) -> list[Row]:
    if not os.path.exists(path):
        raise TableError(f"{path}: no such file (the shipped table is {os.path.relpath(DEFAULT_TABLE)})")
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader((ln for ln in fh if not ln.lstrip().startswith("#")))
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise TableError(f"{path}: missing column(s) {', '.join(missing)}; the header must be {','.join(COLUMNS)}")
        for i, r in enumerate(reader, start=2):
            try:
                n = int(r["n"])
            except (TypeError, ValueError):
                raise TableError(f"{path} line {i}: n must be an integer, got {r['n']!r}") from None
            ref = (r["cycles"] or "").strip()
            try:
                ref_v = int(ref) if ref else None
            except ValueError:
                raise TableError(f"{path} line {i}: cycles must be an integer or empty, got {ref!r}") from None
            rows.append(Row(r["vertex"].strip(), r["dtype"].strip(), n, parse_params(r["params"], i), ref_v,
                            (r["source"] or "").strip(), i))
    return rows


# ------------------------------------------------------------------------------------------------
# our model's cycles for a row


def _etype(name: str):
    import ipu

    if name not in _TYPES:
        raise KeyError(f"unknown poplibs type {name!r}")
    return ipu.element_type(_TYPES[name])


def _row_types(row) -> tuple:
    """The row's element types: `float`, or `float->half` (in, out) for a conversion."""
    return tuple(_etype(x.strip()) for x in row.dtype.split("->"))


def _codelets_by_vertex() -> dict:
    """poplibs vertex name -> the codelet whose cost model follows its estimator (each codelet
    names its vertices and builds them from a row: `Codelet.calibration_vertex`)."""
    import codelets  # noqa: F401  (registers the built-in codelets)
    import ipu

    return {v: c for c in ipu.registered_codelets().values() for v in c.poplibs_vertices}


def _codelet_cycles(codelet, row) -> int:
    import ipu

    vertex = codelet.calibration_vertex(row.vertex, _row_types(row), row.n, row.params)
    return codelet.vertex_cycles(vertex, ipu.GC200)


def _exchange(row):
    import ipu
    from ipu import costs

    one = np.array([0], np.int64)
    cycles, _ = costs.exchange_tile_cycles(one, one + 1, one, np.array([row.n], np.int64), ipu.GC200)
    return int(cycles.max())


def compute(rows: list[Row]) -> list[Row]:
    """Our model's cycles for every row with a reference: through the codelet that names the row's
    poplibs vertex, or the exchange cost model for `ipu::Exchange`."""
    by_vertex = _codelets_by_vertex()
    known = sorted({*by_vertex, "ipu::Exchange"})
    for row in rows:
        if row.reference is None:
            row.reason = "no reference figure (see source)"
            continue
        codelet = by_vertex.get(row.vertex)
        if codelet is None and row.vertex != "ipu::Exchange":
            row.reason = (f"no model adapter for {row.vertex}: no codelet names it in its poplibs_vertices "
                          f"(known: {', '.join(known)})")
            continue
        try:
            row.model = _exchange(row) if codelet is None else _codelet_cycles(codelet, row)
        except (KeyError, TypeError, ValueError) as e:
            row.reason = f"cannot compute: {e}"
    return rows


# ------------------------------------------------------------------------------------------------
# summary and output


def summary(rows: list[Row]) -> dict:
    scored = [r for r in rows if r.error is not None]
    # (a scored row has its reference and model: the filters below only tell the type checker so)
    errs = np.array([abs(e) for r in scored if (e := r.error) is not None], np.float64)
    ref = np.array([r.reference - r.probe for r in scored if r.reference is not None], np.float64)
    mod = np.array([r.model for r in scored], np.float64)
    if len(scored) >= 2 and ref.std() > 0 and mod.std() > 0:
        pearson = float(np.corrcoef(ref, mod)[0, 1])
    else:
        pearson = None
    return {
        "rows": len(rows),
        "scored": len(scored),
        "unscored": sum(1 for r in rows if r.reference is None),
        "uncomputed": sum(1 for r in rows if r.reference is not None and r.model is None),
        "pearson_r": pearson,
        "mean_abs_error": float(errs.mean()) if errs.size else None,
        "mean_abs_error_cycles": float(np.abs(mod - ref).mean()) if errs.size else None,
        "max_abs_error": float(errs.max()) if errs.size else None,
        "within_5pct": float((errs <= 0.05).mean()) if errs.size else None,
        "within_10pct": float((errs <= 0.10).mean()) if errs.size else None,
    }


def _failure_text(r: Row) -> str:
    """Why a row of `failures` failed: no model for it, or its model against its reference."""
    if r.model is None or r.reference is None or r.error is None:  # a failing row with a model is scored
        return r.reason
    return f"model {r.model:,} vs reference {r.reference - r.probe:,} ({100 * r.error:+.1f}%)"


def failures(rows: list[Row], max_error: float) -> list[Row]:
    bad = []
    for r in rows:
        if r.reference is not None and r.model is None:
            bad.append(r)
        elif r.error is not None:
            limit = r.tolerance if r.tolerance is not None else max_error
            if abs(r.error) > limit + 1e-12:
                bad.append(r)
    return bad


def to_json(rows: list[Row]) -> dict:
    out = []
    for r in rows:
        d = {"vertex": r.vertex, "dtype": r.dtype, "n": r.n, "params": r.params, "reference": r.reference,
             "model": r.model, "error": r.error, "source": r.source}
        if r.probe:
            d["probe"] = r.probe
        if r.reason:
            d["reason"] = r.reason
        out.append(d)
    return {"rows": out, "summary": summary(rows)}


def _short_source(s: str) -> str:
    """The source column in the terminal: file and function, without the repository and commit."""
    s = s.replace("graphcore/poplibs ", "")
    if "@" in s:
        head, _, tail = s.partition("@")
        s = head + " " + tail.split(" ", 1)[-1] if " " in tail else head
    return s if len(s) <= 70 else s[:67] + "..."


def _fmt_params(p: dict) -> str:
    return ";".join(f"{k}={v}" for k, v in p.items())


def print_table(rows: list[Row], max_error: float | None, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    tab = Table(title="cost models against poplibs' estimators and hardware", show_lines=False)
    cols: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("vertex", "left"), ("dtype", "left"), ("n", "right"), ("params", "left"),
        ("reference", "right"), ("model", "right"), ("error", "right"), ("source", "left"))
    for c, j in cols:
        tab.add_column(c, justify=j, overflow="fold")
    limit = max_error if max_error is not None else 0.10
    for r in rows:
        if r.error is None:
            err = "[dim]-[/dim]"
        else:
            lim = r.tolerance if r.tolerance is not None else limit
            colour = "green" if abs(r.error) <= min(0.05, lim) else ("yellow" if abs(r.error) <= lim else "red")
            err = f"[{colour}]{100 * r.error:+.1f}%[/{colour}]"
        ref = "-" if r.reference is None else (f"{r.reference:,}" + (f" (-{r.probe})" if r.probe else ""))
        model = (f"{r.model:,}" if r.model is not None
                 else "[dim]-[/dim]" if r.reference is None else f"[red]{r.reason}[/red]")
        tab.add_row(r.vertex.replace("popops::", "").replace("poplin::", ""), r.dtype, f"{r.n:,}",
                    _fmt_params(r.params), ref, model, err, _short_source(r.source))
    con.print(tab)
    s = summary(rows)

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"

    con.print(f"rows {s['rows']} (scored {s['scored']}, no reference {s['unscored']}, not computed "
              f"{s['uncomputed']}); Pearson r {s['pearson_r']:.5f}; " if s["pearson_r"] is not None else
              f"rows {s['rows']} (scored {s['scored']}); ", end="")
    con.print(f"mean |error| {pct(s['mean_abs_error'])} ({s['mean_abs_error_cycles'] or 0:.1f} cycles), max "
              f"{pct(s['max_abs_error'])}; within 5%: {pct(s['within_5pct'])}, within 10%: {pct(s['within_10pct'])}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m profiler.calibrate", description=__doc__.splitlines()[0])
    ap.add_argument("table", nargs="?", default=DEFAULT_TABLE, help="the reference CSV (default: the shipped table)")
    ap.add_argument("--json", action="store_true", help="print the rows and summary as JSON")
    ap.add_argument("--max-error", type=float, default=None,
                    help="exit 1 when a scored row's |model - reference| / reference exceeds this")
    ap.add_argument("--hardware", action="store_true",
                    help="score the published hardware measurements (codelets/reference_hardware.csv) instead")
    ap.add_argument("--max-median", type=float, default=None,
                    help="with --hardware: exit 1 when the median |error| exceeds this (default 0.05)")
    args = ap.parse_args(argv)
    if args.hardware:
        return _main_hardware(args)
    try:
        rows = compute(read_table(args.table))
    except TableError as e:
        print(f"calibrate: {e}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(to_json(rows), indent=1))
    else:
        print_table(rows, args.max_error)
    if args.max_error is not None:
        bad = failures(rows, args.max_error)
        if bad:
            msg = "\n".join(
                f"  line {r.line}: {r.vertex} {r.dtype} n={r.n} {_fmt_params(r.params)}: " + _failure_text(r)
                for r in bad)
            print(f"calibrate: {len(bad)} row(s) past the limit ({100 * args.max_error:.0f}%, or the row's "
                  f"own tolerance):\n{msg}", file=sys.stderr)
            return 1
    return 0


def _main_hardware(args) -> int:
    from . import hardware

    table = args.table if args.table != DEFAULT_TABLE else hardware.HARDWARE_TABLE
    try:
        rows = hardware.simulate(hardware.read_hardware_table(table))
    except (TableError, hardware.TableError) as e:  # (this module may run as __main__)
        print(f"calibrate: {e}", file=sys.stderr)
        return 2
    max_error = 0.10 if args.max_error is None else args.max_error
    max_median = 0.05 if args.max_median is None else args.max_median
    if args.json:
        print(json.dumps(hardware.hardware_json(rows), indent=1))
    else:
        hardware.print_hardware(rows, max_error)
    bad = hardware.hardware_failures(rows, max_error, max_median)
    if bad:
        print(f"calibrate --hardware: {len(bad)} problem(s) (limits: {100 * max_error:.0f}% a row, "
              f"{100 * max_median:.0f}% median):\n  " + "\n  ".join(bad), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
