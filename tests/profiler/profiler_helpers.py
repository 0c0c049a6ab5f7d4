"""Helpers of the profiler tests: programs written directly against ipu/ (no popxl lowering), with
cycle counts known by hand, and finding a browser."""
import json
import os

import numpy as np
import ipu

SCALED_ADD_256 = 567 + 40  # poplibs estimate of a 256-float ScaledAdd on one tile, plus the compute set's launch (tests/machine)


def known_program(target=None):
    """sync+copy(143 floats tile 0 -> 1), ScaledAdd(256 floats, tile 0), repeated 3 times, then a
    call of a function holding one ScaledAdd on tile 1. Returns (exe, engine, expected cycles)."""
    target = target or ipu.small_target(4)
    g = ipu.Graph(target)
    a = g.add_variable("a", (143,), "float32")
    b = g.add_variable("b", (143,), "float32")
    g.set_tile_mapping(a, 0)
    g.set_tile_mapping(b, 1)
    x = g.add_variable("x", (256,), "float32")
    y = g.add_variable("y", (256,), "float32")
    g.set_tile_mapping(x, 0)
    g.set_tile_mapping(y, 0)
    cs = g.add_compute_set("scaled_add", debug="my_op")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=y, a=1.0, b=0.5)
    t = g.add_variable("t", (256,), "float32", ipu.TEMPORARY)
    g.set_tile_mapping(t, 1)
    u = g.add_variable("u", (256,), "float32")
    g.set_tile_mapping(u, 1)
    cs2 = g.add_compute_set("fn_add")
    g.add_vertex(cs2, "ScaledAdd", 1, data=t, deltas=u, a=1.0, b=1.0)
    fn = g.add_function(ipu.Sequence(ipu.Copy(u, t, name="fill t"), ipu.Execute(cs2), ipu.Copy(t, u, name="t back")),
                        "fn")
    prog = ipu.Sequence(ipu.Repeat(3, ipu.Sequence(ipu.Copy(a, b, name="a to b"), ipu.Execute(cs))), ipu.Call(fn))
    exe = ipu.compile(g, prog)
    engine = ipu.Engine(exe)
    engine.write_tensor(x, np.ones(256, np.float32))
    engine.write_tensor(y, np.ones(256, np.float32))
    engine.write_tensor(a, np.arange(143, dtype=np.float32))
    engine.write_tensor(u, np.ones(256, np.float32))
    copy_cycles = 143 + target.exchange_overhead_cycles  # 572 bytes at 4 B/cycle + overhead
    fn_cycles = sum(s.cycles for s in exe.steps if s.name in ("fill t", "fn_add", "t back")) + 2 * target.sync_cycles
    expected = 3 * (target.sync_cycles + copy_cycles + SCALED_ADD_256) + fn_cycles
    return exe, engine, expected


def code_load_program(target=None, load=True):
    """Two functions whose vertex code is loaded from streaming memory before each call (`f16`: a
    float16 ScaledAdd on tiles 0 and 1; `cast`: a float16 -> float32 Cast on tile 0) around a
    resident float32 ScaledAdd on tile 0:

        CodeLoad(f16) Call(f16) Execute(resident) CodeLoad(cast) Call(cast) CodeLoad(f16) Call(f16)

    f16's and cast's code are never live together, so tile 0 holds less code than with all of it
    resident. load=False: the same calls with every function's code resident. Returns (exe, engine)."""
    target = target or ipu.small_target(4)
    g = ipu.Graph(target)
    x = g.add_variable("x", (256,), "float32")
    y = g.add_variable("y", (256,), "float32")
    g.set_tile_mapping(x, 0)
    g.set_tile_mapping(y, 0)
    cs = g.add_compute_set("resident_add")
    g.add_vertex(cs, "ScaledAdd", 0, data=x, deltas=y, a=1.0, b=0.5)
    h = g.add_variable("h", (128,), "float16")
    k = g.add_variable("k", (128,), "float16")
    halves = {0: [(0, 64)], 1: [(64, 128)]}
    g.set_tile_mapping(h, halves)
    g.set_tile_mapping(k, halves)
    cs16 = g.add_compute_set("f16_add")
    g.add_vertex(cs16, "ScaledAdd", 0, data=h[:64], deltas=k[:64], a=1.0, b=1.0)
    g.add_vertex(cs16, "ScaledAdd", 1, data=h[64:], deltas=k[64:], a=1.0, b=1.0)
    f16 = g.add_function(ipu.Execute(cs16), "f16")
    z = g.add_variable("z", (64,), "float32")
    g.set_tile_mapping(z, 0)
    csc = g.add_compute_set("cast")
    g.add_vertex(csc, "Cast", 0, **{"in": h[:64], "out": z})
    cast = g.add_function(ipu.Execute(csc), "cast")

    def loads(*fs):
        return [ipu.CodeLoad(*fs)] if load else []

    prog = ipu.Sequence(*loads(f16), ipu.Call(f16), ipu.Execute(cs), *loads(cast), ipu.Call(cast),
                        *loads(f16), ipu.Call(f16))
    exe = ipu.compile(g, prog)
    engine = ipu.Engine(exe)
    engine.write_tensor(x, np.ones(256, np.float32))
    engine.write_tensor(y, np.ones(256, np.float32))
    return exe, engine


def load_json(path):
    with open(path) as fh:
        return json.load(fh)


def chromium_binary():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        for d in os.environ.get("PATH", "").split(os.pathsep):
            p = os.path.join(d, name)
            if os.path.isfile(p) and os.access(p, os.X_OK):
                return p
    return None
