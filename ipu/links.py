"""The IPU-Links between the IPUs of a replica: which IPUs are wired to which, with how many links,
and how long a phase's cross-IPU bytes take over them.

Two wirings (`Target.ipu_link_wiring`):

- "ladder": IPU-M2000 / Bow-2000 systems and the IPU-PODs built from them. The IPUs form a ladder:
  IPUs 2k and 2k + 1 are the two ends of a rung, and the two rails run through the even and the
  odd IPUs (i to i + 2), the rails closed into a ring at the ends of the system (the IPU-Link
  cables of an IPU-POD loop back; the Poplar user guide's GCL section calls this the torus form of
  the ladder), so every IPU has three neighbours: its rung partner and one rail neighbour each
  way (the same ladder Jia et al. 2019, arXiv 1912.03413 sec. 4, measured on C2 cards).
  Neighbours are joined by `ipu_links_per_cable` (2) IPU-Links: Graphcore's gc-iputraffictest
  documents an IPU-M2000 rung pair (devices 2 and 3) moving 423.3 Gbit/s both ways together, 26.5
  GB/s each way = 2 links x 128 Gbit/s x 0.83 (codelets/reference_hardware.csv scores it). The
  earlier models gave one pair all ten of an IPU's links (136 GB/s, 2.85x the measurement), then
  a third of them each (45 GB/s, 1.7x).
- "ring": C600 cards. Neighbouring cards are joined by one cable of `ipu_links_per_cable` (2)
  links, the cards in a ring (C600 product brief: up to 8 cards, each pair joined by a cable of
  two IPU-Links).

Traffic between IPUs that are not neighbours goes over the shortest path of the wiring (the lowest
hop first when two are as short), and every link bundle it crosses carries it: the phase takes as
long as its busiest bundle in either direction. The time on the links overlaps the tiles' own
exchange time (the exchange streams words to the link as the tiles send them), so a phase costs
the slower of the two, not their sum.
"""
from __future__ import annotations

import math
from collections import deque
from functools import lru_cache

import numpy as np

from .target import Target

__all__ = ["link_phase_cycles", "links_between", "neighbours", "ring_order", "route"]


def neighbours(target: Target, ipu: int) -> dict[int, float]:
    """{neighbour IPU: links to it} for `ipu` among the target's IPUs."""
    return _neighbours(target.ipu_link_wiring, target.ipu_links, target.ipu_links_per_cable, target.ipus, ipu)


def _neighbours(wiring: str, links: int, per_cable: int, n: int, ipu: int) -> dict[int, float]:
    out: dict[int, float] = {}
    if n < 2:
        return out
    if wiring == "ring":
        for j in ((ipu - 1) % n, (ipu + 1) % n):
            if j != ipu:
                out[j] = float(per_cable)
        return out
    if wiring != "ladder":
        raise ValueError(f"unknown IPU-Link wiring {wiring!r} (ladder or ring)")
    partner = ipu ^ 1
    if partner < n:
        out[partner] = float(per_cable)
    rail = [j for j in range(ipu % 2, n, 2)]
    if len(rail) > 1:
        k = rail.index(ipu)
        for j in (rail[(k - 1) % len(rail)], rail[(k + 1) % len(rail)]):
            if j != ipu:
                out[j] = float(per_cable)
    return out


def ring_order(target: Target, ipus: int | None = None) -> list[int]:
    """The IPUs of a system of `ipus` IPUs (default: the target's) in the order of a ring that
    only crosses neighbour links: C600 cards in card order; the ladder up the even rail and back
    down the odd one (0, 2, 4, ..., 5, 3, 1), the single ring round the periphery of the ladder
    that GCL's collectives use (Poplar user guide, GCL logical topologies)."""
    n = target.ipus if ipus is None else int(ipus)
    if target.ipu_link_wiring == "ring" or n < 3:
        return list(range(n))
    return list(range(0, n, 2)) + list(range(n - 1 - (n % 2), 0, -2))


def links_between(target: Target, a: int, b: int) -> float:
    """Links wired directly between IPUs a and b (0 when they are not neighbours)."""
    return neighbours(target, a).get(b, 0.0)


@lru_cache(maxsize=256)
def _routes(wiring: str, links: int, per_cable: int, ipus: int) -> dict:
    """Shortest paths between every pair of IPUs: {(a, b): [(u, v) hops]} (breadth first, lowest
    neighbour first)."""
    adj = {i: sorted(_neighbours(wiring, links, per_cable, ipus, i)) for i in range(ipus)}
    paths = {}
    for a in range(ipus):
        prev: dict[int, int | None] = {a: None}
        q = deque([a])
        while q:
            u = q.popleft()
            for v in adj[u]:
                if v not in prev:
                    prev[v] = u
                    q.append(v)
        for b in range(ipus):
            if b == a or b not in prev:
                continue
            hops = []
            v = b
            w = prev[v]
            while w is not None:
                hops.append((w, v))
                v, w = w, prev[w]
            paths[(a, b)] = hops[::-1]
    return paths


def route(target: Target, a: int, b: int) -> list[tuple[int, int]]:
    """The hops (u, v) that bytes from IPU a take to IPU b."""
    return list(_routes(target.ipu_link_wiring, target.ipu_links, target.ipu_links_per_cable, target.ipus)[(a, b)])


def link_phase_cycles(src_ipu, dst_ipu, nbytes, target: Target) -> int:
    """Cycles the IPU-Links need for one phase's cross-IPU runs (src_ipu != dst_ipu for every run):
    the busiest directed link bundle's bytes over its links' bandwidth."""
    src_ipu = np.asarray(src_ipu, np.int64)
    dst_ipu = np.asarray(dst_ipu, np.int64)
    if src_ipu.size == 0:
        return 0
    n = target.ipus
    pair_bytes = np.bincount(src_ipu * n + dst_ipu, weights=np.asarray(nbytes, np.float64), minlength=n * n)
    load: dict[tuple[int, int], float] = {}
    for key in np.flatnonzero(pair_bytes):
        a, b = divmod(int(key), n)
        for hop in route(target, a, b):
            load[hop] = load.get(hop, 0.0) + float(pair_bytes[key])
    per_link = target.ipu_link_bytes_per_cycle()
    worst = max(load[h] / (links_between(target, *h) * per_link) for h in load)
    return int(math.ceil(worst))
