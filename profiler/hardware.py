"""Published measurements of real IPUs, rebuilt as workloads and simulated: the hardware half of
`python -m profiler.calibrate --hardware`.

codelets/reference_hardware.csv has one measurement per row:

    workload,target,params,published,unit,conditions,source

workload: what to build (WORKLOADS below), written against ipu/ and codelets/ as a user of the
tile-level API would; target: the simulated target (ipu.get_target names: GC200, Bow, C600, GC2);
params: `key=value;...` for the workload (and `probe=C`: cycles of measuring probe the published
figure includes, taken off before comparing); published: the figure; unit: `cycles`, `TFLOPS`
(the workload's FLOPs over the simulated time at the target's clock) or `GB/s` (its bytes over
the simulated time); conditions: chip, clock, SDK, sizes, what was timed; source: where the figure
was published, exactly.

Each workload is compiled (ipu.compile) and its steps' cycles summed: the same cycles a run
reports, without running the kernels. The comparison is (simulated - published) / published in
the row's unit.
"""
from __future__ import annotations

import csv
import os
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from .calibrate import TableError, parse_params

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
HARDWARE_TABLE = os.path.join(ROOT, "codelets", "reference_hardware.csv")
HW_COLUMNS = ("workload", "target", "params", "published", "unit", "conditions", "source")
UNITS = ("cycles", "TFLOPS", "GB/s")


@dataclass
class Measurement:
    workload: str
    target: str
    params: dict
    published: float
    unit: str
    conditions: str
    source: str
    line: int
    simulated: float | None = None
    cycles: int | None = None
    reason: str = ""
    detail: dict = field(default_factory=dict)

    @property
    def probe(self) -> float:
        return float(self.params.get("probe", 0))

    @property
    def reference(self) -> float:
        """The published figure less any measuring probe (cycles only)."""
        return self.published - self.probe

    @property
    def error(self) -> float | None:
        if self.simulated is None:
            return None
        return (self.simulated - self.reference) / self.reference


def read_hardware_table(path: str = HARDWARE_TABLE) -> list[Measurement]:
    if not os.path.exists(path):
        raise TableError(f"{path}: no such file (the shipped table is {os.path.relpath(HARDWARE_TABLE)})")
    rows = []
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(ln for ln in fh if not ln.lstrip().startswith("#"))
        missing = [c for c in HW_COLUMNS if c not in (reader.fieldnames or ())]
        if missing:
            raise TableError(f"{path}: missing column(s) {', '.join(missing)}; the header must be "
                             f"{','.join(HW_COLUMNS)}")
        for i, r in enumerate(reader, start=2):
            try:
                published = float(r["published"])
            except (TypeError, ValueError):
                raise TableError(f"{path} line {i}: published must be a number, got {r['published']!r}") from None
            unit = (r["unit"] or "").strip()
            if unit not in UNITS:
                raise TableError(f"{path} line {i}: unit must be one of {', '.join(UNITS)}, got {unit!r}")
            if r["workload"].strip() not in WORKLOADS:
                raise TableError(f"{path} line {i}: unknown workload {r['workload']!r} "
                                 f"(known: {', '.join(sorted(WORKLOADS))})")
            rows.append(Measurement(r["workload"].strip(), r["target"].strip(), parse_params(r["params"], i), published,
                                    unit, (r["conditions"] or "").strip(), (r["source"] or "").strip(), i))
    return rows


# ------------------------------------------------------------------------------------------------
# workloads: (target, params) -> (cycles, FLOPs, bytes) of a program built on ipu/


def _dtype(p, key="dtype", default="float32"):
    import ipu

    return ipu.element_type(p.get(key, default))


def _cycles_of(graph, prog) -> int:
    import ipu

    exe = ipu.compile(graph, prog)
    return int(sum(int(s.cycles) for s in exe.steps))


def _scaled_add(target, p):
    """One ScaledAdd vertex (data += b x deltas, constant scales) of n elements on one tile, its
    own compute set: the cycles the compute set takes."""
    import ipu

    n = int(p["n"])
    dt = _dtype(p)
    g = ipu.Graph(_one_tile(target))
    x = g.add_variable("x", (n,), dt)
    y = g.add_variable("y", (n,), dt)
    g.set_tile_mapping(x, 0)
    g.set_tile_mapping(y, 0)
    cs = g.add_compute_set("scaled_add")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=y, a=1.0, b=float(p.get("b", 0.5)))
    return _cycles_of(g, ipu.Execute(cs)), 2 * n, 0


def _one_tile(target):
    from dataclasses import replace

    return replace(target, tiles_per_ipu=1, ipus=1)


def _amp_tiles(target, p):
    """Every tile multiplies its own [m, k] block by its own [k, n] block on the AMP (one
    MatMulBlock vertex a tile, one compute set), operands already on the tile: the TFLOPS of the
    whole IPU. dtype: operands; partials: the result's type (float32 or float16)."""
    import ipu

    m, k, n = int(p["m"]), int(p["k"]), int(p["n"])
    dt = _dtype(p, "dtype", "float16")
    out = _dtype(p, "partials", "float32")
    tiles = target.tiles_per_ipu
    t = target.with_ipus(1)
    g = ipu.Graph(t)
    a = g.add_variable("a", (tiles, m * k), dt)
    b = g.add_variable("b", (tiles, k * n), dt)
    o = g.add_variable("o", (tiles, m * n), out)
    for v in (a, b, o):
        g.map_linearly(v)  # row t on tile t
    cs = g.add_compute_set("amp")
    rows = np.arange(tiles)
    g.add_vertices(cs, "MatMulBlock", rows, {"a": (a, rows * m * k, m * k), "b": (b, rows * k * n, k * n),
                                             "out": (o, rows * m * n, m * n)},
                   ip={"m": m, "k": k, "n": n, "accumulate": 0})
    return _cycles_of(g, ipu.Execute(cs)), 2 * m * k * n * tiles, 0


def _exchange(target, p):
    """One exchange phase: tile 0 sends `bytes` bytes to tile 1 (the busiest tile's traffic of a
    measured phase)."""
    import ipu

    nb = int(p["bytes"])
    g = ipu.Graph(_two_tiles(target))
    a = g.add_variable("a", (nb // 4,), "float32")
    b = g.add_variable("b", (nb // 4,), "float32")
    g.set_tile_mapping(a, 0)
    g.set_tile_mapping(b, 1)
    exe = ipu.compile(g, ipu.Copy(a, b))
    return int(sum(int(s.cycles) for s in exe.steps if s.kind == "exchange")), 0, nb


def _two_tiles(target):
    from dataclasses import replace

    return replace(target, tiles_per_ipu=2, ipus=1)


def _matmul(target, p):
    """[m, k] x [k, n] planned over one IPU (codelets.plans, as poplin's matMul), operands mapped
    linearly over the tiles, the output where the plan puts it: exchanges, AMP, partials and
    reduction. partials: float32 (default)
    or float16; available_memory_proportion: poplin's option (none by default); loop_carry=1: the
    product is copied back into b, one iteration of a loop carrying it."""
    import ipu
    from codelets.plans import build_matmul

    m, k, n = int(p["m"]), int(p["k"]), int(p["n"])
    dt = _dtype(p, "dtype", "float32")
    out = _dtype(p, "out", p.get("dtype", "float32"))
    g = ipu.Graph(target.with_ipus(1))
    a = g.add_variable("a", (m, k), dt)
    b = g.add_variable("b", (k, n), dt)
    o = g.add_variable("o", (m, n), out)  # mapped by the planner (as poplin creates a matmul's output)
    for v in (a, b):
        g.map_linearly(v)
    amp = p.get("available_memory_proportion")
    prog = build_matmul(g, a, b, o, partials_dtype=p.get("partials"),
                        available_memory_proportion=None if amp is None else float(amp))
    if int(p.get("loop_carry", 0)):
        # one iteration of a loop whose product is the next iteration's right operand (b = a @ b, as
        # PopTorch's for_loop carries it): the product copied back into b's layout
        if m != k:
            raise ValueError(f"loop_carry needs a square left operand (m == k), got m={m}, k={k}")
        prog = ipu.Sequence(prog, ipu.Copy(o, b))
    return _cycles_of(g, prog), 2 * m * k * n, 0


def _ipu_copy(target, p):
    """`bytes` bytes spread over the tiles of IPU `src` copied to the same tiles of IPU `dst` of a
    multi-IPU target (an ipu_copy): the exchange step and its inter-IPU sync."""
    import ipu

    nb = int(p["bytes"])
    src, dst = int(p.get("src", 0)), int(p.get("dst", 1))
    ipus = max(src, dst) + 1
    t = target.with_ipus(ipus)
    g = ipu.Graph(t)
    n = nb // 4
    a = g.add_variable("a", (n,), "float32")
    b = g.add_variable("b", (n,), "float32")
    T = t.tiles_per_ipu
    g.map_linearly(a, tiles=range(src * T, (src + 1) * T))
    g.map_linearly(b, tiles=range(dst * T, (dst + 1) * T))
    return _cycles_of(g, ipu.Copy(a, b)), 0, nb


def _ipu_traffic(target, p):
    """IPUs `device0` and `device1` of a multi-IPU target exchange at once: `tiles` tiles of each
    send `bytes_per_tile` bytes to the same tiles of the other (gc-iputraffictest's pattern), one
    exchange phase; bytes counted both ways (the tool reports the sum of the two directions)."""
    import ipu

    d0, d1 = int(p.get("device0", 0)), int(p.get("device1", 1))
    tiles, per_tile = int(p["tiles"]), int(p["bytes_per_tile"])
    t = target.with_ipus(max(d0, d1) + 1)
    T = t.tiles_per_ipu
    n = tiles * per_tile // 4
    g = ipu.Graph(t)
    a = g.add_variable("a", (2 * n,), "float32")  # [IPU d0's part, IPU d1's part]
    b = g.add_variable("b", (2 * n,), "float32")  # the same parts on the other IPU
    on = {d: range(d * T, d * T + tiles) for d in (d0, d1)}
    for v, first, second in ((a, d0, d1), (b, d1, d0)):
        g.map_linearly(v[:n], tiles=on[first])
        g.map_linearly(v[n:], tiles=on[second])
    return _cycles_of(g, ipu.Copy(a, b)), 0, 2 * n * 4


def _host_to_device(target, p):
    """A host stream of `bytes` bytes written to a tensor spread over every tile of one IPU."""
    import ipu

    nb = int(p["bytes"])
    t = target.with_ipus(1)
    g = ipu.Graph(t)
    n = nb // 4
    a = g.add_variable("a", (n,), "float32")
    g.map_linearly(a)
    s = g.add_host_to_device_stream("in", (n,), "float32")
    return _cycles_of(g, ipu.HostToDevice(s, a)), 0, nb


WORKLOADS = {
    "scaled_add": _scaled_add,
    "amp_tiles": _amp_tiles,
    "exchange": _exchange,
    "matmul": _matmul,
    "ipu_copy": _ipu_copy,
    "ipu_traffic": _ipu_traffic,
    "host_to_device": _host_to_device,
}


def simulate(rows: list[Measurement]) -> list[Measurement]:
    import codelets  # noqa: F401  (registers the built-in codelets)
    import ipu

    for r in rows:
        try:
            target = ipu.get_target(r.target)
            cycles, flops, nbytes = WORKLOADS[r.workload](target, r.params)
        except (KeyError, TypeError, ValueError, ipu.CompileError) as e:
            r.reason = f"cannot build: {e}"
            continue
        r.cycles = cycles
        seconds = cycles / target.clock_hz
        if r.unit == "cycles":
            r.simulated = float(cycles)
        elif r.unit == "TFLOPS":
            r.simulated = flops / seconds / 1e12 if seconds else None
        else:
            r.simulated = nbytes / seconds / 1e9 if seconds else None
        if r.simulated is None:
            r.reason = "the workload took no time"
    return rows


def hardware_summary(rows: list[Measurement]) -> dict:
    errs = np.array([abs(r.error) for r in rows if r.error is not None], np.float64)
    return {
        "rows": len(rows),
        "scored": int(errs.size),
        "not_built": sum(1 for r in rows if r.simulated is None),
        "median_abs_error": float(np.median(errs)) if errs.size else None,
        "max_abs_error": float(errs.max()) if errs.size else None,
        "within_5pct": float((errs <= 0.05).mean()) if errs.size else None,
        "within_10pct": float((errs <= 0.10).mean()) if errs.size else None,
    }


def hardware_failures(rows, max_error: float, max_median: float) -> list[str]:
    out = []
    for r in rows:
        if r.simulated is None:
            out.append(f"line {r.line}: {r.workload} {_fmt(r.params)}: {r.reason}")
        elif abs(r.error) > max_error + 1e-12:
            out.append(f"line {r.line}: {r.workload} {_fmt(r.params)} on {r.target}: simulated {r.simulated:,.4g} vs "
                       f"published {r.reference:,.4g} {r.unit} ({100 * r.error:+.1f}%)")
    s = hardware_summary(rows)
    if s["median_abs_error"] is not None and s["median_abs_error"] > max_median + 1e-12:
        out.append(f"median |error| {100 * s['median_abs_error']:.1f}% is over {100 * max_median:.0f}%")
    return out


def _fmt(p: dict) -> str:
    return ";".join(f"{k}={v}" for k, v in p.items())


def _num(x: float, unit: str) -> str:
    return f"{x:,.0f}" if unit == "cycles" else f"{x:,.1f}"


def hardware_json(rows) -> dict:
    return {"rows": [{"workload": r.workload, "target": r.target, "params": r.params, "published": r.published,
                      "probe": r.probe or None, "unit": r.unit, "simulated": r.simulated, "cycles": r.cycles,
                      "error": r.error, "conditions": r.conditions, "source": r.source,
                      **({"reason": r.reason} if r.reason else {})} for r in rows],
            "summary": hardware_summary(rows)}


def print_hardware(rows, max_error: float, console=None) -> None:
    from rich.console import Console
    from rich.table import Table

    con = console or Console()
    tab = Table(title="simulated against published measurements of real IPUs")
    cols: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("workload", "left"), ("target", "left"), ("params", "left"), ("published", "right"),
        ("simulated", "right"), ("unit", "left"), ("error", "right"), ("source", "left"))
    for c, j in cols:
        tab.add_column(c, justify=j, overflow="fold")
    for r in rows:
        pub = _num(r.published, r.unit) + (f" (-{r.probe:g})" if r.probe else "")
        if r.simulated is None:
            sim, err = f"[red]{r.reason}[/red]", "-"
        else:
            colour = "green" if abs(r.error) <= 0.05 else ("yellow" if abs(r.error) <= max_error else "red")
            sim, err = _num(r.simulated, r.unit), f"[{colour}]{100 * r.error:+.1f}%[/{colour}]"
        params = _fmt({k: v for k, v in r.params.items() if k != "probe"})
        source = r.source if len(r.source) <= 60 else r.source[:57] + "..."
        tab.add_row(r.workload, r.target, params, pub, sim, r.unit, err, source)
    con.print(tab)
    s = hardware_summary(rows)

    def pct(x):
        return "-" if x is None else f"{100 * x:.1f}%"

    con.print(f"rows {s['rows']} (scored {s['scored']}, not built {s['not_built']}); median |error| "
              f"{pct(s['median_abs_error'])}, max {pct(s['max_abs_error'])}; within 5%: {pct(s['within_5pct'])}, "
              f"within 10%: {pct(s['within_10pct'])}")
