"""Keep "id order is a valid schedule" after edits through the views (docs/ir.md)."""
from __future__ import annotations

import heapq


def restore_schedule(graph) -> None:
    """Renumber the ops of `graph` (permuting the ids they hold) into a topological order of
    their data dependencies and `after` edges, closest to the current id order."""
    from popxl.transforms._graph_edit import reorder_ops
    ops = list(graph._ops)
    index = {id(o): o for o in ops}
    preds: dict[int, set[int]] = {id(o): set() for o in ops}
    for o in ops:
        for t in o.inputs:
            p = getattr(t, "_producer", None)
            if p is not None and id(p) in index and p is not o:
                preds[id(o)].add(id(p))
        for a in o.after:
            if id(a) in index:
                preds[id(o)].add(id(a))
    succs: dict[int, list[int]] = {k: [] for k in preds}
    for k, ps in preds.items():
        for p in ps:
            succs[p].append(k)
    waiting = {k: len(ps) for k, ps in preds.items()}
    ready = [(index[k].id, k) for k, n in waiting.items() if n == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(index[k])
        for s in succs[k]:
            waiting[s] -= 1
            if waiting[s] == 0:
                heapq.heappush(ready, (index[s].id, s))
    if len(order) != len(ops):
        raise RuntimeError(f"The ops of graph {graph.id!r} depend on each other in a cycle after an edit")
    reorder_ops(graph, order)
