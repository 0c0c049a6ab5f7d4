"""ipu.replay: a builder's additions to a graph recorded once and replayed on other variables."""
import numpy as np

import ipu
from ipu import replay


def _builder(g, src, out, prefix, foreign=None, outside=False):
    """Maps `out` when unmapped, stages src in a temporary on tile 1, doubles it into out."""
    def build():
        if out.unmapped():
            g.set_tile_mapping(out, 1)
        tmp = g.add_variable("elsewhere/tmp" if outside else f"{prefix}/tmp", src.shape, src.dtype, ipu.TEMPORARY)
        g.set_tile_mapping(tmp, 1)
        seq = ipu.Sequence(ipu.Copy(foreign if foreign is not None else src, tmp, name=f"{prefix}/stage"), name=prefix)
        cs = g.add_compute_set(f"{prefix}/scale")
        g.add_vertices(cs, "ScaledAdd", np.array([1]), {"data": (out, 0, out.numel), "deltas": (tmp, 0, tmp.numel)},
                       fp={"a": 1.0, "b": 2.0})
        seq.add(ipu.Execute(cs, name=f"{prefix}/scale"))
        return seq
    return build


def _two_layers(**kw):
    g = ipu.Graph(ipu.small_target(4))
    memo: dict = {}
    progs, vars_ = [], []
    for i in range(2):
        src = g.add_variable(f"src{i}", (8,))
        out = g.add_variable(f"out{i}", (8,))
        g.map_linearly(src, tiles=[i + 2])
        key = (replay.view_key(src, mapping=False), replay.view_key(out))
        progs.append(replay.build_or_replay(g, memo, key, (src, out), f"layer{i}", _builder(g, src, out, f"layer{i}",
                                                                                            **kw)))
        vars_.append((src, out))
    return g, memo, progs, vars_


def test_replay_makes_what_the_builder_makes():
    g, memo, progs, vars_ = _two_layers()
    assert len(memo) == 1
    names = [v.name for v in g.variables]
    assert names == ["src0", "out0", "layer0/tmp", "src1", "out1", "layer1/tmp"]
    assert [cs.name for cs in g.compute_sets] == ["layer0/scale", "layer1/scale"]
    (_, out0), (src1, out1) = vars_
    assert all(np.array_equal(x, y) for x, y in zip(out0.pieces(), out1.pieces()))  # the input mapped as the build did
    second = progs[1]
    assert second.name == "layer1" and [p.name for p in second.programs] == ["layer1/stage", "layer1/scale"]
    assert second.programs[0].src is src1 and second.programs[0].dst is g.variables[5]
    chunk = g.compute_sets[1].chunks[0]
    assert chunk.field_vars == (out1, g.variables[5])
    exe = ipu.compile(g, ipu.Sequence(*progs))
    eng = ipu.Engine(exe)
    for i, (src, out) in enumerate(vars_):
        eng.write_tensor(src, np.arange(8, dtype=np.float32) + i)
        eng.write_tensor(out, np.ones(8, np.float32))
    eng.run()
    for i, (_, out) in enumerate(vars_):
        assert np.array_equal(eng.read_tensor(out), 1 + 2 * (np.arange(8) + i))


def test_a_build_the_replay_could_not_remake_is_not_kept():
    _, memo, _, _ = _two_layers(outside=True)  # a name outside its prefix
    assert memo == {}
    g = ipu.Graph(ipu.small_target(4))
    other, src, out = (g.add_variable(n, (8,)) for n in ("other", "src", "out"))
    g.map_linearly(other)
    g.map_linearly(src)
    memo = {}
    replay.build_or_replay(g, memo, "k", (src, out), "p", _builder(g, src, out, "p", foreign=other))  # not an input
    assert memo == {}
    assert "add_variable" not in g.__dict__  # the graph's own methods again


def test_the_recording_keeps_the_mappings_the_build_made():
    g = ipu.Graph(ipu.small_target(4))
    memo: dict = {}
    src = g.add_variable("src", (8,))
    g.map_linearly(src)
    out = g.add_variable("out", (8,))
    replay.build_or_replay(g, memo, "k", (src, out), "a", _builder(g, src, out, "a"))
    g.variables[-1].set_tile_runs([3], [8])  # moved afterwards (the lowering's placement onto an IPU does)
    g.compute_sets[-1].chunks[0].tiles = np.array([3])
    src2, out2 = g.add_variable("src2", (8,)), g.add_variable("out2", (8,))
    g.map_linearly(src2)
    replay.build_or_replay(g, memo, "k", (src2, out2), "b", _builder(g, src2, out2, "b"))
    assert g.variables[-1].name == "b/tmp" and set(g.variables[-1].pieces()[2].tolist()) == {1}
    assert g.compute_sets[-1].name == "b/scale" and g.compute_sets[-1].chunks[0].tiles.tolist() == [1]
