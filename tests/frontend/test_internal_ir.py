"""popart._internal.ir directly (no popxl-addons): the views read the popxl IR, their edits change
it, and the lowering runs what was edited (an input added to a call site, an op cloned into
another graph and erased from the first, a removed graph output, inputs marked modified, a loop
input routed through a repeat's wrapper graph)."""
import numpy as np
import pytest

import popart
import popart._internal.ir as _ir
import popxl
from popxl import ops
from popxl.transforms.autodiff import ExpectedConnection, GradGraphInfo


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")


def _run(ir, feeds=None):
    with popxl.Session(ir, "ipu_model") as sess:
        return sess.run(feeds or {})


def test_views_read_the_ir():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32), name="x")
        g = ir.create_graph(lambda a: a * 2.0 + 1.0, x)
        y, = ops.call(g, x)
    pg = g._pb_graph
    assert pg is g._pb_graph and popxl.Graph._from_pb(pg) is g and pg == g._pb_graph and hash(pg) == hash(g._pb_graph)
    assert pg.id == _ir.GraphId(g.id) and pg.id.str() == g.id
    assert pg.getInputIds() == [g.inputs[0].id] and pg.getOutputIndex(g.outputs[0].id) == 0
    assert [op.opType() for op in pg.getOpSchedule(False)] == ["Mul", "Add"]
    call = y._pb_tensor.getProducer()
    assert isinstance(call, _ir.op.CallOp) and call.getCalledGraphs() == [pg]
    assert call.inIndex(x._pb_tensor) == 0 and call.getInputIndexMap() == {0: x._pb_tensor}
    assert popxl.Tensor._from_pb_tensor(call.outTensor(0)) is y
    assert x._pb_tensor.consumers.getOps() == [call] and not x._pb_tensor.hasProducer()
    assert y._pb_tensor.info.shape() == [3] and y._pb_tensor.info.dataType() == "FLOAT"
    assert pg in ir._pb_ir.getAllGraphs() and ir._pb_ir.getMainGraph().getCalledGraphs() == [pg]
    with pytest.raises(AttributeError, match="getSessionOptions"):
        ir._pb_ir.compileIr()


def test_a_call_site_that_gains_an_input_lowers_it():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.full(3, 2.0, np.float32), name="x")
        w = popxl.variable(np.array([1.0, 2.0, 3.0], np.float32), name="w")
        g = ir.create_graph(lambda a: a * 2.0, x)
        y, = ops.call(g, x)
        with g:
            extra = popxl.graph_input((3,), popxl.float32, "w")
            out = g.outputs[0] + extra
        call = y.producer._pb_op
        idx = call.subgraphInToOpInIndex(g._pb_graph.getInputIndex(extra.id))
        assert not call.hasInput(idx)
        call.connectInTensor(idx, w.id)
        g._pb_graph.markAsOutput(out.id)  # the call site gets a second output
        y2 = popxl.Tensor._from_pb_tensor(call.outTensor(1))
        s = popxl.d2h_stream((3,), popxl.float32, "y")
        ops.host_store(s, y2)
    np.testing.assert_allclose(_run(ir)[s], [5.0, 6.0, 7.0])


def test_add_modified_on_an_input_the_call_does_not_feed_is_refused():
    # before: the missing input's position (None) went into op.modified and the lowering failed
    # later, far from the call
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones(3, np.float32), name="x")
        g = ir.create_graph(lambda a: a * 2.0, x)
        y, = ops.call(g, x)
        with g:
            popxl.graph_input((3,), popxl.float32, "extra")
    call = y.producer._pb_op
    idx = call.subgraphInToOpInIndex(1)
    assert not call.hasInput(idx)
    with pytest.raises(IndexError, match="connect it before addModified"):
        call.addModified(idx, [_ir.view.Region.getFull([3])])
    assert call._op.modified == ()


def test_modified_regions_make_a_call_write_back():
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.zeros(2, np.float32), name="v")
        g = ir.create_graph(lambda a: ops.var_updates.accumulate_(a, popxl.constant(np.ones(2, np.float32))), v)
        ops.call(g, v)
        call = ir.main_graph.ops[-1]._pb_op
        sub_in = g._pb_graph.getInputTensor(0)
        regions = sub_in.modifiedRegionsByOps(g._pb_graph.getOps())
        assert not regions[0].isEmpty() and regions[0] == _ir.view.Region.getFull((2,))
        assert _ir.view.Region.getEmpty(1).isEmpty()
        call.addModified(0, regions)
        assert call.modifies(0)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        sess.run()
        np.testing.assert_allclose(sess.get_tensor_data(v), [2.0, 2.0])


def test_clone_into_another_graph_and_erase():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.arange(4, dtype=np.float32), name="x")
        y = ops.exp(x)
        z = y * 3.0
        s = popxl.d2h_stream((4,), popxl.float32, "z")
        ops.host_store(s, z)
    main = ir.main_graph._pb_graph
    exp_op = y._pb_tensor.getProducer()
    sub = ir.create_empty_graph("moved")
    with sub:
        xin = popxl.graph_input((4,), popxl.float32, "x")
    clone = exp_op.cloneIntoGraph(sub._pb_graph)
    clone.connectInTensor(0, xin.id)
    clone.createAndConnectOutTensor(0, sub._create_tensor_id("exp"))
    clone.setup()
    with sub:
        popxl.graph_output(popxl.Tensor._from_pb_tensor(clone.outTensor(0)))
    exp_op.disconnectAllInputs()
    exp_op.disconnectAllOutputs()
    main.eraseOp(exp_op.id)
    assert exp_op not in main.getOps() and clone in sub._pb_graph.getOps()
    with ir.main_graph:  # the multiply now reads the moved op's result through a call
        out, = ops.call(sub, x)
        mul = z._pb_tensor.getProducer()
        mul.disconnectInTensor(0)
        mul.connectInTensor(0, out.id)
        mul.setup()  # its input is produced after it: the schedule is restored
    ids = [op.id for op in sorted(ir.main_graph.ops, key=lambda o: o.id)]
    assert [op.type for op in sorted(ir.main_graph.ops, key=lambda o: o.id)] == ["call", "mul", "host_store"], ids
    np.testing.assert_allclose(_run(ir)[s], 3 * np.exp(np.arange(4)), rtol=1e-6)


def test_remove_output_and_expected_connections_round_trip():
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda a, b: (a * b, a + b), popxl.TensorSpec((2,), popxl.float32),
                            popxl.TensorSpec((2,), popxl.float32))
        info = popxl.transforms.autodiff(g)
    bwd = info._pb_bwd_graph_info
    assert bwd.bwdGraphId == _ir.GraphId(info.graph.id)
    again = GradGraphInfo._from_pb(ir._pb_ir, g._pb_graph, bwd)
    assert again.expected_inputs == info.expected_inputs and again.expected_outputs == info.expected_outputs
    ec = info.expected_inputs[0]
    assert ec._pb_ec.type == _ir.ExpectedConnectionType.FwdGrad
    assert ExpectedConnection._from_pb(g._pb_graph, ec._pb_ec) == ec
    n = len(info.graph.outputs)
    info.graph._pb_graph.removeOutput(n - 1)
    assert len(info.graph.outputs) == n - 1


def test_loop_op_wrapper_routes_a_new_input_into_the_repeated_graph():
    """As popxl-addons' route_tensor_into_graph: a loop input added on the LoopOp, connected by the
    wrapper graph's CallOp to a new input of the repeated graph, marked modified."""
    ir = popxl.Ir()
    with ir.main_graph:
        acc = popxl.variable(np.zeros(3, np.float32), name="acc")
        x = popxl.variable(np.ones(3, np.float32), name="x")
        body = ir.create_graph(lambda c: c + 1.0, x)
        info = ops.repeat_with_info(body, 4, x)
        loop = info._op
        assert isinstance(loop, _ir.op.LoopOp) and loop.getTripCountValue() == 4
        wrapper = loop.getCalledGraphs()[0]
        assert wrapper.getCalledGraphs() == [body._pb_graph]
        call, = wrapper.getOps()
        assert isinstance(call, _ir.op.CallOp)
        assert loop.getInputIndexMap() == {2: x._pb_tensor} and loop.getNumExplicitInputs() == 3
        # route acc into the body: loop input, wrapper tensor, body input, modified everywhere
        wrapped = popxl.Graph._from_pb(wrapper)
        wid = wrapped._create_tensor_id("acc")
        loop.addLoopInput(loop.getNumExplicitInputs(), acc.id, wid, False)
        vi = wrapper.getInputIndex(wid)
        full = [_ir.view.Region.getFull((3,))]
        loop.addModified(vi, full)
        with body:
            acc_in = popxl.graph_input((3,), popxl.float32, "acc")
            ops.var_updates.accumulate_(acc_in, popxl.constant(np.full(3, 2.0, np.float32)))
        call.connectInTensor(call.subgraphInToOpInIndex(body._pb_graph.getInputIndex(acc_in.id)), wid)
        call.addModified(1, full)
        assert loop.hasInputTensor(acc._pb_tensor)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        np.testing.assert_allclose(sess.get_tensor_data(acc), [8.0] * 3)


def test_op_settings_hooks_topocons_and_patterns():
    ir = popxl.Ir()
    seen = []
    with ir.main_graph, popxl.name_scope("layer"), popxl.ipu(0):
        ctx = popxl.get_current_context()
        st = ctx._get_op_settings("MyOp")
        assert st.name == "layer/MyOp" and st.vgraphId == 0 and st.tileSet == "compute"
        h = ir.main_graph.register_op_created_hook(seen.append)
        x = popxl.variable(np.ones(2, np.float32))
        a = x + 1.0
        b = x * 2.0
        ir.main_graph.remove_op_created_hook(h)
    assert seen == [a.producer._pb_op, b.producer._pb_op] and all(isinstance(o, _ir.Op) for o in seen)
    tc = ir.main_graph._pb_graph.topoCons()
    tc.insert(seen[1], seen[0])
    assert tc.contains(seen[1], seen[0]) and a.producer.after == (b.producer,)
    ir._pb_ir.setPatterns(_ir.patterns.Patterns(_ir.patterns.PatternsLevel.Minimal))
    assert ir._pb_ir.getPatterns().isPatternEnabled("PostNRepl")
    with ir.main_graph:
        unused = ops.identity(x)
    ir._pb_ir.applyPreAliasPatterns(ir.main_graph._pb_graph)  # an identity nothing reads is dropped
    assert unused.producer not in ir.main_graph.ops


def test_session_write_weights_through_the_pb_session():
    ir = popxl.Ir()
    with ir.main_graph:
        w = popxl.variable(np.zeros(3, np.float32), name="w")
        s = popxl.d2h_stream((3,), popxl.float32, "y")
        ops.host_store(s, w + 1.0)
    with popxl.Session(ir, "ipu_model") as sess:
        sess._pb_session.writeWeights(popart.PyWeightsIO({w.id: np.array([1, 2, 3], np.float32)}))
        sess._pb_session.weightsFromHost()
        np.testing.assert_allclose(sess.run()[s], [2, 3, 4])
        with pytest.raises(KeyError, match="not a variable"):
            sess._pb_session.writeWeights(popart.PyWeightsIO({"nope": np.zeros(3)}))


def test_a_removed_graph_output_leaves_its_call_sites():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.array([1.0, 2.0], np.float32), name="x")
        g = ir.create_graph(lambda a: (a + 1.0, a * 10.0), x)
        y, unused = ops.call(g, x)
        s = popxl.d2h_stream((2,), popxl.float32, "y")
        ops.host_store(s, y)
    g._pb_graph.removeOutput(1)
    call = y.producer
    assert len(g.outputs) == 1 and call.outputs == (y,) and unused.producer is None
    with ir.main_graph:
        z, = ops.call(g, x)  # new call sites see the graph as it is now
    assert len(z.producer.outputs) == 1
    np.testing.assert_allclose(_run(ir)[s], [2.0, 3.0])
    ir = popxl.Ir()  # the Session owns the Ir it compiled (PopXL's rule): a new one for the next check
    with ir.main_graph:
        x = popxl.variable(np.array([1.0, 2.0], np.float32), name="x")
        y2, w = ops.call(ir.create_graph(lambda a: (a + 1.0, a * 10.0), x), x)
        ops.host_store(popxl.d2h_stream((2,), popxl.float32, "w"), w)
    with pytest.raises(RuntimeError, match="is used at call site"):
        w.producer.attrs["graph"]._pb_graph.removeOutput(1)


def test_edits_through_the_views_are_refused_once_a_session_owns_the_ir():
    """PopXL's rule: the Session owns the Ir it compiled. Edits that only remove or rewire (which
    create nothing the Ir could refuse by itself) are refused too, before anything changes."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.array([1.0, 2.0], np.float32), name="x")
        g = ir.create_graph(lambda a: (a + 1.0, a * 10.0), x)
        y, unused = ops.call(g, x)
        z = y * 2.0
        s = popxl.d2h_stream((2,), popxl.float32, "z")
        ops.host_store(s, z)
    sess = popxl.Session(ir, "ipu_model")
    main = ir.main_graph._pb_graph
    call = y._pb_tensor.getProducer()
    mul = z._pb_tensor.getProducer()
    n_ops = len(ir.main_graph.ops)
    edits = [
        lambda: main.eraseOp(mul.id),
        lambda: g._pb_graph.removeOutput(1),
        lambda: main.removeIsolatedTensors(True),
        lambda: mul.disconnectAllInputs(),
        lambda: mul.disconnectInTensor(0),
        lambda: main.topoCons().insert(mul, call),
        lambda: call.addModified(0, [_ir.view.Region.getFull([2])]),
    ]
    for edit in edits:
        with pytest.raises(RuntimeError, match="already compiled by a popxl.Session"):
            edit()
    # nothing changed: the same ops, inputs and outputs, and the session runs as compiled
    assert len(ir.main_graph.ops) == n_ops and len(g.outputs) == 2 and z.producer.inputs[0] is y
    with sess:
        np.testing.assert_allclose(sess.run()[s], [4.0, 6.0])


def test_op_classes_of_io_copies_and_init():
    """The isinstance classes popxl-addons' pipelining sorts ops by, with what it reads of them."""
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((2,), popxl.float32, "x")
        o = popxl.d2h_stream((2,), popxl.float32, "z")
        with popxl.ipu(0):
            x = ops.host_load(s, "x")
            y = x.copy_to_ipu(1)
        with popxl.ipu(1):
            z = y + ops.init((2,), popxl.float32, "zeros")
            ops.host_store(o, z)
    load, copy, init, add, store = (op._pb_op for op in ir.main_graph.ops)
    assert isinstance(load, _ir.op.exchange.HostLoadOp) and load.getHostStreamTensorId() == s.tensor_id
    assert isinstance(copy, _ir.op.IpuCopyOp) and not isinstance(copy, _ir.op.exchange.HostLoadOp)
    assert copy.getSourceIpu(x.id) == 0 and copy.getDestIpu() == 1
    assert isinstance(init, _ir.op.InitOp) and init.outTensor(0).consumers.getOps() == [add]
    assert isinstance(store, _ir.op.exchange.HostStoreOp) and store.getHostStreamTensorId() == o.tensor_id
    assert not isinstance(add, (_ir.op.IpuCopyOp, _ir.op.InitOp, _ir.op.exchange.HostLoadOp))
    with popxl.Session(ir, "ipu_model") as sess:
        np.testing.assert_array_equal(sess.run({s: np.array([1.0, 2.0], np.float32)})[o], [1.0, 2.0])


def test_weights_fragments_of_the_execution_context_run_with_the_weight_transfers():
    """As popxl-addons' seed_variable: a remote load in the weights-from-host fragment and a store
    in the weights-to-host fragment move a remote variable's value in and out around the program."""
    from popxl.context import _execution_context
    assert _ir.ExecutionContext is popxl.ExecutionContext
    ir = popxl.Ir()
    with ir.main_graph:
        buf = popxl.remote_buffer((2,), popxl.float32, 1)
        v = popxl.remote_variable(np.array([1.0, 2.0], np.float32), buf, 0, name="v")
        with _execution_context(_ir.ExecutionContext.WeightsFromHostFragment):
            t = ops.remote_load(buf, 0, "v_loaded")
        with _execution_context(_ir.ExecutionContext.WeightsToHostFragment):
            ops.remote_store(buf, 0, t)
        ops.var_updates.accumulate_(t, popxl.constant(np.full(2, 10.0, np.float32)))
    load = t._pb_tensor.getProducer()
    assert isinstance(load, _ir.op.exchange.RemoteLoadOp)
    with popxl.Session(ir, "ipu_model") as sess:
        sess.run()
        sess.run()
    np.testing.assert_array_equal(sess.get_tensor_data(v), [21.0, 22.0])


def test_bwd_graph_info_built_by_hand_makes_a_grad_graph_info():
    """popxl-addons' autodiff and recomputation build an `_ir.BwdGraphInfo` from graph ids and
    expected connections (forward ids from getInputId / getOutputId) and read it back."""
    ir = popxl.Ir()
    with ir.main_graph:
        g = ir.create_graph(lambda a, b: a * b, popxl.TensorSpec((2,), popxl.float32),
                            popxl.TensorSpec((2,), popxl.float32))
        info = popxl.transforms.autodiff(g)
    pg = g._pb_graph
    assert pg.getOutputId(0) == g.outputs[0].id and pg.getInputId(1) == g.inputs[1].id
    ins = [_ir.ExpectedConnection(ec._pb_ec.fwdId, ec._pb_ec.type) for ec in info.expected_inputs]
    outs = [_ir.ExpectedConnection(pg.getInputId(i), _ir.ExpectedConnectionType.Fwd) for i in (1, 0)]
    bwd = _ir.BwdGraphInfo(info.graph._pb_graph.id, ins, outs)
    again = GradGraphInfo._from_pb(ir._pb_ir, pg, bwd)
    assert again.graph is info.graph and again.forward_graph is g
    assert again.expected_inputs == info.expected_inputs
    assert [ec.fwd_tensor for ec in again.expected_outputs] == [g.inputs[1], g.inputs[0]]
    with pytest.raises(KeyError):  # a backward graph id the Ir does not have
        GradGraphInfo._from_pb(ir._pb_ir, pg, _ir.BwdGraphInfo(_ir.GraphId("no_such_graph"), [], []))


def _contains(graph, op_type, cls):
    return any(op.opType() == op_type and isinstance(op, cls) for op in graph._pb_graph.getOps())


def test_every_op_popxl_records_has_popart_class_and_op_type():
    ir = popxl.Ir(replication=2)
    with ir.main_graph:
        a = popxl.variable(np.ones((2, 3), np.float32), name="a")
        b = popxl.variable(np.ones((2, 3), np.float32), name="b")
        idx = popxl.constant(np.array([0, 1], np.int32))
        ops.add(a, b)
        ops.add_(a, b)
        a - b
        ops.gather(a, idx)
        ops.relu_(ops.relu(a))
        ops.reshape_(ops.reshape(a, (3, 2)), (6,))
        ops.slice_(a, 0, 1, axis=0)
        ops.negate(a)
        ops.sum(a)
        ops.collectives.replicated_all_gather(a)
        ops.collectives.replicated_all_reduce_(b)
        ops.var_updates.accumulate_(a, b)
        ops.host_load(popxl.h2d_stream((2, 3), popxl.float32), "x")
        ops.onehot(idx, popxl.constant(3), popxl.constant(np.array([0.0, 1.0], np.float32)), axis=1)
        ops.isinf(a)
        ops.dynamic_slice(a, popxl.constant(np.array([0], np.uint32)), [0], [1], True)
        ops.tied_gather(a, idx)
        ops.repeat(ir.create_graph(lambda t: t + 1, a), 2, a)
    g = ir.main_graph
    for op_type, cls in [("Add", _ir.op.AddOp), ("AddLhsInplace", _ir.op.AddLhsInplaceOp), ("Sub", _ir.op.SubtractOp),
                         ("Gather", _ir.op.GatherOp), ("Relu", _ir.op.ReluOp), ("ReluInplace", _ir.op.ReluInplaceOp),
                         ("Reshape", _ir.op.ReshapeOp), ("ReshapeInplace", _ir.op.ReshapeInplaceOp),
                         ("SliceInplace", _ir.op.SliceInplaceOp), ("Neg", _ir.op.NegateOp),
                         ("ReduceSum", _ir.op.ReduceSumOp), ("Accumulate", _ir.op.AccumulateOp),
                         ("ReplicatedAllGather", _ir.op.collectives.ReplicatedAllGatherOp),
                         ("ReplicatedAllReduceInplace", _ir.op.collectives.ReplicatedAllReduceInplaceOp),
                         ("HostLoad", _ir.op.exchange.HostLoadOp), ("OneHot", _ir.op.OnehotOp),
                         ("IsInf", _ir.op.IsInf), ("DynamicSlice", _ir.op.dynamic.DynamicSliceOp),
                         ("PopartTiedGather", _ir.op.TiedGatherOp),
                         ("Loop", _ir.op.LoopOp)]:
        assert _contains(g, op_type, cls), (op_type, cls)
    # an op's class is its own: an in-place add is not an AddOp, a gather not a matmul
    assert not _contains(g, "AddLhsInplace", _ir.op.AddOp)
    assert not any(isinstance(op, _ir.op.MatMulOp) for op in g._pb_graph.getOps())
    # the gather keeps the methods of ops with an available-memory proportion
    gather = next(op for op in g._pb_graph.getOps() if isinstance(op, _ir.op.GatherOp))
    gather.setAvailableMemoryProportion(0.3)
    assert gather.getAvailableMemoryProportion() == pytest.approx(0.3)


def test_every_op_type_of_the_table_has_a_class_in_ir_op():
    from popxl.op_table import OP_TYPES
    from popxl._pb.op_classes import names_of
    modules = {"": _ir.op, "exchange": _ir.op.exchange, "collectives": _ir.op.collectives, "dynamic": _ir.op.dynamic}
    for op_type in OP_TYPES:
        if op_type == "rts_shard":  # ours: PopART shards a variable without an op
            continue
        for inplace in (False, True):
            name, cls_name, module = names_of(op_type, inplace)
            assert isinstance(getattr(modules[module], cls_name), type), (op_type, cls_name)
            assert name and (cls_name.endswith("Op") or cls_name in ("IsInf", "IsNaN"))  # PopART's two
