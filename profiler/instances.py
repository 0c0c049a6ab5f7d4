"""The instances of a PopDist run side by side: one profile per instance (profile.instance<k>.json,
written by each poprun instance), their replicas, cycles, time in collectives and in MPI."""
from __future__ import annotations

from rich import box
from rich.table import Table

__all__ = ["instance_docs", "instances_summary", "render_instances"]


def instance_docs(docs: list) -> list:
    """The documents of a multi-instance run, in instance order (empty when there are none)."""
    out = [d for d in docs if ((d.get("info") or {}).get("instance") or {}).get("instances", 1) > 1]
    return sorted(out, key=lambda d: d["info"]["instance"]["index"])


def instances_summary(docs: list) -> list:
    rows = []
    for d in instance_docs(docs):
        inst = d["info"]["instance"]
        ex = d.get("execution") or {}
        total = int(ex.get("total_cycles", 0))
        coll = int(inst.get("collective_cycles", 0))
        rows.append({"instance": int(inst["index"]), "instances": int(inst["instances"]),
                     "replicas": [int(inst["replica_offset"]),
                                  int(inst["replica_offset"]) + int(inst["local_replicas"])],
                     "total_replicas": int(inst["total_replicas"]), "cycles": total, "collective_cycles": coll,
                     "collective_share": coll / total if total else 0.0,
                     "run_seconds": (d.get("wall") or {}).get("run_seconds"),
                     "mpi_seconds": inst.get("mpi_seconds"), "mpi_calls": inst.get("mpi_calls"),
                     "mpi_bytes": inst.get("mpi_bytes"), "file": d.get("_file")})
    return rows


def render_instances(docs: list, console) -> bool:
    """Print the side-by-side table; False when the documents are not a multi-instance run."""
    rows = instances_summary(docs)
    if not rows:
        return False
    n, R = rows[0]["instances"], rows[0]["total_replicas"]
    t = Table(title=f"PopDist instances · {len(rows)} of {n} profiled · {R} replicas", title_justify="left",
              box=box.SIMPLE_HEAD, show_edge=False)
    for col in ("instance", "replicas", "cycles", "in collectives", "%", "run s", "MPI s", "MPI calls", "MPI bytes"):
        t.add_column(col, justify="right")
    for r in rows:
        a, b = r["replicas"]
        t.add_row(str(r["instance"]), f"{a}..{b - 1}", f"{r['cycles']:,}", f"{r['collective_cycles']:,}",
                  f"{100 * r['collective_share']:.1f}", _num(r["run_seconds"], 3), _num(r["mpi_seconds"], 3),
                  _num(r["mpi_calls"], 0), _num(r["mpi_bytes"], 0))
    console.print(t)
    cycles = {r["cycles"] for r in rows}
    if len(cycles) > 1:
        console.print("[yellow]the instances counted different cycles: their replicas took different paths[/]")
    console.print("[dim]cycles are simulated IPU cycles (the same on every instance in lock step); MPI s is host "
                  "wall time spent exchanging data between the instances[/]")
    return True


def _num(v, digits: int) -> str:
    if v is None:
        return "-"
    return f"{v:,.{digits}f}" if digits else f"{int(v):,}"
