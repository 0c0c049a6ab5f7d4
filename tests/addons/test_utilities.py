"""popxl-addons' utilities over the _ir views, unchanged: TaskSession and write_variables_pb
(the PopART session's writeWeights), seed_variable (ops in the weights-to/from-host fragments),
FLOP counting (op types, called graphs, trip counts), available-memory proportions, pre-alias
patterns, print_schedule, repeat_graph and the graph cache."""
import numpy as np

import popxl
from popxl import ops

from .conftest import needs


def _mlp(addons):
    from popxl_addons.layers import Linear

    class Mlp(addons.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = Linear(6), Linear(2)

        def build(self, x):
            return self.b(ops.relu(self.a(x)))

    return Mlp()


def test_task_session_writes_weights_through_popart(addons, addons_branch):
    from popxl_addons.task_session import write_variables_pb
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((3, 4), popxl.float32, "x")
        y_s = popxl.d2h_stream((3, 2), popxl.float32, "y")
        facts, g = _mlp(addons).create_graph(popxl.TensorSpec((3, 4), popxl.float32))
        v = facts.init()
        y, = g.bind(v).call(ops.host_load(x_s))
        ops.host_store(y_s, y)
    sess = addons.TaskSession([x_s], [y_s], v, ir=ir, device_desc="ipu_model")
    rng = np.random.default_rng(0)
    new = {t: rng.normal(size=t.shape).astype(np.float32) for t in v.tensors}
    x = rng.normal(size=(3, 4)).astype(np.float32)
    with sess:
        write_variables_pb(sess, new)
        y = sess.run({x_s: x})[y_s]
        state = sess.get_named_tensors_data()
    w = {name: new[t] for name, t in v.named_tensors.items()}
    h = np.maximum(x @ w["a.weight"] + w["a.bias"], 0)
    np.testing.assert_allclose(y, h @ w["b.weight"] + w["b.bias"], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(state.a.weight, w["a.weight"])
    if addons_branch != "sdk-release-3.0":  # TaskSession counts its steps from sdk-release-3.1
        assert sess.session_state["steps"] == 1


def test_seed_variable_loads_and_stores_in_the_host_fragments(addons):
    needs(addons, "popxl_addons", "seed_variable")
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        seed_var, seed = addons.seed_variable(1984)
        r = ops.random_uniform(seed, (4,))
        s = popxl.d2h_stream((4,), popxl.float32, "r")
        ops.host_store(s, r)
    fragments = {op.execution_context.name for op in ir.main_graph.ops if op.type.startswith("remote_")}
    assert fragments == {"WeightsFromHostFragment", "WeightsToHostFragment"}
    with popxl.Session(ir, "ipu_model") as sess:
        out = sess.run()[s]
        seeds = sess.get_tensor_data(seed_var)
    assert out.shape == (2, 4) and not np.array_equal(out[0], out[1])  # one seed per replica
    np.testing.assert_array_equal(seeds, popxl.create_seeds(1984, replicas=2))


def test_flops_memory_proportions_patterns_and_schedule(addons):
    ir = popxl.Ir()
    with ir.main_graph:
        facts, g = _mlp(addons).create_graph(popxl.TensorSpec((3, 4), popxl.float32))
        v = facts.init()
        x = popxl.variable(np.ones((3, 4), np.float32))
        g.bind(v).call(x)
        body = ir.create_graph(lambda a, b: a @ b, x, popxl.variable(np.ones((4, 4), np.float32)))
        ops.repeat(body, 5, x, popxl.variable(np.ones((4, 4), np.float32)))
    flops = addons.evaluate_FLOPs(ir.main_graph)
    mm = 2 * 4 * 3 * 6 + 2 * 6 * 3 * 2
    adds = 3 * 6 + 3 * 2
    assert flops["TOT"] == mm + adds + 5 * 2 * 4 * 3 * 4, flops
    assert addons.total_FLOPs(ir) == flops["TOT"]
    addons.transforms.set_available_memory_proportion_by_ipu(ir, [0.3])
    props = [op.attrs["available_memory_proportion"] for gr in ir.graphs for op in gr.ops if op.type == "matmul"]
    assert props == [0.3] * 3
    from popxl_addons.patterns import apply_pre_alias_patterns
    apply_pre_alias_patterns(ir, "default")
    text = g.print_schedule()
    assert "MatMul" in text and "Relu" in text and "a.weight=" in text


def test_repeat_graph_moves_the_ops_into_a_loop(addons):
    from popxl_addons.transforms.repeat_graph import repeat_graph
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.zeros(3, np.float32), name="v")
        ops.var_updates.accumulate_(v, popxl.constant(np.arange(3, dtype=np.float32)))
    sub = repeat_graph(ir.main_graph, 4)
    assert [op.type for op in ir.main_graph.ops] == ["repeat"] and [op.type for op in sub.ops] == ["accumulate"]
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        np.testing.assert_allclose(sess.get_tensor_data(v), 4 * np.arange(3))


def test_graph_cache_reuses_graphs(addons):
    ir = popxl.Ir()
    with ir.main_graph:
        @addons.function
        def double(t):
            return t * 2.0

        x = popxl.variable(np.ones(2, np.float32))
        y, = double(x)
        z, = double(y)
    calls = [op for op in ir.main_graph.ops if op.type == "call"]
    assert len(calls) == 2 and calls[0].attrs["graph"] is calls[1].attrs["graph"]
