"""Reading the profile document: files, the run-length and trace encodings (docs/profile-format.md).

This mirrors the decoders of ipu/profile.py so that reading a profile never imports the simulator
(and its Numba start-up cost).
"""
from __future__ import annotations

import gzip
import json
import os
import re

import numpy as np

SCHEMA = "ipu-sim-profile"
SUPPORTED_VERSIONS = (1,)

KIND_CLASS = {
    "compute": "compute",
    "exchange": "exchange",
    "sync": "sync",
    "host_to_device": "host",
    "device_to_host": "host",
    "remote_load": "streaming",
    "remote_store": "streaming",
    "code_load": "streaming",
    "branch": "control",
}
CLASSES = ("compute", "exchange", "sync", "host", "streaming", "control")
CLASS_LABELS = {"streaming": "streaming memory"}
STREAMING_KINDS = ("remote_load", "remote_store", "code_load")

# profile.json, profile-1.json, ... (sessions of a process); .instance<k> for PopDist instance k
_PROFILE_RE = re.compile(r"^profile(-\d+)?(\.instance\d+)?\.json(\.gz)?$")


class ProfileError(Exception):
    """A file that is not a profile this version can read."""


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
    """The document of a profile file (or of the first profile in a directory)."""
    f = find_profiles(path)[0]
    opener = gzip.open if f.endswith(".gz") else open
    try:
        with opener(f, "rt", encoding="utf-8") as fh:
            doc = json.load(fh)
    except (OSError, json.JSONDecodeError) as e:
        raise ProfileError(f"{f}: not a readable JSON profile ({e})") from None
    check(doc, f)
    doc.setdefault("_file", f)
    return doc


def check(doc, where: str = "profile") -> None:
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        raise ProfileError(f"{where}: not an {SCHEMA} document")
    if doc.get("version") not in SUPPORTED_VERSIONS:
        raise ProfileError(f"{where}: profile version {doc.get('version')} is not supported "
                           f"(this reader knows {SUPPORTED_VERSIONS})")


def unrle(runs) -> np.ndarray:
    if not runs:
        return np.zeros(0, np.int64)
    r = np.asarray(runs, np.int64).reshape(-1, 2)
    return np.repeat(r[:, 0], r[:, 1])


def step_cycles(doc) -> np.ndarray:
    return np.asarray([s["cycles"] for s in doc["steps"]], np.int64)


def decode_trace(doc) -> tuple[np.ndarray, np.ndarray]:
    """(step ids, start cycles) of every executed step kept in the trace."""
    ex = doc.get("execution") or {}
    trace = ex.get("trace")
    if not trace or not trace.get("length"):
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    if trace.get("encoding") != "runs-v1":
        raise ProfileError(f"unknown trace encoding {trace.get('encoding')!r}")
    n = int(trace["length"])
    t = np.asarray(trace["runs"], np.int64).reshape(-1, 3)
    parts = [np.tile(np.arange(f, f + c, dtype=np.int64), r) for f, c, r in t]
    ids = np.concatenate(parts)[:n] if parts else np.zeros(0, np.int64)
    delta = step_cycles(doc)[ids]
    cs = np.concatenate(([0], np.cumsum(delta)))
    exc = np.asarray(trace.get("start_exceptions", []), np.int64).reshape(-1, 2)
    anchor_idx = np.concatenate(([0], exc[:, 0]))
    anchor_val = np.concatenate(([int(trace["first_start"])], exc[:, 1]))
    k = np.searchsorted(anchor_idx, np.arange(n), side="right") - 1
    starts = anchor_val[k] + cs[:n] - cs[anchor_idx[k]]
    return ids, starts


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
