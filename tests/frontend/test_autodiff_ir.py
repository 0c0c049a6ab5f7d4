"""popxl.transforms at the IR level: the structure autodiff builds (expected connections, stitched
forward outputs, call-site helpers), errors, and the other transforms (decompose_sum,
merge_exchange, io_tile_exchange). Numerical checks of the gradients are in tests/transforms."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops
import popxl.transforms as T
from popxl.transforms import ExpectedConnection, ExpectedConnectionType, GradGraphInfo, autodiff

Fwd, FwdGrad = ExpectedConnectionType.Fwd, ExpectedConnectionType.FwdGrad
F32 = popxl.float32


def spec(*shape, dtype=F32):
    return popxl.TensorSpec(shape, dtype)


def check_schedule(ir):
    """Id order is a valid schedule in every graph: producers before consumers, ids unique."""
    ids = [op.id for g in ir.graphs for op in g.ops]
    assert len(ids) == len(set(ids))
    for g in ir.graphs:
        for op in g.ops:
            for t in op.inputs:
                assert t.graph is g
                if t.producer is not None:
                    assert t.producer.id < op.id, f"{t.producer} scheduled after {op}"


def linear(x, w, b):
    y = x @ w
    return ops.tanh(y + b)


@pytest.fixture
def mlp(ir):
    with ir.main_graph:
        g = ir.create_graph(linear, spec(2, 3), spec(3, 4), spec(4))
    return g


def test_importable_from_popxl():
    assert popxl.transforms is T
    assert T.autodiff is autodiff
    assert callable(T.decompose_sum) and callable(T.merge_exchange) and callable(T.io_tile_exchange)


def test_default_connections(ir, mlp):
    fwd_out = mlp.outputs[0]
    info = autodiff(mlp)
    assert isinstance(info, GradGraphInfo)
    assert info.forward_graph is mlp
    assert info.graph is not mlp and info.graph in ir.graphs
    ins = info.expected_inputs
    # the gradient of the output first, then the forward values it needs
    assert ins[0].connection_type is FwdGrad and ins[0].fwd_tensor is fwd_out
    assert all(c.connection_type is Fwd for c in ins[1:])
    assert {c.fwd_tensor for c in ins[1:]} == {mlp.inputs[0], mlp.inputs[1], fwd_out}  # x, w, tanh output
    assert len(info.graph.inputs) == len(ins)
    for t, c in zip(info.graph.inputs, ins):
        assert (t.shape, t.dtype) == (c.fwd_tensor.shape, c.fwd_tensor.dtype)
    # one gradient per forward input, in order
    assert [c.fwd_tensor for c in info.expected_outputs] == list(mlp.inputs)
    assert all(c.connection_type is FwdGrad for c in info.expected_outputs)
    assert [t.shape for t in info.graph.outputs] == [(2, 3), (3, 4), (4,)]
    # as PopXL: inputs / outputs are the forward tensors of the expected connections
    assert info.inputs == tuple(c.fwd_tensor for c in ins) and info.outputs == tuple(mlp.inputs)
    check_schedule(ir)


def test_intermediates_become_forward_outputs(ir):
    def fwd(x):
        h = ops.sin(x)  # cos(x) needed: x is an input
        e = ops.exp(h)  # the output e is needed
        m = h * e  # needs h and e
        return ops.sum(m)

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3))
        (x,) = g.inputs
        out = g.outputs[0]
        n_out = len(g.outputs)
        info = autodiff(g)
    fwd_needed = [c.fwd_tensor for c in info.expected_inputs if c.connection_type is Fwd]
    assert g.outputs[0] is out and n_out == 1
    for t in fwd_needed:
        assert t in g.inputs or t in g.outputs, t
    added = g.outputs[1:]
    assert added and all(t.producer is not None for t in added)


def test_call_sites_get_the_new_outputs(ir):
    def fwd(x):
        return ops.sum(ops.exp(ops.sin(x)))

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3))
        x = popxl.variable(np.ones(3, np.float32))
        early = ops.call_with_info(g, x)  # a call made before autodiff
        info = autodiff(g)
        assert len(early.outputs) == len(g.outputs) > 1
        fwd_info = ops.call_with_info(g, x)
        d = info.inputs_dict(fwd_info)
        for grad_in, conn in zip(info.graph.inputs, info.expected_inputs):
            if conn.connection_type is Fwd:
                assert d[grad_in] is fwd_info.graph_to_parent(conn.fwd_tensor)
            else:
                assert grad_in not in d
        seed = popxl.constant(1.0)
        grad_info = ops.call_with_info(info.graph, seed, inputs_dict=d)
        (gx,) = grad_info.outputs
        assert info.fwd_graph_ins_to_grad_parent_outs(grad_info) == {g.inputs[0]: gx}
        assert info.fwd_parent_ins_to_grad_parent_outs(fwd_info, grad_info) == {x: gx}
    check_schedule(ir)


def test_grads_provided_and_required_order(ir):
    def fwd(a, b):
        return a * b, a + b, ops.exp(b)

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(2), spec(2))
        a, b = g.inputs
        o0, o1, o2 = g.outputs
        info = autodiff(g, grads_provided=[o2, o0], grads_required=[b, a])
    grads = [c for c in info.expected_inputs if c.connection_type is FwdGrad]
    assert [c.fwd_tensor for c in grads] == [o2, o0]
    assert [c.connection_type for c in info.expected_inputs[:2]] == [FwdGrad, FwdGrad]
    assert [c.fwd_tensor for c in info.expected_outputs] == [b, a]


def test_required_gradient_without_path_is_zero(ir):
    def fwd(x, y, i):
        return x * 2.0 + ops.cast(ops.greater(y, 0.0), F32) + ops.cast(i, F32) + ops.detach(y)

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3), spec(3), spec(3, dtype=popxl.int32))
        info = autodiff(g)
    gx, gy, gi = info.graph.outputs
    assert gy.producer.type == "init" and gy.producer.attrs["init_type"] == "zero"
    assert gi.producer.type == "init" and gi.dtype == popxl.int32
    assert gx.producer.type != "init"
    # nothing of the non-differentiable paths is needed by the gradient
    assert all(c.fwd_tensor.dtype == F32 for c in info.expected_inputs)


def test_partial_gradients_are_summed_and_decompose_sum_reorders(ir):
    def fwd(x):
        return ops.sin(x) + ops.exp(x) * 3.0 + ops.cos(x) + x * x

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(4))
        info = autodiff(g)
    gg = info.graph
    sums = [op for op in gg.ops if op.attrs.get("grad_sum")]
    assert len(sums) == 4  # five partial gradients of x: four additions, one group
    assert len({op.attrs["grad_sum"] for op in sums}) == 1
    out = gg.outputs[0]
    assert out.producer in sums

    from popxl.reference import run_graph
    xv = np.linspace(-1, 1, 4)
    env_ins = _eval_inputs(info, g, [xv])
    before = run_graph(gg, env_ins, upcast=True)[0]
    assert T.decompose_sum(gg) is gg
    check_schedule(ir)
    after = run_graph(gg, env_ins, upcast=True)[0]
    np.testing.assert_allclose(after, before)
    assert gg.outputs[0] is out
    # every addition now runs right after its newest operand
    order = sorted(gg.ops, key=lambda o: o.id)
    pos = {id(o): i for i, o in enumerate(order)}
    for op in sums:
        newest = max((pos[id(t.producer)] for t in op.inputs if t.producer is not None), default=-1)
        assert pos[id(op)] == newest + 1


def _eval_inputs(info, g, xs):
    from popxl.reference import evaluate
    env = evaluate(g, xs, upcast=True)
    out = []
    for c in info.expected_inputs:
        out.append(np.ones(c.fwd_tensor.shape) if c.connection_type is FwdGrad else env[c.fwd_tensor])
    return out


def test_nested_call_and_return_all_grad_graphs(ir):
    def inner(x):
        return ops.sin(ops.exp(x))  # the gradient needs exp(x), an intermediate

    with ir.main_graph:
        gi = ir.create_graph(inner, spec(3))

        def outer(x):
            (y,) = ops.call(gi, x)
            return ops.sum(y * y)

        go = ir.create_graph(outer, spec(3))
        infos = autodiff(go, return_all_grad_graphs=True)
    assert set(infos) == {go, gi}
    assert infos[gi].forward_graph is gi and infos[go].forward_graph is go
    call = next(op for op in infos[go].graph.ops if op.type == "call")
    assert call.attrs["graph"] is infos[gi].graph
    # the inner call op in the outer graph got the inner activations as outputs
    fwd_call = next(op for op in go.ops if op.type == "call")
    assert len(fwd_call.outputs) == len(gi.outputs) > 1
    check_schedule(ir)


def test_called_graphs_grad_info_is_used(ir):
    def inner(x):
        return ops.exp(x)

    with ir.main_graph:
        gi = ir.create_graph(inner, spec(3))
        inner_info = autodiff(gi)

        def outer(x):
            (y,) = ops.call(gi, x)
            return ops.sum(y)

        go = ir.create_graph(outer, spec(3))
        n_graphs = len(ir.graphs)
        infos = autodiff(go, called_graphs_grad_info={gi: inner_info}, return_all_grad_graphs=True)
    assert infos[gi] is inner_info
    assert len(ir.graphs) == n_graphs + 1  # only the outer gradient graph is new
    call = next(op for op in infos[go].graph.ops if op.type == "call")
    assert call.attrs["graph"] is inner_info.graph


def test_repeat_stacks_activations(ir):
    def body(h, w):
        return ops.tanh(h * w)

    with ir.main_graph:
        gb = ir.create_graph(body, spec(3), spec(3))

        def fwd(h, w):
            (o,) = ops.repeat(gb, 5, h, w)
            return o

        g = ir.create_graph(fwd, spec(3), spec(3))
        info = autodiff(g)
    rep = next(op for op in g.ops if op.type == "repeat")
    body2 = rep.attrs["graph"]
    assert body2 is not gb  # a copy of the body that also stacks
    assert rep.attrs["num_carried"] == len(body2.outputs) == len(rep.outputs) > 1
    stacks = [t for t in rep.outputs if t.shape[:1] == (5,)]
    assert stacks
    needed = [c.fwd_tensor for c in info.expected_inputs if c.connection_type is Fwd]
    assert any(t in needed for t in stacks)
    grad_rep = next(op for op in info.graph.ops if op.type == "repeat")
    assert grad_rep.attrs["repeat_count"] == 5
    check_schedule(ir)


def test_conditional_branches(ir):
    def then_(x):
        return ops.exp(x)

    def else_(x):
        return x * 2.0

    with ir.main_graph:
        tg = ir.create_graph(then_, spec(3))
        eg = ir.create_graph(else_, spec(3))

        def fwd(c, x):
            (o,) = ops.conditional(c, tg, eg, [x], [x])
            return o

        g = ir.create_graph(fwd, spec(dtype=popxl.bool), spec(3))
        info = autodiff(g, grads_required=[g.inputs[1]])
    cond = next(op for op in g.ops if op.type == "conditional")
    t2, e2 = cond.attrs["then_branch"], cond.attrs["else_branch"]
    assert len(t2.outputs) == len(e2.outputs) == len(cond.outputs) == 2  # + exp(x) for the gradient
    grad_cond = next(op for op in info.graph.ops if op.type == "conditional")
    assert len(grad_cond.outputs) == 2  # x feeds both branches: one gradient per op input
    check_schedule(ir)


def test_placement_follows_forward_ops(ir):
    def fwd(x):
        with popxl.ipu(1):
            y = ops.exp(x)
        return y

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3))
        info = autodiff(g)
    assert {op.ipu for op in info.graph.ops} == {1}


# -- errors ---------------------------------------------------------------------------------------
def test_main_graph_rejected(ir):
    with pytest.raises(ValueError, match="main graph"):
        autodiff(ir.main_graph)
    with pytest.raises(TypeError):
        autodiff("graph")


def test_tensors_of_another_graph_rejected(ir, mlp):
    with ir.main_graph:
        other = ir.create_graph(lambda x: x * 2.0, spec(3))
    with pytest.raises(ValueError, match="not a tensor of the graph"):
        autodiff(mlp, grads_required=[other.inputs[0]])
    with pytest.raises(TypeError):
        autodiff(mlp, grads_provided=[np.zeros(3)])


def test_op_without_rule_named(ir):
    def fwd(x):
        idx = popxl.constant(np.zeros((3, 4), np.int32))
        return ops.grouped_scatter_reduce(x, idx, "sum", axis=1, axis_size=2, group_size=3)

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3, 4))
        n_graphs = len(ir.graphs)
        with pytest.raises(NotImplementedError, match="'grouped_scatter_reduce'"):
            autodiff(g)
    assert len(ir.graphs) == n_graphs  # no half-built gradient graph left behind


def test_op_without_rule_off_the_path_is_fine(ir):
    def fwd(x, y):
        return x * 2.0, ops.interpolate(y, (1.0, 1.0, 2.0, 2.0))

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3), spec(1, 1, 4, 4))
        info = autodiff(g, grads_required=[g.inputs[0]])
    assert len(info.outputs) == 1


def test_inplace_overwritten_value_rejected(ir):
    def fwd(x):
        y = x * 1.0
        return ops.gelu_(y)

    with ir.main_graph:
        g = ir.create_graph(fwd, spec(3))
        with pytest.raises(NotImplementedError, match="in-place"):
            autodiff(g)


def test_inputs_dict_needs_the_forward_call_site(ir, mlp):
    with ir.main_graph:
        other = ir.create_graph(lambda x: x * 2.0, spec(3))
        info = autodiff(mlp)
        site = ops.call_with_info(other, popxl.variable(np.zeros(3, np.float32)))
        with pytest.raises(ValueError, match="not the forward graph"):
            info.inputs_dict(site)
        with pytest.raises(TypeError):
            info.inputs_dict(object())


def test_records_cannot_be_constructed():
    with pytest.raises(TypeError):
        ExpectedConnection()
    with pytest.raises(TypeError):
        GradGraphInfo()


def test_expected_connection_repr_and_eq(ir, mlp):
    info = autodiff(mlp)
    c = info.expected_inputs[0]
    assert "FwdGrad" in repr(c)
    assert c == info.expected_inputs[0] and hash(c) == hash(info.expected_inputs[0])
    assert c != info.expected_inputs[1]


def test_no_rule_for_repeat_body_called_elsewhere_by_autodiff_of_body(ir):
    """Differentiating a graph that a repeat op uses as its body would change what the loop
    carries, so it is refused when activations must be added."""
    def body(h):
        return ops.sin(ops.exp(h))

    with ir.main_graph:
        gb = ir.create_graph(body, spec(3))
        x = popxl.variable(np.zeros(3, np.float32))
        ops.repeat(gb, 2, x)
        with pytest.raises(ValueError, match="repeat"):
            autodiff(gb)


# -- merge_exchange / io_tile_exchange ---------------------------------------------------------------
def test_merge_exchange_marks_exchange_ops(ir):
    with ir.main_graph:
        s1 = popxl.h2d_stream((2,), F32, "a")
        s2 = popxl.h2d_stream((2,), F32, "b")
        with T.merge_exchange():
            a = ops.host_load(s1)
            b = ops.host_load(s2)
        c = a + b
        with T.merge_exchange():
            ops.host_store(popxl.d2h_stream((2,), F32, "c"), c)
    loads = [a.producer, b.producer]
    assert loads[0].attrs["merge_exchange"] == loads[1].attrs["merge_exchange"]
    store = next(op for op in ir.main_graph.ops if op.type == "host_store")
    assert store.attrs["merge_exchange"] != loads[0].attrs["merge_exchange"]
    assert "merge_exchange" not in c.producer.attrs


def test_io_tile_exchange(ir):
    with ir.main_graph:
        s1 = popxl.h2d_stream((2,), F32, "a")
        s2 = popxl.d2h_stream((2,), F32, "b")
        v = popxl.variable(np.zeros(2, np.float32))
        with T.io_tile_exchange():
            a = ops.host_load(s1)
            ops.host_store(s2, v)
        assert a.producer.tile_set == "io"
        assert a.producer.attrs["merge_exchange"] is not None
        assert not a.producer.after
        with pytest.raises(RuntimeError, match="More than one op"):
            with T.io_tile_exchange():
                b = ops.host_load(s1)
                b + 1.0
        with T.io_tile_exchange(verify_overlap=False):
            b = ops.host_load(s1)
            b + 1.0
        with pytest.raises(RuntimeError):  # a store of a loaded tensor depends on the load
            with T.io_tile_exchange():
                ops.host_store(s2, ops.host_load(s1))
