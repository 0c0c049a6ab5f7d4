"""The Chrome / Perfetto export is valid trace-event JSON that matches the execution."""
import json

import pytest

import profiler
from profiler.trace import PID_PROGRAM, PID_TILES, build_trace, parse_tiles
from profiler_helpers import SCALED_ADD_256


def _check_trace_events(tr):
    assert isinstance(tr, dict) and isinstance(tr["traceEvents"], list)
    assert tr.get("displayTimeUnit") in (None, "ms", "ns")
    for e in tr["traceEvents"]:
        assert e["ph"] in ("X", "M", "C", "i", "B", "E")
        assert isinstance(e["name"], str)
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        if e["ph"] == "M":
            assert e["name"] in ("process_name", "thread_name", "thread_sort_index", "process_sort_index")
            assert isinstance(e["args"], dict)
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert isinstance(e.get("cat", ""), str)
            assert isinstance(e.get("args", {}), dict)


def test_trace_is_valid_trace_event_json(profile_file, tmp_path):
    doc = profiler.load_profile(profile_file)
    tr = json.loads(json.dumps(build_trace(doc, [0, 1])))  # plain JSON, nothing exotic
    _check_trace_events(tr)
    x = [e for e in tr["traceEvents"] if e["ph"] == "X"]
    main = [e for e in x if e["pid"] == PID_PROGRAM and e["tid"] == 0]
    ex = doc["execution"]
    assert len(main) == ex["trace"]["length"] == ex["steps_executed"]
    clock = doc["target"]["clock_hz"]
    assert sum(e["args"]["cycles"] for e in main) == ex["total_cycles"]
    last = max(main, key=lambda e: e["ts"])
    assert last["ts"] + last["dur"] == pytest.approx(ex["total_cycles"] / clock * 1e6)
    # events of one lane never overlap (no branch divergence here)
    ends = sorted((e["ts"], e["ts"] + e["dur"]) for e in main)
    assert all(b[0] >= a[1] - 1e-9 for a, b in zip(ends, ends[1:]))
    # tile lanes: tile 0 runs the ScaledAdd of the loop, tile 1 the function's
    tile0 = [e for e in x if e["pid"] == PID_TILES and e["tid"] == 0 and e["cat"] == "compute"]
    assert len(tile0) == 3 and all(e["args"]["cycles"] == SCALED_ADD_256 for e in tile0)
    names = {e["args"]["name"] for e in tr["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}
    assert {"all steps", "compute", "exchange", "sync", "tile 0", "tile 1"} <= names


def test_tile_selection(profile_file):
    doc = profiler.load_profile(profile_file)
    assert parse_tiles("0-2,3", doc) == [0, 1, 2, 3]
    assert parse_tiles("none", doc) == []
    assert len(parse_tiles("busiest:2", doc)) == 2
    assert 0 in parse_tiles(None, doc)
    with pytest.raises(ValueError):
        parse_tiles("99", doc)
