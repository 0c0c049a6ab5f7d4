"""Exchanges that feed the next compute set directly: the compiled step loop's copies under the floor.

An exchange copies bytes into a buffer that, often, only the next compute set reads: a matmul
operand gathered (and multicast) to the tiles that use it, then read once by the AMP vertices and
dead until the next exchange rewrites it. The compiled step loop may then skip the copy of a run
whose bytes every vertex reading them reads from inside that one run, and have those vertices read
the run's source instead: the vertices compute the same values from the same bytes, so outputs,
cycles, step logs, the memory plan and the profile are the Python walk's (which copies everything
and stays the reference); only the skipped destination bytes, which nothing reads again before a
whole write replaces them, keep their old contents.

Two halves:

- at compile time (`exchange_readers`): the exchanges whose destination is a temporary that the
  liveness timeline shows to be written whole by that exchange and read by one compute step next,
  in every segment of its life, and nothing else; and the bytes that temporaries whose first use
  is not a whole write may read before writing them (`stale_reads`: what a skipped copy left there
  would differ from the walk's), where nothing is skipped;
- in the plan (`forward`): given a compute step's kernel groups and the exchanges just before it
  in straight-line order, which runs may be skipped and the groups' field offsets redirected to
  the sources. A run is skipped only when every read of the compute set that touches its
  destination lies inside it at a whole-element offset from its source, no vertex writes its
  destination or its source, and no later exchange before the compute set writes its source.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from .codelet import IN, INOUT, OUT

__all__ = ["Forwarding", "RowReading", "exchange_readers", "forward", "written"]

# a row read spanning more runs than this keeps them copied; 0: row reads off (the default for now:
# MNIST batch 128 / 32 steps measured 15-25% more CPU with them, BERT-base less; to be narrowed)
MAX_SEGMENTS = 0


@dataclass
class Forwarding:
    """What the compile found for the plan: `readers`, {exchange step id: the compute step that
    alone reads its destination}; `unwritten_start` / `_end`, byte ranges that a temporary whose
    first use is not a whole write may read before writing them (all of it unless that use is a
    compute step: `stale_reads`): a skipped copy must not leave them other bytes than the walk."""

    readers: dict
    unwritten_start: np.ndarray
    unwritten_end: np.ndarray


def exchange_readers(uses: dict, segments: dict, steps_at, steps, temporaries: set) -> dict:
    """{exchange step id: compute step id} for each exchange whose destination temporary lives,
    in every segment, from that exchange's whole write to one read by that compute step at a later
    position (and is touched by nothing else). `uses`: Timeline.uses; `segments`: its segments;
    `steps_at`: the step at each timeline position (timeline_steps), or None."""
    if steps_at is None:
        return {}
    out: dict[int, int] = {}
    clash: set[int] = set()
    for vid in temporaries:
        u = uses.get(vid)
        segs = segments.get(vid)
        if not u or len(u) % 2 or segs is None or 2 * len(segs) != len(u):
            continue
        pair = None
        for i in range(0, len(u), 2):
            (p, read_p, whole_p, ctx_p), (q, read_q, whole_q, ctx_q) = u[i], u[i + 1]
            if read_p or not whole_p or not read_q or whole_q or ctx_p != ctx_q or tuple(segs[i // 2]) != (p, q):
                pair = None
                break
            if p >= len(steps_at) or q >= len(steps_at):
                pair = None
                break
            x, c = steps_at[p], steps_at[q]
            if steps[x].kind != "exchange" or steps[c].kind != "compute" or (pair is not None and pair != (x, c)):
                pair = None
                break
            pair = (x, c)
        if pair is None:
            continue
        if out.get(pair[0], pair[1]) != pair[1]:
            clash.add(pair[0])
        out[pair[0]] = pair[1]
    for x in clash:
        del out[x]
    return out


def _intervals(groups, directions):
    """Byte intervals of the groups' fields of the given directions: (starts, ends, group, vertex,
    field, item size), non-empty ones only."""
    parts = []
    for gi, g in enumerate(groups):
        for j, (f, t) in enumerate(zip(g.codelet.fields, g.types)):
            if f.direction not in directions:
                continue
            isz = t.storage.itemsize
            s = g.off[:, j].astype(np.int64) * isz
            e = s + g.cnt[:, j].astype(np.int64) * isz
            keep = np.flatnonzero(e > s)
            parts.append((s[keep], e[keep], np.full(keep.size, gi), keep, np.full(keep.size, j),
                          np.full(keep.size, isz)))
    if not parts:
        z = np.zeros(0, np.int64)
        return z, z, z, z, z, z
    return tuple(np.concatenate([p[i] for p in parts]).astype(np.int64) for i in range(6))


def written(groups):
    """(byte starts, byte counts) of what the groups' vertices write (out and in/out fields)."""
    ws, we, *_ = _intervals(groups, (OUT, INOUT))
    return ws, we - ws


def stale_reads(groups, starts, ends):
    """Byte ranges meeting [starts, ends) (a temporary's pieces) that the vertices of a compute step
    may read before the step writes them: its IN fields, and the in/out fields of vertices that read
    them (`Codelet.reads_inout`) unless an earlier vertex of the step (groups in order, vertices in
    order, as the kernels run them) wrote that same range. Returns (starts, ends), sorted, disjoint."""
    fs, fe = _merged(np.asarray(starts, np.int64), np.asarray(ends, np.int64))
    reads, inout, writes = [], [], []  # (starts, ends, order)
    base = 0
    for g in groups:
        nv = g.off.shape[0]
        order = base + np.arange(nv, dtype=np.int64)
        for j, (f, t) in enumerate(zip(g.codelet.fields, g.types)):
            isz = t.storage.itemsize
            s = g.off[:, j].astype(np.int64) * isz
            e = s + g.cnt[:, j].astype(np.int64) * isz
            keep = (e > s) & _hits(s, e, fs, fe)
            if f.direction in (OUT, INOUT):
                writes.append((s[keep], e[keep], order[keep]))
            if f.direction == IN:
                reads.append((s[keep], e[keep]))
            elif f.direction == INOUT:
                mask = g.codelet.reads_inout(f.name, g.ip)
                if mask is not None:
                    keep = keep & np.asarray(mask, bool)
                inout.append((s[keep], e[keep], order[keep]))
        base += nv
    z = np.zeros(0, np.int64)
    cat = [np.concatenate([p[i] for p in parts]) if parts else z for parts, i in
           ((reads, 0), (reads, 1), (inout, 0), (inout, 1), (inout, 2), (writes, 0), (writes, 1), (writes, 2))]
    rs, re_, ios, ioe, ioo, ws, we, wo = cat
    if ios.size:  # an in/out read of a range an earlier vertex wrote whole reads the step's own value
        pairs = np.stack([np.concatenate([ios, ws]), np.concatenate([ioe, we])], 1)
        _, ids = np.unique(pairs, axis=0, return_inverse=True)
        ids = ids.reshape(-1)
        first = np.full(int(ids.max()) + 1, np.iinfo(np.int64).max, np.int64)
        np.minimum.at(first, ids[ios.size:], wo)
        stale = first[ids[:ios.size]] >= ioo
        rs, re_ = np.concatenate([rs, ios[stale]]), np.concatenate([re_, ioe[stale]])
    return _merged(rs, re_)


def _merged(starts, ends):
    """Disjoint sorted intervals covering the given ones."""
    if starts.size == 0:
        return starts, ends
    o = np.argsort(starts, kind="stable")
    s, e = starts[o], ends[o]
    reach = np.maximum.accumulate(e)
    new = np.ones(s.size, bool)
    new[1:] = s[1:] >= reach[:-1]
    idx = np.flatnonzero(new)
    return s[idx], np.maximum.reduceat(e, idx)


def _hits(s, e, fs, fe):
    """For each interval [s, e): whether it overlaps one of the disjoint sorted intervals [fs, fe)."""
    if fs.size == 0:
        return np.zeros(s.size, bool)
    j = np.searchsorted(fs, e, side="left") - 1
    ok = j >= 0
    out = np.zeros(s.size, bool)
    out[ok] = fe[j[ok]] > s[ok]
    return out


def forward(groups, chain, unwritten=None):
    """Skip runs of the exchanges in `chain` that only the compute set with kernel groups `groups`
    reads, its vertices reading the sources instead.

    `chain`: the exchanges since the last other step, in order: (forwarded, src, dst, nbytes, lo)
    each, the runs (int arrays, destinations disjoint and sorted within [lo:]) as the loop copies
    them, where runs [lo:] may be skipped (those before are kept: a regrouped multicast's first
    block, which its repeats copy from), `forwarded` False for an exchange that only has to be
    checked against (its destinations must not meet a skipped run's source). `unwritten`: sorted
    disjoint byte ranges (starts, ends) no skipped destination may meet. Returns (skips, new
    groups): per chain entry a boolean mask over its runs [lo:] (None: none skipped), and the
    groups with their redirected offsets (the same objects where nothing changed), or None when
    nothing is skipped."""
    rs, re_, rg, rv, rf, risz = _intervals(groups, (IN, INOUT))
    rlen = _row_bytes(groups, rg, rv, rf, risz)
    ws, we, *_ = _intervals(groups, (OUT, INOUT))
    inout = np.zeros(rs.size, bool)
    for gi, g in enumerate(groups):
        for j, f in enumerate(g.codelet.fields):
            if f.direction == INOUT:
                inout |= (rg == gi) & (rf == j)
    wfs, wfe = _merged(ws, we)
    z = np.zeros(0, np.int64)
    ufs, ufe = _merged(*unwritten) if unwritten is not None else (z, z)
    skips: list = []
    moves = []  # (read indices, their new byte starts)
    row_moves = []  # (read index of each row, its row number, its new byte start)
    for i, (fwd, src, dst, nbytes, lo) in enumerate(chain):
        if not fwd:
            skips.append(None)
            continue
        s, d, n = (np.asarray(x[lo:], np.int64) for x in (src, dst, nbytes))
        if d.size == 0:
            skips.append(None)
            continue
        end = d + n
        bad = _hits(d, end, wfs, wfe) | _hits(d, end, ufs, ufe)  # a vertex writes it, or it may be read unwritten
        # sources: not written by the compute set nor by a later exchange of the chain
        later = [np.asarray(c[2], np.int64) for c in chain[i + 1:]]
        later_n = [np.asarray(c[3], np.int64) for c in chain[i + 1:]]
        fs = np.concatenate([ws] + later) if later else ws
        fe = np.concatenate([we] + [a + b for a, b in zip(later, later_n)]) if later else we
        bad |= _hits(s, s + n, *_merged(fs, fe))
        # reads: inside one run (redirectable) or across runs (those runs stay)
        k = np.searchsorted(d, rs, side="right") - 1
        kc = np.maximum(k, 0)
        inside = (k >= 0) & (rs >= d[kc]) & (re_ <= end[kc])
        touch = np.flatnonzero(~inside)
        rows = None
        if touch.size:
            a0 = np.searchsorted(end, rs[touch], side="right")
            a1 = np.searchsorted(d, re_[touch], side="left")
            span = a1 > a0
            # a read of a row field whose every row lies inside one run may read each row elsewhere
            rows = _rows_in_runs(touch[span & (rlen[touch] > 0) & (a1 - a0 <= MAX_SEGMENTS)], rs, re_, rlen, d, end)
            cross = span.copy()
            if rows is not None:
                cross[np.isin(touch, rows[0])] = False
                r_k = rows[2]
                bad[r_k[(s[r_k] - d[r_k]) % risz[rows[0]] != 0]] = True
            diff = np.zeros(d.size + 1, np.int64)
            np.add.at(diff, a0[cross], 1)
            np.add.at(diff, a1[cross], -1)
            bad |= np.cumsum(diff[:-1]) > 0
        hit = np.flatnonzero(inside)
        delta = s[kc[hit]] - d[kc[hit]]
        misfit = (delta % risz[hit] != 0) | inout[hit]
        bad[kc[hit[misfit]]] = True
        skip = ~bad
        if not skip.any():
            skips.append(None)
            continue
        skips.append(skip)
        go = hit[skip[kc[hit]]]
        moves.append((go, rs[go] + (s[kc[go]] - d[kc[go]])))
        if rows is not None:
            r_t, r_start, r_k = rows
            moved = np.zeros(rs.size, bool)
            moved[r_t[skip[r_k]]] = True
            keep_rows = moved[r_t]  # every row of a read any of whose rows moves
            r_new = r_start + np.where(skip[r_k], s[r_k] - d[r_k], 0)
            row_moves.append((r_t[keep_rows], (r_start - rs[r_t])[keep_rows], r_new[keep_rows]))
    if not any(x is not None for x in skips):
        return None
    out = list(groups)
    offs: dict[int, np.ndarray] = {}
    for idx, starts in moves:
        for gi in np.unique(rg[idx]).tolist():
            off = offs.get(gi)
            if off is None:
                off = offs[gi] = groups[gi].off.copy()
            m = rg[idx] == gi
            off[rv[idx[m]], rf[idx[m]]] = starts[m] // risz[idx[m]]
    for gi, off in offs.items():
        out[gi] = replace(groups[gi], off=off)
    if row_moves:
        r_t, r_at, r_new = (np.concatenate([m[i] for m in row_moves]) for i in range(3))
        for gi in np.unique(rg[r_t]).tolist():
            m = rg[r_t] == gi
            out[gi] = _read_by_rows(out[gi], rv[r_t[m]], rf[r_t[m]], r_at[m] // rlen[r_t[m]], r_new[m],
                                    rlen[r_t[m]], risz[r_t[m]])
    return skips, out


def _row_bytes(groups, rg, rv, rf, risz):
    """Per read (of _intervals): the bytes of its rows where the codelet's rows kernel may read it
    row by row (`Codelet.read_rows`), else 0."""
    out = np.zeros(rg.size, np.int64)
    for gi, g in enumerate(groups):
        for j, f in enumerate(g.codelet.fields):
            if f.direction != IN or f.name not in g.codelet.row_fields:
                continue
            length = g.codelet.read_rows(f.name, g.types, g.cnt, g.ip)
            if length is None:
                continue
            m = np.flatnonzero((rg == gi) & (rf == j))
            out[m] = np.asarray(length, np.int64)[rv[m]] * risz[m]
    return out


def _rows_in_runs(cand, rs, re_, rlen, d, end):
    """Of the reads `cand` (row fields), those made of whole rows each inside one run of [d, end):
    (read index of each of their rows, the row's byte start, its run), rows in order; or None."""
    if cand.size == 0:
        return None
    size = re_[cand] - rs[cand]
    cand = cand[size % rlen[cand] == 0]
    if cand.size == 0:
        return None
    nrows = (re_[cand] - rs[cand]) // rlen[cand]
    owner = np.repeat(np.arange(cand.size), nrows)
    ri = np.arange(owner.size) - np.repeat(np.cumsum(nrows) - nrows, nrows)
    start = rs[cand][owner] + ri * rlen[cand][owner]
    k = np.searchsorted(d, start, side="right") - 1
    kc = np.maximum(k, 0)
    inside = (k >= 0) & (start + rlen[cand][owner] <= end[kc])
    good = np.bincount(owner, weights=~inside, minlength=cand.size) == 0
    if not good.any():
        return None
    keep = good[owner]
    return cand[owner[keep]], start[keep], kc[keep]


class RowReading:
    """A codelet whose vertices read some row fields row by row (`Codelet.rows_kernel`): the
    kernel group the plan runs in place of the codelet's own where forwarding moved rows."""

    def __init__(self, codelet):
        self.codelet = codelet

    def __getattr__(self, name):
        return getattr(self.codelet, name)

    def kernel(self):
        return self.codelet.rows_kernel()


def _read_by_rows(group, vert, field, row, new, row_bytes, isz):
    """The group with the rows (vertex, field, row number, new byte start) read elsewhere: the rows
    kernel's segments appended to its int parameters (Codelet.rows_kernel)."""
    codelet = group.codelet.codelet if isinstance(group.codelet, RowReading) else group.codelet
    names = [f.name for f in codelet.fields]
    q = np.array([codelet.row_fields.index(names[j]) for j in range(len(names)) if names[j] in codelet.row_fields])
    qof = np.full(len(names), -1, np.int64)
    qof[[j for j in range(len(names)) if names[j] in codelet.row_fields]] = q
    # segments: a row starts one where it does not follow the previous row of its read
    o = np.lexsort((row, field, vert))
    vert, field, row, new, row_bytes, isz = vert[o], field[o], row[o], new[o], row_bytes[o], isz[o]
    start = np.ones(vert.size, bool)
    start[1:] = (vert[1:] != vert[:-1]) | (field[1:] != field[:-1]) | (new[1:] != new[:-1] + row_bytes[:-1])
    start |= row == 0
    sv, sf, sr, sn, si = vert[start], field[start], row[start], new[start], isz[start]
    key = sv * len(names) + sf
    first = np.ones(key.size, bool)
    first[1:] = key[1:] != key[:-1]
    idx = np.arange(key.size) - np.maximum.accumulate(np.where(first, np.arange(key.size), 0))
    count = np.bincount(np.cumsum(first) - 1)
    segs = int(count.max())
    nip = len(codelet.int_params)
    width = nip + 1 + len(codelet.row_fields) * (1 + 2 * segs)
    ip = np.zeros((group.ip.shape[0], width), np.int64)
    ip[:, :nip] = group.ip[:, :nip]
    ip[:, nip] = segs
    col = nip + 1 + qof[sf] * (1 + 2 * segs)
    ip[sv[first], col[first]] = count
    ip[sv, col + 1 + 2 * idx] = sr
    ip[sv, col + 2 + 2 * idx] = sn // si
    return replace(group, codelet=RowReading(codelet), ip=ip)
