"""Code loaded from streaming memory in the profile: the document's `code` section adds up, loaded
code is not always live, code loads count as streaming memory, and the terminal report, compare and
--json show them."""
import io
import json

import numpy as np
import pytest
from rich.console import Console

from profiler import build_profile
from profiler._format import MINOR_VERSION, VERSION, unrle
from profiler import analysis, cli
from profiler import write_document
from profiler.report import render, render_compare
from profiler_helpers import code_load_program


@pytest.fixture(scope="module")
def loaded():
    exe, e = code_load_program()
    e.run()
    return exe, e, build_profile(exe, e)


@pytest.fixture(scope="module")
def resident():
    exe, e = code_load_program(load=False)
    e.run()
    return exe, e, build_profile(exe, e)


def test_code_section_adds_up(loaded, resident):
    exe, _, doc = loaded
    assert doc["version"] == VERSION == 1 and doc["minor_version"] == MINOR_VERSION >= 1
    c = doc["code"]
    mem = doc["memory"]
    res, load = unrle(c["resident"]), unrle(c["loaded_peak"])
    everything, saved = unrle(c["all_resident"]), unrle(c["saved"])
    n = exe.target.num_tiles
    assert res.size == load.size == everything.size == saved.size == n
    # resident code is the vertex_code category, the loaded peak the code_loaded category
    assert np.array_equal(res, unrle(mem["tiles"]["vertex_code"]))
    assert np.array_equal(load, unrle(mem["tiles"]["code_loaded"]))
    assert mem["categories"].index("code_loaded") == mem["categories"].index("vertex_code") + 1
    # all code resident is what the same program compiles to without code loading
    _, _, rdoc = resident
    assert rdoc["code"] is None and "code_loaded" not in rdoc["memory"]["categories"]
    assert np.array_equal(everything, unrle(rdoc["memory"]["tiles"]["vertex_code"]))
    assert np.array_equal(saved, everything - res - load) and (saved >= 0).all()
    t = c["totals"]
    assert t["resident"] == res.sum() and t["loaded_peak"] == load.sum() and t["all_resident"] == everything.sum()
    assert t["with_loading"] == t["resident"] + t["loaded_peak"]
    assert t["saved"] == t["all_resident"] - t["with_loading"] == saved.sum()
    # f16 (512 B on tiles 0 and 1) and cast (384 B on tile 0) are never live together
    fns = {f["name"]: f for f in c["functions"]}
    assert set(fns) == {"f16", "cast"}
    assert fns["f16"]["bytes"] == unrle(fns["f16"]["tile_bytes"]).sum() and fns["f16"]["tiles"] == 2
    assert fns["cast"]["tiles"] == 1 and unrle(fns["cast"]["tile_bytes"])[0] == fns["cast"]["max_tile"]
    assert load[0] == max(fns["f16"]["max_tile"], fns["cast"]["max_tile"])
    assert saved[0] == min(fns["f16"]["max_tile"], fns["cast"]["max_tile"]) > 0
    b = c["busiest_tile"]
    assert b["tile"] == 0 and b["with_loading"] == res[0] + load[0] and b["saved"] == saved[0]
    pk = c["peak_tile"]
    assert pk["all_resident"]["bytes"] == everything.max() and pk["with_loading"]["bytes"] == (res + load).max()
    assert pk["saved"] == everything.max() - (res + load).max() > 0
    # loaded code over the program positions
    cl = exe.code_liveness
    assert c["live"] == cl.live.tolist() and c["live_busiest"] == cl.live_busiest.tolist()
    assert len(c["live"]) == doc["liveness"]["positions"] and c["exact"]
    assert c["live_peak"]["bytes"] == max(c["live"])
    assert [f["intervals"] for f in c["functions"]] == [[list(x) for x in v["intervals"]] for v in cl.functions.values()]


def test_load_steps_and_their_cycles(loaded):
    exe, e, doc = loaded
    c = doc["code"]
    loads = c["load_steps"]
    assert [x["step"] for x in loads] == exe.code_liveness.load_steps and len(loads) == 3
    by_id = {s["id"]: s for s in doc["steps"]}
    for x in loads:
        s = exe.steps[x["step"]]
        assert by_id[x["step"]]["kind"] == "code_load"
        assert x["cycles"] == s.cycles == x["sync_cycles"] + x["transfer_cycles"] > 0
        assert x["bytes"] == s.bytes_moved == int(s.payload.tile_bytes.sum())
        assert x["max_tile_bytes"] == int(s.payload.tile_bytes.max())
        assert x["executions"] == 1 and x["executed_cycles"] == x["cycles"]
    assert [x["functions"] for x in loads] == [["f16"], ["cast"], ["f16"]]
    assert c["load_cycles"]["executed_cycles"] == sum(x["cycles"] for x in loads)
    # code loads are streaming memory in the cycle split, and in the trace
    ex = doc["execution"]
    assert ex["cycles_by_kind"]["code_load"] == c["load_cycles"]["executed_cycles"]
    assert ex["cycles_by_class"]["streaming"] == ex["cycles_by_kind"]["code_load"]
    assert sum(ex["cycles_by_class"].values()) == ex["total_cycles"] == e.cycles
    ids, _ = e.log.arrays()
    assert [i for i in ids.tolist() if exe.steps[i].kind == "code_load"] == [x["step"] for x in loads]


def test_loaded_code_is_not_always_live(loaded):
    doc = loaded[2]
    mem = doc["memory"]
    tiles = {k: unrle(v) for k, v in mem["tiles"].items()}
    total = unrle(mem["tile_total"])
    always = unrle(mem["always_live"]["tile"])
    assert tiles["code_loaded"].sum() > 0
    assert np.array_equal(always, total - tiles["temporaries"] - tiles["code_loaded"])
    assert mem["always_live"]["total"] == mem["total"] - mem["totals"]["temporaries"] - mem["totals"]["code_loaded"]
    assert doc["liveness"]["always_live_bytes"] == mem["always_live"]["total"]
    # the liveness counts loaded code instead: temporaries (none here) plus the code live at each position
    assert doc["liveness"]["not_always_live"] == doc["code"]["live"]
    assert np.array_equal(unrle(mem["not_always_live_peak_tile"]), tiles["temporaries"] + tiles["code_loaded"])


def test_reading_api_and_older_class_names(loaded, tmp_path):
    import profiler

    _, _, doc = loaded
    path = tmp_path / "profile.json"
    write_document(doc, str(path))
    r = profiler.open_report(str(path))
    t0 = r.compilation.tiles[0].memory
    assert t0.alwaysLiveBytes == t0.total.total - t0.category.temporaries.total - t0.category.codeLoaded.total
    cm = r.code_memory()
    assert cm["loading"] and cm["saved"] == doc["code"]["totals"]["saved"]
    assert cm["peak_tile_saved"] == doc["code"]["peak_tile"]["saved"] and cm["load_steps"] == 3
    # a minor-version-0 document named the classes `remote` and `code_load`: readers regroup by kind
    old = json.loads(json.dumps(doc))
    old.pop("minor_version")
    old["execution"]["cycles_by_class"] = {"compute": 1, "code_load": 2}
    assert analysis.summary(old)["cycles"]["by_class"] == doc["execution"]["cycles_by_class"]


def test_report_prints_the_code_memory_section(loaded, resident):
    _, _, doc = loaded
    buf = io.StringIO()
    render(doc, Console(file=buf, width=160, color_system=None))
    text = buf.getvalue()
    c = doc["code"]
    for want in ("Code memory", "always live (resident)", "loaded (peak live)", "all code resident", "saved",
                 "peak code on the busiest tile", "Functions whose code is in streaming memory", "f16", "cast",
                 "Code loads", "code_load f16", f"{c['load_steps'][0]['cycles']:,}",
                 f"{c['load_cycles']['executed_cycles']:,}", "streaming memory", "code loads"):
        assert want in text, want
    # without code loading there is no such section
    buf = io.StringIO()
    render(resident[2], Console(file=buf, width=160, color_system=None))
    assert "Code memory" not in buf.getvalue() and "streaming memory" not in buf.getvalue()


def test_compare_and_json_show_code_memory(loaded, resident, tmp_path, capsys):
    a, b = resident[2], loaded[2]
    cmp = analysis.compare(a, b)
    rows = cmp["totals"]
    ca, cb = a["memory"]["totals"]["vertex_code"], b["code"]["totals"]
    assert rows["code.resident"]["a"] == ca and rows["code.resident"]["b"] == cb["resident"]
    assert rows["code.loaded_peak"]["delta"] == cb["loaded_peak"]
    assert rows["code.with_loading"]["delta"] == cb["with_loading"] - ca
    assert rows["code.peak_tile"]["delta"] == -b["code"]["peak_tile"]["saved"] < 0
    assert rows["code.saved"]["b"] == cb["saved"]
    assert rows["code.load_cycles"]["b"] == b["code"]["load_cycles"]["executed_cycles"]
    assert rows["cycles.streaming"]["a"] == 0 and rows["cycles.streaming"]["b"] > 0
    buf = io.StringIO()
    render_compare(cmp, Console(file=buf, width=140, color_system=None))
    for want in ("code.peak_tile", "code.saved", "code.load_cycles", "cycles.streaming"):
        assert want in buf.getvalue(), want
    # two profiles without code loading show no code rows
    assert not [k for k in analysis.compare(a, a)["totals"] if k.startswith("code.")]
    pb = tmp_path / "b.json"
    write_document(b, str(pb))
    assert cli.main(["report", str(pb), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["code"]["loading"] and out["code"]["peak_tile_with_loading"] == b["code"]["peak_tile"]["with_loading"]["bytes"]
    assert out["cycles"]["by_class"]["streaming"] == b["code"]["load_cycles"]["executed_cycles"]


def test_popxl_remote_code_load_profile(monkeypatch):
    """A popxl program that loads a graph's code before each call: the load steps carry the op."""
    import popxl
    import popxl.ops as ops
    from popxl._profiling import build

    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.arange(16, dtype=np.float32), name="x")

    def body(t):
        return ops.gelu(t * 2.0)

    g = ir.create_graph(body, x.spec)
    with ir.main_graph, popxl.in_sequence():
        for _ in range(2):
            ops.remote_code_load(g, destination="executable")
            x, = ops.call(g, x)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
    doc = build(session)
    c = doc["code"]
    assert c is not None and len(c["load_steps"]) == 2 and len(c["functions"]) == 1
    assert all(x["executions"] == 1 and x["cycles"] > 0 for x in c["load_steps"])
    steps = {s["id"]: s for s in doc["steps"]}
    assert all(steps[x["step"]].get("op_type") for x in c["load_steps"])
    assert doc["execution"]["cycles_by_class"]["streaming"] == c["load_cycles"]["executed_cycles"]
    assert c["totals"]["loaded_peak"] > 0 and doc["memory"]["always_live"]["total"] < doc["memory"]["total"]
