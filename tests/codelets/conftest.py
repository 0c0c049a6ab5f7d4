"""Shared helpers for the codelet tests: build a tiny graph, run vertices, compare results.

`run_vertices(codelet, variables, vertices)` builds an `ipu.Graph(ipu.small_target(2))`, adds one
variable per entry of `variables` ({name: (dtype, data or element count, tile)}), one compute set
with every vertex of `vertices` ([(tile, {field: (variable name, start, count)}, params)]),
compiles, writes the data, runs once and returns a `Run` with the variables' contents, the cycles
of the run and the compiled step. `run_vertex(codelet, {field: array}, params, tile)` is the common
case: one vertex, each field a whole variable of its own on one tile.
"""
from __future__ import annotations

import os
import sys
import zlib
from dataclasses import dataclass

import numpy as np
import pytest

import ipu

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:  # the tests here import codelet_targets (pytest runs with --import-mode=importlib)
    sys.path.insert(0, HERE)

from codelet_targets import vertex_target  # noqa: E402

# awkward sizes: one element, primes, sizes that are not multiples of any vector width
SIZES = (1, 7, 13, 97)


@dataclass
class Run:
    out: dict
    cycles: int
    step: object
    exe: object


def run_vertices(codelet, variables: dict, vertices: list, tiles: int = 2) -> Run:
    g = ipu.Graph(vertex_target(tiles))
    vs = {}
    for name, (dtype, data, tile) in variables.items():
        n = data if isinstance(data, (int, np.integer)) else np.asarray(data).size
        v = g.add_variable(name, (int(n),), dtype)
        g.set_tile_mapping(v, tile)
        vs[name] = v
    cs = g.add_compute_set("cs")
    for tile, fields, params in vertices:
        conn = {f: vs[var][start:start + count] for f, (var, start, count) in fields.items()}
        g.add_vertex(cs, codelet, tile, **conn, **(params or {}))
    exe = ipu.compile(g, ipu.Execute(cs))
    engine = ipu.Engine(exe)
    for name, (dtype, data, tile) in variables.items():
        if not isinstance(data, (int, np.integer)):
            engine.write_tensor(vs[name], np.asarray(data))
    cycles = engine.run()
    out = {name: engine.read_tensor(v) for name, v in vs.items()}
    step = [s for s in exe.steps if s.kind == "compute"][0]
    return Run(out, cycles, step, exe)


def run_vertex(codelet, arrays: dict, params: dict, tile: int = 0) -> Run:
    """One vertex of `codelet` on `tile`, each field ({field: array}) a whole variable of its own
    there holding the array."""
    arrays = {name: np.asarray(arr) for name, arr in arrays.items()}
    variables = {name: (arr.dtype, arr, tile) for name, arr in arrays.items()}
    fields = {name: (name, 0, arr.size) for name, arr in arrays.items()}
    return run_vertices(codelet, variables, [(tile, fields, params)])


def layout_pieces(sizes, tiles=(0, 1, 0, 0)):
    """Consecutive pieces of the given sizes in one flat variable, and the tile of each piece: a
    compute set with several vertices, some of them on the same tile."""
    starts = np.concatenate(([0], np.cumsum(sizes)[:-1])).astype(int)
    return [(int(s), int(n), tiles[i % len(tiles)]) for i, (s, n) in enumerate(zip(starts, sizes))]


def elementwise_run(codelet, inputs: dict, out_dtype, params: dict, sizes=SIZES, alias_out=None):
    """Run `codelet` element-wise over consecutive pieces of the given sizes, one vertex per piece,
    the pieces spread over tiles 0 and 1 (several on tile 0) in one compute set.

    inputs: {field: flat array over all pieces} or {field: array with one element per piece} (a
    broadcast scalar for each vertex). Each input lives, whole, on both tiles. The result field is
    `out`, written to its own variable or, with alias_out=field, into that input (in place).
    Returns (out array over all pieces, Run)."""
    pieces = layout_pieces(sizes)
    total = int(sum(sizes))
    variables, vertices = {}, []
    for f, arr in inputs.items():
        arr = np.asarray(arr)
        for t in (0, 1):
            variables[f"{f}{t}"] = (arr.dtype, arr, t)
    if alias_out is None:
        for t in (0, 1):
            variables[f"out{t}"] = (np.dtype(out_dtype), total, t)
    for i, (s, n, t) in enumerate(pieces):
        fields = {}
        for f, arr in inputs.items():
            fields[f] = (f"{f}{t}", s, n) if np.asarray(arr).size == total else (f"{f}{t}", i, 1)
        fields["out"] = (f"{alias_out or 'out'}{t}", s, n)
        vertices.append((t, fields, params))
    run = run_vertices(codelet, variables, vertices)
    name = alias_out or "out"
    res = np.empty(total, run.out[f"{name}0"].dtype)
    for s, n, t in pieces:
        res[s:s + n] = run.out[f"{name}{t}"][s:s + n]
    return res, run


def assert_close_dtype(got, ref, exact=False, rtol32=2e-6, atol32=1e-6, what=""):
    """Compare a kernel result with its reference: ints and bools exactly; float32 exactly or
    within rtol32/atol32; float16 within one half ulp (both sides computed in float32 and rounded
    once, so they may differ when a float32 ulp moves a value across a half rounding boundary) or
    within the float32 tolerance."""
    got = np.asarray(got)
    ref = np.asarray(ref)
    assert got.dtype == ref.dtype, (what, got.dtype, ref.dtype)
    assert got.shape == ref.shape, (what, got.shape, ref.shape)
    if got.dtype.kind not in "f":
        np.testing.assert_array_equal(got, ref, err_msg=what)
        return
    nan_g, nan_r = np.isnan(got), np.isnan(ref)
    np.testing.assert_array_equal(nan_g, nan_r, err_msg=f"{what}: NaN positions")
    g, r = got[~nan_g], ref[~nan_r]
    if exact:
        np.testing.assert_array_equal(g, r, err_msg=what)
        return
    if got.dtype == np.float16:
        inf = np.isinf(r) | np.isinf(g)
        np.testing.assert_array_equal(g[inf], r[inf], err_msg=f"{what}: infinities")
        with np.errstate(over="ignore"):
            ulp = np.spacing(np.abs(r[~inf]).astype(np.float16)).astype(np.float32)
        r32 = r[~inf].astype(np.float32)
        diff = np.abs(g[~inf].astype(np.float32) - r32)
        # one half ulp, or the float32 tolerance where float32 maths itself is ill-conditioned
        ok = (diff <= ulp) | (diff <= atol32 + rtol32 * np.abs(r32))
        assert np.all(ok), (what, g[~inf][~ok], r[~inf][~ok])
    else:
        np.testing.assert_allclose(g, r, rtol=rtol32, atol=atol32, err_msg=what)


class Helpers:
    """The helpers above, handed to tests by the `cl` fixture (test modules do not import
    conftest, which other test folders also have)."""

    SIZES = SIZES
    Run = Run
    run_vertices = staticmethod(run_vertices)
    run_vertex = staticmethod(run_vertex)
    layout_pieces = staticmethod(layout_pieces)
    elementwise_run = staticmethod(elementwise_run)
    assert_close = staticmethod(assert_close_dtype)


@pytest.fixture
def cl():
    return Helpers


@pytest.fixture
def rng(request):
    """A generator seeded from the test's id: stable across runs and processes."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))
