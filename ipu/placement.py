"""First-fit placement of tensor pieces on their tiles: the memory planner's hot loop.

Pieces are visited by tile, then in order of first use. Always-live pieces (a segment starting
before the program) are stacked from address 0; every other piece goes to the lowest address where
it fits between the placed pieces it *conflicts* with: those live at the same time, i.e. one of
whose segments of the program timeline meets one of its own (a function's temporaries have one
segment per call). Pieces whose last segment ended before the new piece starts are dropped.

The placed pieces that are still live (the *active list*) are kept sorted by address in blocks
of at most _CAP, so that inserting or removing a piece shifts one block; heaps by time find the
pieces to drop and the pieces of several segments whose current segment ends or next one starts.
A piece of several segments between two of them is *dormant* (a piece of a call pattern stays so
from its first segment's end on, live or not), and it keeps its *next segment start*: the start
of the first of its segments not over yet, so a new piece of one segment conflicts with it
exactly when that start is at or before the new piece's end. Each block keeps summaries over its awake
pieces (highest end, largest inner gap), over all of them, and over its dormant pieces (the
earliest and latest next segment start, their common call pattern): a block none of whose
dormant pieces can conflict with the new piece (all their next segments start after it ends, or
they are of its own call pattern within one call window, `_patterns`) is passed by its awake
summary, one all of whose dormant pieces do by its summary of all pieces, and only the rest are
checked piece by piece. Pieces with the same segments and size visited one after the other (a
variable's pieces on one tile) go one above the other while they fit below the next conflicting
piece, as each would, and are one entry of the active list (they live and leave together).
The lowest gap is then found block by block, and the result is the plain
first-fit scan's, address for address (tests/machine/test_placement.py checks it against that
scan on random pieces: calls, recomputed activations, any segments). At BERT-base size: 4 inline
layers (4.65 M pieces) 2.7 s where the scan took 9 s, one layer graph called 12 times (1.46 M
pieces, 1.07 M of them with 12 segments) 3.4 s where it took 7-9 s; with runs placed at once
1.5 s and 2.0 s (3.0 and 4.5 before). MobileNetV2 batch-1 training with PopART's Standard
recomputation (7.27 M pieces, 1.40 M of them recomputed: a forward segment and one from the rerun
to the gradient): 3.7 s (2.1 s without recomputation), where judging every dormant piece piece
by piece took 168 s.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from . import interpreted

__all__ = ["place"]

_CAP = 32  # pieces a block of the active list holds before it splits (measured: 16-32 fastest)
# pieces placed by the kernels' Python bodies before they are compiled (ipu/interpreted.py): the
# README's MLP has 18,260 (0.5 s in Python), where compiling the placement kernels takes 8-10 s
_PYTHON_PIECES = 60_000


@njit(cache=True)
def _overlap(ss, se, a0, a1, b0, b1):
    """True if a segment of [a0, a1) intersects a segment of [b0, b1) (each sorted by start)."""
    i = a0
    j = b0
    while i < a1 and j < b1:
        if se[i] < ss[j]:
            i += 1
        elif se[j] < ss[i]:
            j += 1
        else:
            return True
    return False


@njit(cache=True)
def _patterns(seg_ptr, seg_start, seg_end):
    """Per piece: the id of its call pattern (-1: none); per pattern: the least distance between
    two of its segment starts.

    A multi-segment piece whose segments all have one length has the pattern of its segments'
    start offsets from the first; pieces with one pattern are one window shifted by the same
    offsets (a function's temporaries, once per call). Two such pieces whose first segments span
    less than that least distance can only meet segment k against segment k, so they conflict
    exactly when their first segments meet. Grouping is exact: hashes are checked element by
    element against the pattern's first piece."""
    n = seg_ptr.shape[0] - 1
    pid = np.full(n, -1, np.int64)
    h = np.zeros(n, np.uint64)
    candidates = 0
    for p in range(n):
        p0 = seg_ptr[p]
        p1 = seg_ptr[p + 1]
        if p1 - p0 < 2:
            continue
        length = seg_end[p0] - seg_start[p0]
        uniform = True
        x = np.uint64(p1 - p0) * np.uint64(0x9E3779B97F4A7C15)
        for k in range(p0 + 1, p1):
            if seg_end[k] - seg_start[k] != length:
                uniform = False
                break
            x = (x ^ np.uint64(seg_start[k] - seg_start[p0])) * np.uint64(0x100000001B3)
        if uniform:
            h[p] = x | np.uint64(1)  # nonzero: a candidate
            candidates += 1
    if candidates == 0:  # no piece of several equal segments (no function called twice): no patterns
        return pid, np.zeros(0, np.int64)
    order = np.argsort(h)
    gap = np.empty(n, np.int64)
    npat = 0
    i = 0
    while i < n:
        j = i
        while j < n and h[order[j]] == h[order[i]]:
            j += 1
        if h[order[i]] != 0:
            # one hash: pieces equal to the first one of each pattern join it
            for a in range(i, j):
                p = order[a]
                if pid[p] >= 0:
                    continue
                pid[p] = npat
                r0 = seg_ptr[p]
                r1 = seg_ptr[p + 1]
                least = np.iinfo(np.int64).max
                for k in range(r0 + 1, r1):
                    d = seg_start[k] - seg_start[k - 1]
                    if d < least:
                        least = d
                gap[npat] = least
                for b in range(a + 1, j):
                    q = order[b]
                    if pid[q] >= 0 or seg_ptr[q + 1] - seg_ptr[q] != r1 - r0:
                        continue
                    q0 = seg_ptr[q]
                    same = True
                    for k in range(1, r1 - r0):
                        if seg_start[q0 + k] - seg_start[q0] != seg_start[r0 + k] - seg_start[r0]:
                            same = False
                            break
                    if same:
                        pid[q] = npat
                npat += 1
        i = j
    return pid, gap[:npat].copy()


@njit(cache=True)
def _heap_push(he, hp, nh, e, p):
    k = nh
    he[k] = e
    hp[k] = p
    while k > 0:
        u = (k - 1) >> 1
        if he[u] < he[k] or (he[u] == he[k] and hp[u] <= hp[k]):
            break
        he[u], he[k] = he[k], he[u]
        hp[u], hp[k] = hp[k], hp[u]
        k = u
    return nh + 1


@njit(cache=True)
def _heap_pop(he, hp, nh):
    nh -= 1
    he[0] = he[nh]
    hp[0] = hp[nh]
    k = 0
    while True:
        c = 2 * k + 1
        if c >= nh:
            break
        r = c + 1
        if r < nh and (he[r] < he[c] or (he[r] == he[c] and hp[r] < hp[c])):
            c = r
        if he[k] < he[c] or (he[k] == he[c] and hp[k] <= hp[c]):
            break
        he[c], he[k] = he[k], he[c]
        hp[c], hp[k] = hp[k], hp[c]
        k = c
    return nh


@njit(cache=True)
def _summarise(b, cnt, ba, bs, bd, bq, bf, bn, summ):
    """Block b's summary, over its *awake* pieces (live now: they conflict with any piece placed
    now): the first one's address (-1: none), the highest end, the largest gap between one and the
    highest end of those before it; over its dormant pieces (between two segments): how many,
    their common pattern (-2: several or none), their earliest first segment start, the earliest
    and the latest start of their next segments (the first not over yet); and the highest end and
    largest gap over all its pieces."""
    first = -1
    me = 0
    mg = -1
    nd = 0
    pat = -1
    minf = 0
    minn = 0
    maxn = 0
    for k in range(cnt[b]):
        if bd[b, k]:
            if nd == 0:
                pat = bq[b, k]
                minf = bf[b, k]
                minn = bn[b, k]
                maxn = bn[b, k]
            else:
                if bq[b, k] != pat:
                    pat = -2
                minf = min(minf, bf[b, k])
                minn = min(minn, bn[b, k])
                maxn = max(maxn, bn[b, k])
            nd += 1
            continue
        e = ba[b, k] + bs[b, k]
        if first < 0:
            first = ba[b, k]
            me = e
            continue
        g = ba[b, k] - me
        if g > mg:
            mg = g
        if e > me:
            me = e
    summ[b, 0] = first
    summ[b, 1] = me
    summ[b, 2] = mg
    summ[b, 3] = nd
    summ[b, 4] = pat if pat >= 0 else -2
    summ[b, 5] = minf
    summ[b, 8] = minn
    summ[b, 9] = maxn
    if nd == 0:  # all its pieces are awake
        summ[b, 6] = me
        summ[b, 7] = mg
        return
    me = ba[b, 0] + bs[b, 0]  # the same over all its pieces
    mg = -1
    for k in range(1, cnt[b]):
        g = ba[b, k] - me
        if g > mg:
            mg = g
        e = ba[b, k] + bs[b, k]
        if e > me:
            me = e
    summ[b, 6] = me
    summ[b, 7] = mg


@njit(cache=True)
def _same_segments(seg_ptr, seg_start, seg_end, p, q):
    """True if pieces p and q are live over the same segments."""
    p0 = seg_ptr[p]
    q0 = seg_ptr[q]
    if seg_ptr[p + 1] - p0 != seg_ptr[q + 1] - q0:
        return False
    for k in range(seg_ptr[p + 1] - p0):
        if seg_start[p0 + k] != seg_start[q0 + k] or seg_end[p0 + k] != seg_end[q0 + k]:
            return False
    return True


@njit(cache=True)
def _earliest_next(b, cnt, bd, bn, summ):
    """Block b's earliest next segment start of its dormant pieces, after one of them moved on."""
    m = np.iinfo(np.int64).max
    for k in range(cnt[b]):
        if bd[b, k] and bn[b, k] < m:
            m = bn[b, k]
    summ[b, 8] = m


@njit(cache=True)
def _last_block_at(blk, nblk, ba, a):
    """The position in blk of the last block whose first piece is at or below address a (0: none)."""
    lo = 0
    hi = nblk - 1
    while lo < hi:
        mid = (lo + hi + 1) >> 1
        if ba[blk[mid], 0] <= a:
            lo = mid
        else:
            hi = mid - 1
    return lo


@njit(cache=True)
def _find(blk, nblk, ba, bp, cnt, aq, q):
    """(position in blk, block, index) of piece q at address aq in the active list."""
    x = _last_block_at(blk, nblk, ba, aq)
    while x >= 0:  # the last block starting at or below aq, then down over equal addresses
        b = blk[x]
        lo = 0
        hi = cnt[b]
        while lo < hi:
            mid = (lo + hi) >> 1
            if ba[b, mid] < aq:
                lo = mid + 1
            else:
                hi = mid
        k = lo
        while k < cnt[b] and ba[b, k] == aq and bp[b, k] != q:
            k += 1
        if k < cnt[b] and bp[b, k] == q:
            return x, b, k
        x -= 1
    return -1, -1, -1


@njit(cache=True)
def _place(order, tile, size, seg_ptr, seg_start, seg_end, num_tiles, pid, least):
    n = order.shape[0]
    addr = np.zeros(n, np.int64)
    peak = np.zeros(num_tiles, np.int64)
    per_tile = np.zeros(num_tiles, np.int64)
    for p in range(n):
        per_tile[tile[p]] += 1
    maxb = (per_tile.max() if n else 0) // (_CAP // 2) + 2
    # blocks of the active list, each sorted by address: address, size, piece, dormant (between
    # two of its segments), first segment start, next segment start (of a dormant piece: the
    # first of its segments not over yet), pattern
    ba = np.empty((maxb, _CAP), np.int64)
    bs = np.empty((maxb, _CAP), np.int64)
    bp = np.empty((maxb, _CAP), np.int64)
    bd = np.empty((maxb, _CAP), np.bool_)
    bf = np.empty((maxb, _CAP), np.int64)
    bn = np.empty((maxb, _CAP), np.int64)
    bq = np.empty((maxb, _CAP), np.int64)
    cnt = np.zeros(maxb, np.int64)
    summ = np.zeros((maxb, 10), np.int64)  # _summarise
    blk = np.empty(maxb, np.int64)  # block ids in address order
    free_ids = np.empty(maxb, np.int64)
    he = np.empty(n, np.int64)  # active pieces by the end of their last segment (min-heap)
    hp = np.empty(n, np.int64)
    de = np.empty(n, np.int64)  # active pieces with several segments by their current segment's end
    dp = np.empty(n, np.int64)
    cur_seg = np.zeros(n, np.int64)  # a multi-segment piece's current segment (the first not over)
    active = np.zeros(n, np.bool_)
    i = 0
    while i < n:
        t = tile[order[i]]
        floor = 0
        j = i
        while j < n and tile[order[j]] == t and seg_start[seg_ptr[order[j]]] < 0:
            p = order[j]
            addr[p] = floor
            floor += size[p]
            j += 1
        if floor > peak[t]:
            peak[t] = floor
        nblk = 0
        for b in range(maxb):
            free_ids[b] = maxb - 1 - b
        nfree = maxb
        nh = 0
        nde = 0
        while j < n and tile[order[j]] == t:
            p = order[j]
            p0 = seg_ptr[p]
            p1 = seg_ptr[p + 1]
            f_p = seg_start[p0]
            e_p = seg_end[p0]
            last_p = seg_end[p1 - 1]
            multi = p1 - p0 > 1
            s = size[p]
            pid_p = pid[p]
            least_p = least[pid_p] if pid_p >= 0 else 0
            # multi-segment pieces whose current segment ended before this one starts move on to
            # their next one and fall dormant; dormant ones whose next segment has started wake.
            # Each has one event in the heap: its current segment's end, or its next one's start
            while nde > 0 and de[0] < f_p:
                q = dp[0]
                nde = _heap_pop(de, dp, nde)
                if not active[q]:
                    continue
                c = cur_seg[q]
                q1 = seg_ptr[q + 1]
                while c < q1 and seg_end[c] < f_p:
                    c += 1
                if c == q1:
                    continue  # over: it leaves below
                cur_seg[q] = c
                # a piece of a call pattern stays dormant from its first segment's end on (its
                # segments are short and many: waking it for each would cost more than it saves)
                dormant = seg_start[c] > f_p or pid[q] >= 0
                wake = seg_start[c] > f_p and pid[q] < 0
                nde = _heap_push(de, dp, nde, seg_start[c] - 1 if wake else seg_end[c], q)
                x, b, k = _find(blk, nblk, ba, bp, cnt, addr[q], q)
                if bd[b, k] and dormant:  # only its next start moves on (later)
                    old = bn[b, k]
                    bn[b, k] = seg_start[c]
                    summ[b, 9] = max(summ[b, 9], seg_start[c])
                    if old == summ[b, 8]:
                        _earliest_next(b, cnt, bd, bn, summ)
                    continue
                bd[b, k] = dormant
                bn[b, k] = seg_start[c]
                _summarise(b, cnt, ba, bs, bd, bq, bf, bn, summ)
            # pieces whose last segment ended before this one starts leave
            while nh > 0 and he[0] < f_p:
                q = hp[0]
                nh = _heap_pop(he, hp, nh)
                active[q] = False
                x, b, k = _find(blk, nblk, ba, bp, cnt, addr[q], q)
                for m in range(k, cnt[b] - 1):
                    ba[b, m] = ba[b, m + 1]
                    bs[b, m] = bs[b, m + 1]
                    bp[b, m] = bp[b, m + 1]
                    bd[b, m] = bd[b, m + 1]
                    bf[b, m] = bf[b, m + 1]
                    bn[b, m] = bn[b, m + 1]
                    bq[b, m] = bq[b, m + 1]
                cnt[b] -= 1
                if cnt[b] == 0:
                    for y in range(x, nblk - 1):
                        blk[y] = blk[y + 1]
                    nblk -= 1
                    free_ids[nfree] = b
                    nfree += 1
                else:
                    _summarise(b, cnt, ba, bs, bd, bq, bf, bn, summ)
            # the lowest gap between the conflicting pieces. Awake pieces conflict with any new
            # piece. A dormant piece's segments not over start at its next segment start or later:
            # none meets this piece if that is after this piece's last end, and one does if it is
            # within this piece's first segment (or, for a piece of one segment, its only one).
            # A block is passed by its summary of awake pieces when none of its dormant pieces
            # can conflict (their next starts all after this piece's end, or all of this piece's
            # own call pattern within one call window), by its summary of all pieces when all do.
            cur = floor
            limit = np.iinfo(np.int64).max  # the lowest conflicting piece above the gap found
            for x in range(nblk):
                b = blk[x]
                use = 0  # which summary holds: 0 none (piece by piece), 1 awake pieces, 2 all pieces
                if summ[b, 3] == 0 or summ[b, 8] > last_p:
                    use = 1
                elif summ[b, 9] <= e_p:
                    use = 2
                elif multi and summ[b, 4] == pid_p and pid_p >= 0 and e_p - summ[b, 5] < least_p:
                    use = 1
                if use:
                    first = summ[b, 0] if use == 1 else ba[b, 0]
                    if first < 0:
                        continue  # only dormant pieces, none in the way
                    if first - cur >= s:
                        limit = first
                        break
                    if summ[b, 2 if use == 1 else 7] < s:
                        cur = max(cur, summ[b, 1 if use == 1 else 6])
                        continue
                found = False
                for k in range(cnt[b]):
                    if bd[b, k] and bn[b, k] > e_p:
                        if bn[b, k] > last_p:
                            continue  # its next segment starts after this piece's end
                        # a piece of several segments, against the dormant piece's segments from
                        # its next one (this piece's first segment ends before that starts)
                        if bq[b, k] == pid_p and pid_p >= 0 and e_p - bf[b, k] < least_p:
                            continue  # same call pattern: segment k meets only segment k
                        q = bp[b, k]
                        if not _overlap(seg_start, seg_end, p0 + 1, p1, cur_seg[q], seg_ptr[q + 1]):
                            continue
                    if ba[b, k] - cur >= s:
                        found = True
                        limit = ba[b, k]
                        break
                    e = ba[b, k] + bs[b, k]
                    if e > cur:
                        cur = e
                if found:
                    break
            addr[p] = cur
            # the pieces after it with the same segments and size, while they fit above it: the same
            # pieces conflict with them (no time passes), so each would go at the lowest gap above
            # the one before. They live and leave together: one entry of the active list.
            run = s
            j += 1
            if s > 0:
                while (j < n and tile[order[j]] == t and size[order[j]] == s and cur + run + s <= limit
                       and _same_segments(seg_ptr, seg_start, seg_end, p, order[j])):
                    addr[order[j]] = cur + run
                    run += s
                    j += 1
            s = run
            # insert after the pieces at addresses <= cur, in the last block starting at <= cur
            if nblk == 0:
                nfree -= 1
                blk[0] = free_ids[nfree]
                cnt[blk[0]] = 0
                nblk = 1
            x = _last_block_at(blk, nblk, ba, cur)
            b = blk[x]
            k = cnt[b]
            while k > 0 and ba[b, k - 1] > cur:
                ba[b, k] = ba[b, k - 1]
                bs[b, k] = bs[b, k - 1]
                bp[b, k] = bp[b, k - 1]
                bd[b, k] = bd[b, k - 1]
                bf[b, k] = bf[b, k - 1]
                bn[b, k] = bn[b, k - 1]
                bq[b, k] = bq[b, k - 1]
                k -= 1
            ba[b, k] = cur
            bs[b, k] = s
            bp[b, k] = p
            bd[b, k] = False
            bf[b, k] = f_p
            bn[b, k] = f_p
            bq[b, k] = pid_p
            cnt[b] += 1
            if cnt[b] == _CAP:  # split: the upper half becomes a new block after it
                nfree -= 1
                c = free_ids[nfree]
                half = _CAP // 2
                for m in range(half):
                    ba[c, m] = ba[b, half + m]
                    bs[c, m] = bs[b, half + m]
                    bp[c, m] = bp[b, half + m]
                    bd[c, m] = bd[b, half + m]
                    bf[c, m] = bf[b, half + m]
                    bn[c, m] = bn[b, half + m]
                    bq[c, m] = bq[b, half + m]
                cnt[c] = _CAP - half
                cnt[b] = half
                for y in range(nblk, x + 1, -1):
                    blk[y] = blk[y - 1]
                blk[x + 1] = c
                nblk += 1
                _summarise(c, cnt, ba, bs, bd, bq, bf, bn, summ)
            _summarise(b, cnt, ba, bs, bd, bq, bf, bn, summ)
            active[p] = True
            nh = _heap_push(he, hp, nh, last_p, p)
            if multi:
                cur_seg[p] = p0
                nde = _heap_push(de, dp, nde, e_p, p)
            if cur + s > peak[t]:
                peak[t] = cur + s
        i = j
    return addr, peak


def place(order, tile, size, seg_ptr, seg_start, seg_end, num_tiles, visited=None):
    """Tile-local addresses of pieces visited in `order` (by tile, always-live first, then by first
    use) and each tile's high-water mark. Piece p is live over segments seg_start/seg_end
    [seg_ptr[p]:seg_ptr[p + 1]] (sorted, disjoint); a first segment starting below 0 is always live.
    `visited`: (tile, first segment start, size) of the pieces in `order`, when the caller has them
    (ipu.memory reads them off its sorted keys)."""
    order, tile, size, seg_ptr, seg_start, seg_end = (np.ascontiguousarray(x, np.int64)
                                                      for x in (order, tile, size, seg_ptr, seg_start, seg_end))
    n = order.size
    # the pieces renumbered in the order they are visited, so the kernels read their tables front
    # to back (gathered by NumPy here) rather than at random: at BERT-base size (5.8 M pieces) the
    # planner's time was mostly waiting for memory. The addresses do not depend on the numbering
    # (ties between pieces are broken by the order of visit; patterns are only compared).
    counts = np.diff(seg_ptr)
    if counts.size and counts.min() == counts.max() == 1 and seg_ptr[0] == 0:  # piece p's segment is p
        ptr = np.arange(n + 1, dtype=np.int64)
        if visited is None:
            args = (tile[order], size[order], seg_start[order], seg_end[order])
        else:
            args = (visited[0], visited[2], visited[1], seg_end[order])
    else:
        counts = counts[order]
        first = seg_ptr[:-1][order]
        ptr = np.zeros(n + 1, np.int64)
        np.cumsum(counts, out=ptr[1:])
        segs = np.repeat(first - ptr[:-1], counts) + np.arange(int(ptr[-1]), dtype=np.int64)
        args = (tile[order], size[order], seg_start[segs], seg_end[segs])
        del segs, first
    args = (np.arange(n, dtype=np.int64), args[0], args[1], ptr, args[2], args[3])
    del counts
    pid, least = interpreted.call(_patterns, n, args[3], args[4], args[5], budget=_PYTHON_PIECES)
    local, peak = interpreted.call(_place, n, *args, int(num_tiles), pid, least, budget=_PYTHON_PIECES)
    addr = np.empty(n, np.int64)
    addr[order] = local
    return addr, peak


_Z = np.zeros(0, np.int64)
_ONE = np.zeros(1, np.int64)  # an empty pointer table (n + 1 entries)
interpreted.register(_patterns, _ONE, _Z, _Z)
interpreted.register(_place, _Z, _Z, _Z, _ONE, _Z, _Z, 1, _Z, _Z)
