"""A program kind defined here, outside ipu/, codelets/ and profiler/: it compiles, runs in the
compiled step loop (not in Python), counts in the liveness timeline and shows in the profile with
a profile class of its own. Nothing of the machine knows it but through the registries."""
import numpy as np
import pytest

import ipu
import profiler
from ipu import costs
from ipu.copytables import copy_runs, copy_runs_staged, runs
from ipu.nodes import Segment, Seq, StepRef


class Reverse(ipu.Program):
    """dst[i] = src[n - 1 - i]: an exchange that reverses the element order."""

    def __init__(self, src, dst, name=""):
        self.src, self.dst, self.name = src, dst, name


class ReversedRuns:
    """The payload: byte runs within a replica's memory, as the compiled loop's copies take them
    (src_off, dst_off, nbytes, staged: read every source before any write)."""

    def __init__(self, src_off, dst_off, nbytes, staged):
        self.src_off, self.dst_off, self.nbytes, self.staged = src_off, dst_off, nbytes, staged


def _compile(comp, p):
    if p.src.numel != p.dst.numel or p.src.dtype != p.dst.dtype:
        raise ipu.CompileError(f"Reverse {p.name!r}: src and dst differ")
    sa, st = comp.addresses(p.src, "Reverse source")
    da, dt = comp.addresses(p.dst, "Reverse destination")
    src_off, dst_off, nbytes, src_tile, dst_tile = runs(sa[::-1], da, st[::-1], dt, p.src.dtype.itemsize)
    # priced as the exchange it is (poplibs' ExchangeEstimator through ipu.costs)
    tile_cycles, extra = costs.exchange_tile_cycles(src_tile, dst_tile, src_off, nbytes, comp.target)
    payload = ReversedRuns(src_off, dst_off, nbytes, p.src.variable is p.dst.variable)
    sync = comp.sync(p.name or "reverse")
    step = comp.add_step("reverse", p.name or "reverse", int(tile_cycles.max(initial=0)) + extra, tile_cycles,
                         payload=payload, bytes_moved=int(nbytes.sum()))
    return Seq((sync, StepRef(step.id)))


def _uses(p):
    v = p.dst.variable
    return [ipu.Use(p.src.variable, True, False), ipu.Use(v, False, True, p.dst.numel == v.numel)]


PYTHON_RUNS = []  # payloads the Python walk ran (the compiled loop never calls _run)


def _run(engine, x: ReversedRuns, reps):
    PYTHON_RUNS.append(x)
    for r in reps:
        m = engine.memory[r]
        if x.staged:
            copy_runs_staged(m, x.src_off, x.dst_off, x.nbytes)
        else:
            copy_runs(m, m, x.src_off, x.dst_off, x.nbytes)


ipu.register_kind(ipu.ProgramKind("test_reverse", (Reverse,), _compile, _uses, ReversedRuns, _run,
                                  lower=lambda loop, x: [loop.copy(x)],
                                  steps=(ipu.StepKind("reverse", "shuffle"),)))


def _program():
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (40,), "float32")
    g.map_linearly(x)
    y = g.add_variable("y", (40,), "float32", category=ipu.TEMPORARY)
    g.set_tile_mapping(y, {3 - t: [(10 * t, 10 * t + 10)] for t in range(4)})
    fn = g.add_function(ipu.Sequence(Reverse(x, y, "flip"), Reverse(y, x, "flip back"), Reverse(x, x, "in place")))
    return g, x, ipu.compile(g, ipu.Repeat(3, ipu.Call(fn)))


@pytest.mark.parametrize("threads", [1, 2])
def test_an_own_program_kind_runs_in_the_compiled_loop_as_in_python(threads):
    g, x, exe = _program()
    data = np.arange(40, dtype=np.float32)
    out = []
    for compiled in (False, True):
        exe.native = None
        PYTHON_RUNS.clear()
        e = ipu.Engine(exe, compiled=compiled, threads=threads)
        e.write_tensor(x, data)
        e.run()
        out.append((e.read_tensor(x), e.cycles, *e.executed_steps(), bool(PYTHON_RUNS)))
    (xp, cp, ip, sp, in_python), (xc, cc, ic, sc, in_python_compiled) = out
    np.testing.assert_array_equal(xp, data[::-1])  # three passes of flip, flip back, flip in place
    np.testing.assert_array_equal(xc, xp)
    assert cc == cp and np.array_equal(ic, ip) and np.array_equal(sc, sp)
    assert in_python and not in_python_compiled  # the compiled loop ran every reversal itself
    assert isinstance(exe.native.root(0), Segment)  # the whole program is one compiled segment


def test_an_own_program_kind_shows_in_the_profile_with_its_class(tmp_path):
    from rich.console import Console

    from profiler import analysis, report, trace

    g, x, exe = _program()
    e = ipu.Engine(exe)
    e.run()
    doc = profiler.build_profile(exe, e)
    rows = [s for s in doc["steps"] if s["kind"] == "reverse"]
    assert [s["name"] for s in rows] == ["flip", "flip back", "in place"]
    assert {s["class"] for s in rows} == {"shuffle"} and all(s["executions"] == 3 for s in rows)
    ex = doc["execution"]
    assert ex["cycles_by_class"]["shuffle"] == ex["cycles_by_kind"]["reverse"] == sum(s["executed_cycles"]
                                                                                      for s in rows) > 0
    assert sum(ex["cycles_by_class"].values()) == ex["total_cycles"] == e.cycles
    # one liveness position per Reverse (the sync before it takes none): y lives between them
    assert doc["liveness"]["step_of_position"] == [s["id"] for s in rows]
    assert doc["liveness"]["not_always_live"] == [160, 160, 0]
    # the readers take the class from the document
    assert analysis.summary(doc)["cycles"]["by_class"]["shuffle"] == ex["cycles_by_class"]["shuffle"]
    opened = profiler.open_report(profiler.write_document(doc, tmp_path / "profile.json"))
    assert opened.compilation.programs[rows[0]["id"]].kind_class == "shuffle"
    con = Console(record=True, width=160)
    report.render(doc, con)
    assert "shuffle" in con.export_text()
    threads = [e["args"]["name"] for e in trace.build_trace(doc)["traceEvents"] if e.get("name") == "thread_name"]
    assert "shuffle" in threads


def test_a_step_of_an_unregistered_step_kind_is_refused():
    class Odd(ipu.Program):
        name = ""

    def compile_odd(comp, p):
        return StepRef(comp.add_step("odd", "odd", 1).id)

    ipu.register_kind(ipu.ProgramKind("test_odd", (Odd,), compile_odd, lambda p: []))
    with pytest.raises(ipu.CompileError, match="unknown step kind 'odd'"):
        ipu.compile(ipu.Graph(ipu.small_target(2)), Odd())
    with pytest.raises(ValueError, match="already registered with profile class 'shuffle'"):
        ipu.register_step_kind(ipu.StepKind("reverse", "exchange"))
