"""The reading API, the terminal report, --json totals and compare agree with the document."""
import io
import json

import numpy as np
import pytest
from rich.console import Console

import profiler
from profiler import build_profile
from profiler import analysis, cli
from profiler import write_document
from profiler.report import render, render_compare
from profiler_helpers import SCALED_ADD_256, known_program, load_json


def test_api_is_shaped_like_libpva(profile_file, ran_known):
    exe, engine, expected = ran_known
    r = profiler.open_report(profile_file)
    assert r is not None and profiler.openReport is not None
    t = r.compilation.target
    assert t.numTiles == t.num_tiles == exe.target.num_tiles
    assert t.bytesPerTile == exe.target.bytes_per_tile and t.numIPUs == 1
    tiles = r.compilation.tiles
    assert len(tiles) == exe.target.num_tiles
    total = exe.plan.tile_total()
    for i, tile in enumerate(tiles):
        assert tile.memory.total.includingGaps == total[i]
        assert tile.memory.category.vertexCode.total == exe.plan.categories["vertex_code"][i]
        assert tile.memory.category.controlCode.total == exe.plan.categories["control_code"][i]
        assert sum(v for _, v in tile.memory.category.items()) == tile.memory.total.total
        assert tile.memory.alwaysLiveBytes + tile.memory.category.temporaries.total == total[i]
    steps = r.execution.steps
    assert len(steps) == len(engine.log)
    assert sum(s.ipus[0].cycles for s in steps) == expected == r.execution.totalCycles
    assert steps[0].cyclesFrom == 0 and steps[1].cyclesFrom == steps[0].cyclesTo
    sa = [s for s in steps if s.program.name == "scaled_add"]
    assert len(sa) == 3 and all(s.cycles == SCALED_ADD_256 for s in sa)
    assert sa[0].tile_cycles[0] == SCALED_ADD_256 and sa[0].tile_cycles[1:].sum() == 0
    assert sa[0].program.op == "my_op"
    live = r.compilation.livenessProgramSteps
    assert [s.notAlwaysLiveMemory.bytes for s in live] == exe.liveness.tolist()
    peak = max(live, key=lambda s: s.notAlwaysLiveMemory.bytes)
    assert peak.program.name in ("fill t", "fn_add", "t back")
    assert r.compilation.graph.numComputeSets == 2
    busy = r.execution.busy_cycles_by_tile()
    assert busy["compute"][0] == 3 * SCALED_ADD_256


def test_open_report_of_a_directory(tmp_path, profile_file):
    import os
    d = os.path.dirname(profile_file)
    assert profiler.open_report(d).path == profile_file
    with pytest.raises(profiler._format.ProfileError):
        profiler.open_report(tmp_path / "nothing-here")


def test_json_totals_agree_with_the_document(profile_file, capsys):
    assert cli.main(["report", profile_file, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    doc = load_json(profile_file)
    assert out["cycles"]["total"] == doc["execution"]["total_cycles"]
    assert out["cycles"]["by_class"] == doc["execution"]["cycles_by_class"]
    assert out["memory"]["total"] == doc["memory"]["total"]
    assert out["memory"]["by_category"] == doc["memory"]["totals"]
    assert out["memory"]["free"] == doc["memory"]["free"]
    assert out["memory"]["not_always_live_peak"] == doc["liveness"]["peak"]["bytes"]
    assert out["steps"] == len(doc["steps"])
    # the short form reports too
    assert cli.main([profile_file, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == out


def test_terminal_report_shows_the_totals(profile_file):
    doc = profiler.load_profile(profile_file)
    buf = io.StringIO()
    render(doc, Console(file=buf, width=140, color_system=None))
    text = buf.getvalue()
    total = doc["execution"]["total_cycles"]
    for want in (f"{total:,}", "Memory", "Worst tiles", "Costliest steps", "Costliest ops", "scaled_add",
                 "compute", "exchange", "sync", "vertex_code", "Memory over tiles"):
        assert want in text, want


def test_report_cli_writes_html_and_trace(profile_file, tmp_path, capsys):
    html, trace = tmp_path / "p.html", tmp_path / "t.json"
    assert cli.main(["report", profile_file, "--html", str(html), "--trace", str(trace), "--trace-tiles", "0-1"]) == 0
    assert html.stat().st_size > 1000 and "<script" in html.read_text()
    tr = json.loads(trace.read_text())
    assert tr["otherData"]["tiles"] == [0, 1]


def test_html_and_compare_of_a_directory_of_sessions_name_the_profile_used(profile_file, tmp_path, capsys):
    # a script with two sessions writes profile.json and profile-1.json: the page, trace and compare
    # use the first, and say so (and how to pick the other)
    doc = profiler.load_profile(profile_file)  # rewritten below: its _file (where it was read) is not kept
    for name in ("profile.json", "profile-1.json"):
        write_document(doc, str(tmp_path / name))
    html = tmp_path / "p.html"
    assert cli.main(["report", str(tmp_path), "--html", str(html)]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "2 profiles (one per session): the page shows" in err and "profile-1.json" in err
    assert cli.main(["compare", str(tmp_path), profile_file, "--json"]) == 0
    err = " ".join(capsys.readouterr().err.split())
    assert "compare reads" in err and "profile-1.json" in err


def test_compare(tmp_path, capsys):
    exe, e, _ = known_program()
    e.run()
    a = build_profile(exe, e)
    e.run()
    b = build_profile(exe, e)
    pa, pb = tmp_path / "a.json", tmp_path / "b.json"
    write_document(a, str(pa))
    write_document(b, str(pb))
    cmp = analysis.compare(a, b)
    assert cmp["totals"]["total_cycles"]["delta"] == e.cycles // 2
    assert cmp["totals"]["memory_total"]["delta"] == 0
    assert cmp["ops"] and cmp["ops"][0]["delta"] > 0
    assert cli.main(["compare", str(pa), str(pb), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["totals"]["total_cycles"]["b"] == e.cycles
    buf = io.StringIO()
    render_compare(cmp, Console(file=buf, width=140, color_system=None))
    assert "total_cycles" in buf.getvalue()


def test_histogram_and_worst_tiles(profile_file):
    doc = profiler.load_profile(profile_file)
    tot = profiler._format.tile_total(doc)
    h = analysis.histogram(tot, doc["target"]["bytes_per_tile"], 8)
    assert sum(n for _, _, n in h) == tot.size
    w = analysis.worst_tiles(doc, 3)
    assert [r["tile"] for r in w][0] == int(np.argmax(tot))
