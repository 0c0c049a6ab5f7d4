"""The memory planner: an address for every tensor piece on its tile, and the per-tile budget.

Always-live data (variables, constants) is placed first at the bottom of each tile's memory;
temporaries are placed first-fit in order of their first use, reusing the memory of temporaries
whose last use has passed (interval-graph allocation on every tile). The planner then adds the
non-data categories (vertex code and state, exchange code, control code, stack) and raises
OutOfMemoryError with a per-tile report when a tile overflows.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from numba import njit

from .errors import OutOfMemoryError
from .target import Target

__all__ = ["CATEGORIES", "MemoryPlan", "align", "check_fits", "place_pieces"]

CATEGORIES = ("variables", "constants", "temporaries", "vertex_code", "vertex_state",
              "exchange_code", "control_code", "stack")


@njit(cache=True)
def _place(order, tile, size, start, end, num_tiles):
    """First-fit placement of pieces (visited in `order`: by tile, then first use) on their tiles.

    A piece is live over [start, end] of the program timeline; its memory is free again for a
    piece whose start is after end. Returns the tile-local address of each piece and the high-water
    mark of each tile.
    """
    n = order.shape[0]
    addr = np.zeros(n, np.int64)
    peak = np.zeros(num_tiles, np.int64)
    act_addr = np.empty(n, np.int64)
    act_size = np.empty(n, np.int64)
    act_end = np.empty(n, np.int64)
    i = 0
    while i < n:
        t = tile[order[i]]
        na = 0
        j = i
        while j < n and tile[order[j]] == t:
            p = order[j]
            # drop allocations whose life ended before this piece starts
            k = 0
            for q in range(na):
                if act_end[q] >= start[p]:
                    act_addr[k] = act_addr[q]
                    act_size[k] = act_size[q]
                    act_end[k] = act_end[q]
                    k += 1
            na = k
            # lowest gap that fits (actives are kept sorted by address)
            cur = 0
            pos = na
            for q in range(na):
                if act_addr[q] - cur >= size[p]:
                    pos = q
                    break
                if act_addr[q] + act_size[q] > cur:
                    cur = act_addr[q] + act_size[q]
            for q in range(na, pos, -1):
                act_addr[q] = act_addr[q - 1]
                act_size[q] = act_size[q - 1]
                act_end[q] = act_end[q - 1]
            act_addr[pos] = cur
            act_size[pos] = size[p]
            act_end[pos] = end[p]
            na += 1
            addr[p] = cur
            if cur + size[p] > peak[t]:
                peak[t] = cur + size[p]
            j += 1
        i = j
    return addr, peak


def align(x, a):
    return (np.asarray(x, np.int64) + a - 1) // a * a


@dataclass
class MemoryPlan:
    target: Target
    tile_data_bytes: np.ndarray  # high-water mark of data on each tile (what the host allocates)
    tile_base: np.ndarray  # offset of each tile's memory in the flat replica memory
    total_bytes: int  # simulated data bytes of one replica
    categories: dict = field(default_factory=dict)  # category -> int64[num_tiles]

    def tile_total(self) -> np.ndarray:
        return sum(self.categories.values())


def place_pieces(tile, nbytes, start, end, target: Target):
    """Addresses for pieces; returns (tile-local addresses, per-tile high-water mark)."""
    size = align(nbytes, target.alignment)
    order = np.lexsort((-size, start, tile))
    return _place(order.astype(np.int64), np.asarray(tile, np.int64), size,
                  np.asarray(start, np.int64), np.asarray(end, np.int64), target.num_tiles)


def check_fits(plan: MemoryPlan, variables_by_tile=None) -> None:
    """Raise OutOfMemoryError naming the worst tiles and what fills them."""
    target = plan.target
    total = plan.tile_total()
    over = np.flatnonzero(total > target.bytes_per_tile)
    if over.size == 0:
        return
    worst = over[np.argsort(-total[over], kind="stable")][:5]
    lines = [
        f"Out of tile memory: {over.size} of {target.num_tiles} tiles need more than the "
        f"{target.bytes_per_tile:,} bytes a {target.name} tile has.",
        "Worst tiles (bytes by category):",
    ]
    report = []
    for t in worst:
        cats = {c: int(plan.categories[c][t]) for c in CATEGORIES if plan.categories[c][t]}
        entry = {"tile": int(t), "total": int(total[t]), "categories": cats}
        desc = ", ".join(f"{c} {b:,}" for c, b in cats.items())
        lines.append(f"  tile {t}: {int(total[t]):,} bytes ({desc})")
        if variables_by_tile is not None:
            big = variables_by_tile(int(t))
            entry["largest"] = big
            if big:
                lines.append("    largest tensors: " + ", ".join(f"{n} ({b:,} B)" for n, b in big))
        report.append(entry)
    lines.append(
        "Fix: spread the large tensors over more tiles (map them linearly over all tiles), use a "
        "smaller batch, or a target with more tiles or IPUs."
    )
    raise OutOfMemoryError("\n".join(lines), report)
