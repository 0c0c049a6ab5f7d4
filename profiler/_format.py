"""The profile format, in one place: schema and versions, step classes, the run-length and trace
encodings (both directions), reading and writing files (docs/profile-format.md).

`document.py` builds documents with these encoders; the reports, the HTML page and the API read
them with these decoders. Nothing here imports the simulator (reading a profile never pays
Numba's start-up).
"""
from __future__ import annotations

import gzip
import json
import os
import re

import numpy as np

from .schema import SCHEMA, SUPPORTED_VERSIONS, ProfileError, validate  # noqa: F401  (SCHEMA: read from here)

VERSION = SUPPORTED_VERSIONS[-1]  # the major version written: readers refuse another one
# fields added within the major version (1: the `code` section, the `streaming` class; 2: each
# step's `class`)
MINOR_VERSION = 2

# The profile classes of the compute / exchange / sync split, in the order reports show them;
# every step carries its class (its step kind's, ipu.kinds.StepKind), and a class outside this
# list (a program kind of one's own) follows them.
CLASSES = ("compute", "exchange", "sync", "host", "streaming", "control")
CLASS_LABELS = {"streaming": "streaming memory"}
# Documents before minor version 2 carry no step class: the step kinds of those versions had
# these (a fixed reading of old files; new step kinds bring their class in the document).
_CLASS_BEFORE_MINOR_2 = {"compute": "compute", "exchange": "exchange", "sync": "sync", "host_to_device": "host",
                         "device_to_host": "host", "remote_load": "streaming", "remote_store": "streaming",
                         "code_load": "streaming", "branch": "control"}


def step_class(step: dict) -> str:
    """The profile class of a step row of a document."""
    c = step.get("class")
    return c if c else _CLASS_BEFORE_MINOR_2.get(step["kind"], step["kind"])


def kind_classes(doc: dict) -> dict:
    """step kind -> profile class, for every step kind of a document."""
    return {s["kind"]: step_class(s) for s in doc["steps"]}


def class_order(classes) -> list:
    """Classes in the order reports show them: CLASSES first, any others after, as given."""
    known = [c for c in CLASSES if c in classes]
    return known + [c for c in dict.fromkeys(classes) if c not in CLASSES]

# profile.json, profile-1.json, ... (sessions of a process); .instance<k> for PopDist instance k
_PROFILE_RE = re.compile(r"^profile(-\d+)?(\.instance\d+)?\.json(\.gz)?$")


def find_profiles(path) -> list[str]:
    """Profile files of a path: the file itself, or the profile*.json files of a directory (the
    first session's profile.json first)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        names = [n for n in os.listdir(path) if _PROFILE_RE.match(n)]

        def key(n):
            m = re.match(r"^profile-(\d+)", n)
            i = re.search(r"\.instance(\d+)\.", n)
            return (int(m.group(1)) if m else 0, int(i.group(1)) if i else -1)

        names.sort(key=key)
        if not names:
            raise ProfileError(f"no profile.json in directory {path!r} (was the script run with profiling on?)")
        return [os.path.join(path, n) for n in names]
    if not os.path.exists(path):
        raise ProfileError(f"no such profile file or directory: {path!r}")
    return [path]


def load(path) -> dict:
    """The document of a profile file (or of the first profile in a directory), checked against
    the schema (profiler/schema.py): anything else raises ProfileError saying what is wrong."""
    f = find_profiles(path)[0]
    try:
        with open(f, "rb") as fh:
            raw = fh.read()
    except OSError as e:
        raise ProfileError(f"{f}: cannot read the file ({e.strerror or e})") from None
    if raw[:2] == b"\x1f\x8b":  # gzip, whatever the file is called
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError) as e:
            raise ProfileError(f"{f}: a damaged gzip file ({e})") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ProfileError(f"{f}: not a profile: the file is binary, not JSON text (byte {e.start} is "
                           f"0x{raw[e.start]:02x}); profiles are profile.json files written by ipu-sim") from None
    if not text.strip():
        raise ProfileError(f"{f}: the file is empty (was the profile still being written?)")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as e:
        raise ProfileError(f"{f}: not valid JSON at line {e.lineno}, column {e.colno}: {e.msg}") from None
    check(doc, f)
    doc["_file"] = f  # where this reader found it (never a path a rewritten document carried)
    return doc


def check(doc, where: str = "profile") -> None:
    """Raise ProfileError unless `doc` is a profile document this reader can read."""
    validate(doc, where)


def write_document(doc: dict, path) -> str:
    """Write a profile document atomically (a reader never sees half a file)."""
    path = os.fspath(path)
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as fh:  # without the reader's note of where it came from
        json.dump({k: v for k, v in doc.items() if k != "_file"}, fh, separators=(",", ":"))
    os.replace(tmp, path)
    return path


# ------------------------------------------------------------------------------------------------
# encodings


def rle(a) -> list:
    """Run-length encode a 1-D integer array as [value, count, value, count, ...]."""
    a = np.asarray(a).reshape(-1)
    if a.size == 0:
        return []
    brk = np.flatnonzero(a[1:] != a[:-1]) + 1
    starts = np.concatenate(([0], brk))
    counts = np.diff(np.append(starts, a.size))
    out = np.empty(2 * starts.size, np.int64)
    out[0::2] = a[starts]
    out[1::2] = counts
    return out.tolist()


def unrle(runs) -> np.ndarray:
    """Inverse of `rle`."""
    if runs is None or not len(runs):
        return np.zeros(0, np.int64)
    r = np.asarray(runs, np.int64).reshape(-1, 2)
    return np.repeat(r[:, 0], r[:, 1])


def encode_trace(step_ids, start_cycles, step_cycles) -> dict:
    """Compact form of an execution trace (`execution.trace`, encoding runs-v1): runs of
    consecutive step ids as [first_step, count, repeat] triples, plus the few start cycles that
    do not follow from the previous entry's start and its step's cycles."""
    ids = np.asarray(step_ids, np.int64)
    starts = np.asarray(start_cycles, np.int64)
    n = int(ids.size)
    if n == 0:
        return {"encoding": "runs-v1", "length": 0, "runs": [], "first_start": 0, "start_exceptions": []}
    brk = np.ones(n, bool)
    brk[1:] = ids[1:] != ids[:-1] + 1
    seg_at = np.flatnonzero(brk)
    seg_first = ids[seg_at]
    seg_len = np.diff(np.append(seg_at, n))
    same = np.zeros(seg_at.size, bool)
    same[1:] = (seg_first[1:] == seg_first[:-1]) & (seg_len[1:] == seg_len[:-1])
    grp_at = np.flatnonzero(~same)
    grp_rep = np.diff(np.append(grp_at, seg_at.size))
    triples = np.empty((grp_at.size, 3), np.int64)
    triples[:, 0] = seg_first[grp_at]
    triples[:, 1] = seg_len[grp_at]
    triples[:, 2] = grp_rep
    cyc = np.asarray(step_cycles, np.int64)[ids]
    expected = starts[:-1] + cyc[:-1]
    exc = np.flatnonzero(starts[1:] != expected) + 1
    exceptions = np.stack([exc, starts[exc]], axis=1) if exc.size else np.zeros((0, 2), np.int64)
    return {
        "encoding": "runs-v1",
        "length": n,
        "runs": triples.reshape(-1).tolist(),
        "first_start": int(starts[0]),
        "start_exceptions": exceptions.reshape(-1).tolist(),
    }


def decode_runs(trace: dict | None, step_cycles) -> tuple[np.ndarray, np.ndarray]:
    """(step ids, start cycles) of an encoded trace (`encode_trace`'s inverse)."""
    if not trace or not trace.get("length"):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if trace.get("encoding") != "runs-v1":
        raise ProfileError(f"unknown trace encoding {trace.get('encoding')!r}")
    n = int(trace["length"])
    t = np.asarray(trace["runs"], np.int64).reshape(-1, 3)
    parts = [np.tile(np.arange(f, f + c, dtype=np.int64), r) for f, c, r in t]
    ids = np.concatenate(parts)[:n] if parts else np.zeros(0, np.int64)
    delta = np.asarray(step_cycles, np.int64)[ids]
    cs = np.concatenate(([0], np.cumsum(delta)))
    exc = np.asarray(trace.get("start_exceptions", []), np.int64).reshape(-1, 2)
    anchor_idx = np.concatenate(([0], exc[:, 0]))
    anchor_val = np.concatenate(([int(trace["first_start"])], exc[:, 1]))
    k = np.searchsorted(anchor_idx, np.arange(n), side="right") - 1
    starts = anchor_val[k] + cs[:n] - cs[anchor_idx[k]]
    return ids, starts


def step_cycles(doc) -> np.ndarray:
    return np.asarray([s["cycles"] for s in doc["steps"]], np.int64)


def decode_trace(doc) -> tuple[np.ndarray, np.ndarray]:
    """(step ids, start cycles) of every executed step kept in a document's trace."""
    return decode_runs((doc.get("execution") or {}).get("trace"), step_cycles(doc))


def tile_cycles(doc, step: dict, num_tiles: int | None = None) -> np.ndarray | None:
    """Cycles of one step on every tile, or None when the step has no per-tile work (a sync)."""
    i = step.get("tile_cycles")
    if i is None:
        return None
    return unrle(doc["tile_cycles_table"][i])


def memory_by_category(doc) -> dict:
    """category -> int64[num_tiles]."""
    m = doc["memory"]
    return {c: unrle(m["tiles"][c]) for c in m["categories"]}


def tile_total(doc) -> np.ndarray:
    return unrle(doc["memory"]["tile_total"])
