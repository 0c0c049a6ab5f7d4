"""Template parameters of a vertex (the operation of popops' BinaryOp1DSupervisor<op, T>, of
Reduce<ReduceOp, ..., specialisation>): each value is its own vertex class, so it selects the
code a tile holds (once per value) and takes no vertex state."""
import numpy as np
import pytest

import codelets  # noqa: F401  (registers the built-in codelets)
import ipu
from codelets.elementwise import BINARY_OPS


def _binary_ops(ops, tiles=2, n=64):
    """One compute set with a BinaryOp vertex of each op in `ops` on every tile."""
    g = ipu.Graph(ipu.small_target(tiles))
    a = g.add_variable("a", (tiles * n,), ipu.FLOAT32, ipu.VARIABLE)
    b = g.add_variable("b", (tiles * n,), ipu.FLOAT32, ipu.VARIABLE)
    outs = []
    for v in (a, b):
        g.map_linearly(v)
    cs = g.add_compute_set("ops")
    for i, op in enumerate(ops):
        out = g.add_variable(f"out{i}", (tiles * n,), ipu.FLOAT32, ipu.VARIABLE)
        g.map_linearly(out)
        outs.append(out)
        starts = np.arange(tiles, dtype=np.int64) * n
        counts = np.full(tiles, n, np.int64)
        g.add_vertices(cs, "BinaryOp", np.arange(tiles), {"a": (a, starts, counts), "b": (b, starts, counts),
                                                          "out": (out, starts, counts)}, ip={"op": BINARY_OPS[op]})
    prog = ipu.Sequence([ipu.Execute(cs)])
    return g, prog, a, b, outs


def test_the_operation_is_no_vertex_state_and_each_operation_has_its_code():
    binop = ipu.get_codelet("BinaryOp")
    assert binop.state_bytes() == 6 * 3  # a, b, out; the op is the vertex class's template parameter
    one = ipu.compile(*_binary_ops(["add"])[:2]).plan.categories
    two_same = ipu.compile(*_binary_ops(["add", "add"])[:2]).plan.categories
    two_ops = ipu.compile(*_binary_ops(["add", "mul"])[:2]).plan.categories
    code = binop.code_bytes((ipu.FLOAT32,) * 3)
    assert np.all(one["vertex_state"] == 18) and np.all(two_ops["vertex_state"] == 36)
    assert np.all(two_same["vertex_code"] == code)  # one instantiation, held once per tile
    assert np.all(two_ops["vertex_code"] == 2 * code)  # add and mul: two codelets' code


def test_results_do_not_depend_on_the_code_grouping():
    g, prog, a, b, outs = _binary_ops(["add", "mul", "sub"])
    eng = ipu.Engine(ipu.compile(g, prog))
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal(128).astype(np.float32), rng.standard_normal(128).astype(np.float32)
    eng.write_tensor(a, x)
    eng.write_tensor(b, y)
    eng.run()
    for out, want in zip(outs, (x + y, x * y, x - y)):
        np.testing.assert_array_equal(eng.read_tensor(out), want)


def test_a_template_parameter_must_be_an_int_parameter():
    with pytest.raises(ValueError, match="template_params"):
        class Bad(ipu.Codelet):  # noqa: F841
            name = "BadTemplate"
            fields = (ipu.Field("out", ipu.OUT),)
            int_params = ("n",)
            template_params = ("op",)
