"""The profile document of programs built directly with ipu/: totals, memory, liveness, trace."""
import json

import numpy as np
import pytest

import ipu
from ipu.timeline import timeline_steps
from profiler import build_profile
from profiler._format import SCHEMA, VERSION, decode_runs, encode_trace, rle, unrle
from profiler import _format

from profiler_helpers import SCALED_ADD_256, known_program


def test_totals_of_a_known_program(ran_known):
    exe, engine, expected = ran_known
    doc = build_profile(exe, engine)
    assert doc["schema"] == SCHEMA and doc["version"] == VERSION
    ex = doc["execution"]
    assert ex["total_cycles"] == engine.cycles == expected
    t = exe.target
    by_class = ex["cycles_by_class"]
    assert by_class["compute"] == 3 * SCALED_ADD_256 + next(s.cycles for s in exe.steps if s.name == "fn_add")
    assert by_class["sync"] == 5 * t.sync_cycles  # 3 loop copies and 2 function copies
    assert sum(by_class.values()) == expected  # no branch divergence: the split adds up to the total
    assert ex["steps_executed"] == len(engine.log) == 3 * 3 + 5
    assert ex["seconds_at_clock"] == pytest.approx(expected / t.clock_hz)
    # the step table carries cycles, executions and the op of the compute set's debug name
    sa = next(r for r in doc["steps"] if r["name"] == "scaled_add")
    assert sa["cycles"] == SCALED_ADD_256 and sa["executions"] == 3 and sa["executed_cycles"] == 3 * SCALED_ADD_256
    assert sa["kind"] == "compute" and sa["vertices"] == 1 and sa["active_tiles"] == 1
    doc2 = build_profile(exe, engine, ops={"my_op": {"type": "scaled_add", "scope": "s", "graph": "g"}})
    sa2 = next(r for r in doc2["steps"] if r["name"] == "scaled_add")
    assert (sa2["op"], sa2["op_type"], sa2["scope"]) == ("my_op", "scaled_add", "s")


def test_cycles_per_tile_match_the_executable(ran_known):
    exe, engine, _ = ran_known
    doc = json.loads(json.dumps(build_profile(exe, engine)))  # survives JSON as is
    for s, row in zip(exe.steps, doc["steps"]):
        tc = _format.tile_cycles(doc, row)
        if s.tile_cycles is None:
            assert tc is None and s.kind == "sync"
        else:
            np.testing.assert_array_equal(tc, s.tile_cycles)
            assert tc.size == exe.target.num_tiles
            assert row["cycles"] >= tc.max()
    # steps of one compute set share one entry of the table
    assert len(doc["tile_cycles_table"]) <= sum(s.tile_cycles is not None for s in exe.steps)


def test_memory_categories_add_up_on_every_tile(ran_known):
    exe, engine, _ = ran_known
    doc = build_profile(exe, engine)
    mem = doc["memory"]
    cats = _format.memory_by_category(doc)
    total = _format.tile_total(doc)
    np.testing.assert_array_equal(sum(cats.values()), total)
    np.testing.assert_array_equal(total, exe.plan.tile_total())
    assert mem["total"] == int(total.sum()) == sum(mem["totals"].values())
    assert mem["free"] == mem["capacity"] - mem["total"]
    assert mem["capacity"] == exe.target.num_tiles * exe.target.bytes_per_tile
    for c, arr in cats.items():
        np.testing.assert_array_equal(arr, exe.plan.categories[c])
        assert mem["totals"][c] == int(arr.sum())
    always = _format.unrle(mem["always_live"]["tile"])
    np.testing.assert_array_equal(always + cats["temporaries"], total)
    assert mem["max_tile"]["bytes"] == int(total.max())
    # worst tiles name what fills them
    w = mem["worst_tiles"][0]
    assert w["tile"] == mem["max_tile"]["tile"] and sum(w["categories"].values()) == w["total"]
    names = {v["name"] for v in mem["variables"]}
    assert {"a", "b", "x", "y", "t", "u"} <= names


def test_liveness_peak_is_where_the_memory_plan_says(ran_known):
    exe, engine, _ = ran_known
    doc = build_profile(exe, engine)
    live = doc["liveness"]
    assert live["not_always_live"] == exe.liveness.tolist()
    assert live["positions"] == exe.timeline_length
    assert live["peak"]["position"] == int(np.argmax(exe.liveness))
    assert live["peak"]["bytes"] == int(exe.liveness.max())
    # the only temporary, t (1 KiB on tile 1), lives from 'fill t' to 't back' inside the function
    where = live["step_of_position"]
    assert len(where) == exe.timeline_length
    names = [exe.steps[s].name for s in where]
    assert names == ["a to b", "scaled_add", "fill t", "fn_add", "t back"]
    assert live["peak"]["bytes"] == 1024
    assert names[live["peak"]["position"]] in ("fill t", "fn_add", "t back")
    assert live["peak"]["name"] == names[live["peak"]["position"]]


def test_trace_round_trips_and_is_compact(ran_known):
    exe, engine, _ = ran_known
    doc = build_profile(exe, engine)
    ids, starts = _format.decode_trace(doc)
    log_ids, log_starts = engine.log.arrays()
    np.testing.assert_array_equal(ids, log_ids)
    np.testing.assert_array_equal(starts, log_starts)
    tr = doc["execution"]["trace"]
    assert tr["start_exceptions"] == []  # one replica, no branches: starts follow from cycles
    assert len(tr["runs"]) < 3 * len(log_ids)


def test_program_tree():
    exe, engine, _ = known_program()
    doc = build_profile(exe, engine)
    prog = doc["programs"]["programs"][0]
    assert prog["seq"][0]["repeat"] == 3
    assert prog["seq"][1] == {"call": 0}
    assert len(doc["programs"]["functions"]) == 1
    assert doc["execution"]["steps_executed"] == 0  # never run
    assert doc["execution"]["total_cycles"] == 0


def test_several_runs_and_branch_divergence_across_replicas():
    g = ipu.Graph(ipu.small_target(2))
    c = g.add_variable("c", (), "int32")
    x = g.add_variable("x", (64,), "float32")
    g.set_tile_mapping(c, 1)
    g.set_tile_mapping(x, 0)
    one = g.add_constant("one", np.ones(64, np.float32), tile=0)
    cs = g.add_compute_set("inc")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=one, a=1.0, b=1.0)
    prog = ipu.Sequence(ipu.If(c, ipu.Repeat(4, ipu.Execute(cs)), ipu.Sync()), ipu.Execute(cs))
    exe = ipu.compile(g, prog)
    e = ipu.Engine(exe, replicas=2)
    e.write_tensor(c, np.int32(1), replica=0)
    e.write_tensor(c, np.int32(0), replica=1)
    e.run()
    e.run()
    doc = json.loads(json.dumps(build_profile(exe, e)))
    ids, starts = _format.decode_trace(doc)
    li, ls = e.log.arrays()
    np.testing.assert_array_equal(ids, li)
    np.testing.assert_array_equal(starts, ls)
    assert doc["execution"]["trace"]["start_exceptions"]  # the replicas split at the If
    assert doc["execution"]["total_cycles"] == e.cycles
    assert doc["execution"]["replicas"] == 2
    assert doc["programs"]["programs"][0]["seq"][0]["if"] == 0


@pytest.mark.parametrize("seed", range(5))
def test_encodings_round_trip(seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 3, rng.integers(0, 200))
    np.testing.assert_array_equal(unrle(rle(a)), a)
    cycles = rng.integers(1, 50, 20)
    body = rng.integers(0, 20, rng.integers(1, 6))
    ids = np.concatenate([np.arange(5), np.tile(body, 7), np.arange(10, 20)])
    starts = np.concatenate(([0], np.cumsum(cycles[ids])[:-1]))
    if ids.size > 8:
        starts[8:] += 17  # a gap the cycles do not explain
    enc = encode_trace(ids, starts, cycles)
    i2, s2 = decode_runs(enc, cycles)
    np.testing.assert_array_equal(i2, ids)
    np.testing.assert_array_equal(s2, starts)
    i3, s3 = _format.decode_trace({"steps": [{"cycles": int(c)} for c in cycles], "execution": {"trace": enc}})
    np.testing.assert_array_equal(i3, ids)
    np.testing.assert_array_equal(s3, starts)


def test_long_loops_encode_small():
    g = ipu.Graph(ipu.small_target(1))
    x = g.add_variable("x", (8,), "float32")
    g.set_tile_mapping(x, 0)
    cs = g.add_compute_set("inc")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=x, a=1.0, b=0.0)
    cs2 = g.add_compute_set("inc2")
    g.add_vertex(cs2, "ScaledAdd", 0, data=x, deltas=x, a=1.0, b=0.0)
    exe = ipu.compile(g, ipu.Repeat(5000, ipu.Sequence(ipu.Execute(cs), ipu.Execute(cs2))))
    e = ipu.Engine(exe)
    e.run()
    doc = build_profile(exe, e)
    tr = doc["execution"]["trace"]
    assert tr["length"] == 10000
    assert len(tr["runs"]) == 3  # one triple: steps 0..1, 5000 times
    assert len(json.dumps(doc)) < 20000


def test_timeline_mapping_covers_every_position():
    exe, _, _ = known_program()
    where = timeline_steps(exe)
    assert where is not None and len(where) == exe.timeline_length
    assert all(exe.steps[s].kind != "sync" for s in where)


def test_graph_only_profile_and_trace_cap(ran_known):
    exe, engine, _ = ran_known
    doc = build_profile(exe, engine, execution=False)
    assert doc["execution"]["trace"] is None and doc["execution"]["trace_truncated"]
    assert doc["execution"]["total_cycles"] == engine.cycles
    doc = build_profile(exe, engine, trace_entries=4)
    assert doc["execution"]["trace"]["length"] == 4 and doc["execution"]["trace_truncated"]
    doc = build_profile(exe, None)
    assert doc["execution"] is None and doc["memory"]["total"] > 0
