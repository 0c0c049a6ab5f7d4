"""A codelet family defined here, outside ipu/, codelets/ and profiler/: its kernels and cost
models read the vertex tables by name, it runs in the compiled step loop as in the Python walk,
shows in the profile, and calibrates against an estimator it declares. Nothing of the machine
knows it but through the codelet registry."""
import numpy as np
import pytest
from numba import njit

import ipu
import profiler
from ipu import IN, INOUT, OUT, Field, load, store
from ipu.nodes import Segment
from profiler import calibrate


@njit(cache=True)
def _affine_kernel(views, off, cnt, fp, ip):
    x = views[AF.in_]
    y = views[AF.out]
    for v in range(off.shape[0]):
        a = np.float32(fp[v, AFP.scale])
        b = np.float32(fp[v, AFP.shift])
        for i in range(cnt[v, AF.out]):
            store(y, off[v, AF.out] + i, a * load(x, off[v, AF.in_] + i) + b)


@njit(cache=True)
def _affine_in_place_kernel(views, off, cnt, fp, ip):
    d = views[IF.data]
    for v in range(off.shape[0]):
        a = np.float32(fp[v, IFP.scale])
        b = np.float32(fp[v, IFP.shift])
        for i in range(cnt[v, IF.data]):
            store(d, off[v, IF.data] + i, a * load(d, off[v, IF.data] + i) + b)


def affine_cycles(n, repeats: int = 1):
    """Worker cycles of a vertex over n elements. Derivation: a compiled worker loop issues a
    load, a multiply-add and a store per element (3 cycles), 12 cycles to enter and leave."""
    return 12 + 3 * np.asarray(n, np.int64) * repeats


class _Affine(ipu.Codelet):
    float_params = ("scale", "shift")
    allowed_types = None

    def reference(self, x, scale, shift):
        x = np.asarray(x)
        return (np.float32(scale) * x.astype(np.float32) + np.float32(shift)).astype(x.dtype)


@ipu.register
class OwnAffine(_Affine):
    """out = scale * in + shift."""

    name = "TestAffine"
    fields = (Field("in", IN), Field("out", OUT))
    poplibs_vertices = ("test::Affine",)

    def kernel(self):
        return _affine_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)
        if t.type.in_ != t.type.out or np.any(t.count.in_ != t.count.out):
            raise ValueError("TestAffine: in and out must match")

    def cycles(self, types, cnt, fp, ip, target):
        return affine_cycles(self.table(types, cnt).count.out)

    def calibration_vertex(self, vertex, types, n, params):
        (t,) = types
        return ipu.Vertex({"in": t, "out": t}, {"in": n, "out": n}, {"scale": 2.0, "shift": 1.0})


@ipu.register
class OwnAffineInPlace(_Affine):
    """data = scale * data + shift."""

    name = "TestAffineInPlace"
    fields = (Field("data", INOUT),)

    def kernel(self):
        return _affine_in_place_kernel

    def cycles(self, types, cnt, fp, ip, target):
        return affine_cycles(self.table(types, cnt).count.data)


AF, AFP = OwnAffine.F, OwnAffine.FP
IF, IFP = OwnAffineInPlace.F, OwnAffineInPlace.FP


def test_the_columns_come_from_the_declaration():
    assert (AF.in_, AF.out, AFP.scale, AFP.shift, IF.data) == (0, 1, 0, 1, 0)
    assert list(AF) == ["in", "out"] and len(OwnAffine.IP) == 0
    t = OwnAffine().table((ipu.FLOAT32, ipu.FLOAT16), np.array([[3, 4]]), np.array([[2.0, 5.0]]))
    assert (t.type.out, int(t.count.out[0]), float(t.shift[0])) == (ipu.FLOAT16, 4, 5.0)
    with pytest.raises(AttributeError, match="no parameter 'offset'"):
        t.offset
    with pytest.raises(ValueError, match="'x' declared twice"):
        class Twice(ipu.Codelet):
            fields = (Field("x"), Field("x"))


PIECES = [(0, 10), (10, 21), (21, 30), (30, 37)]  # elements of x and y on tiles 0..3


def _program(dtype):
    g = ipu.Graph(ipu.small_target(4))
    x = g.add_variable("x", (37,), dtype)
    y = g.add_variable("y", (37,), dtype)
    for v in (x, y):
        g.set_tile_mapping(v, {t: [p] for t, p in enumerate(PIECES)})
    first = g.add_compute_set("affine")
    then = g.add_compute_set("affine_in_place")
    for tile, (a, b) in enumerate(PIECES):
        g.add_vertex(first, "TestAffine", tile, **{"in": x[a:b]}, out=y[a:b], scale=2.0, shift=1.0)
        g.add_vertex(then, "TestAffineInPlace", tile, data=y[a:b], scale=0.5, shift=-3.0)
    return g, x, y, ipu.compile(g, ipu.Repeat(2, ipu.Sequence(ipu.Execute(first), ipu.Execute(then))))


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_an_own_codelet_family_runs_compiled_as_in_python(dtype):
    g, x, y, exe = _program(dtype)
    data = np.linspace(-3, 3, 37).astype(dtype)
    out = []
    for compiled in (False, True):
        exe.native = None
        e = ipu.Engine(exe, compiled=compiled)
        e.write_tensor(x, data)
        e.run()
        out.append((e.read_tensor(y), e.cycles, e.executed_steps()))
    want = OwnAffineInPlace().reference(OwnAffine().reference(data, 2.0, 1.0), 0.5, -3.0)
    np.testing.assert_array_equal(out[0][0], want)
    np.testing.assert_array_equal(out[1][0], out[0][0])
    assert out[1][1] == out[0][1] and all(np.array_equal(a, b) for a, b in zip(out[1][2], out[0][2]))
    assert isinstance(exe.native.root(0), Segment)  # both kernels called from the compiled loop


def test_an_own_codelet_family_shows_in_the_profile_and_calibrates(tmp_path):
    g, x, y, exe = _program("float32")
    e = ipu.Engine(exe)
    e.run()
    doc = profiler.build_profile(exe, e)
    rows = {s["name"]: s for s in doc["steps"] if s["kind"] == "compute"}
    assert set(rows) == {"affine", "affine_in_place"}
    assert all(r["class"] == "compute" and r["executions"] == 2 and r["vertices"] == 4 for r in rows.values())
    # one worker vertex per tile, scheduled on the worker contexts by ipu.costs: the busiest tile
    # holds 11 elements
    sizes = np.array([b - a for a, b in PIECES])
    tiles = ipu.costs.compute_set_tile_cycles(np.arange(4), affine_cycles(sizes), np.zeros(4, bool), exe.target)
    assert rows["affine"]["cycles"] == tiles.max() == tiles[1] > 0
    table = tmp_path / "affine.csv"
    table.write_text("vertex,dtype,n,params,cycles,source\ntest::Affine,float,64,,204,the derivation\n")
    (row,) = calibrate.compute(calibrate.read_table(str(table)))
    assert row.model == affine_cycles(64) == 204 and row.error == 0
