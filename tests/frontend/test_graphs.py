"""Ir and graph construction: create_graph rules, call / repeat / conditional, contexts, streams."""
from typing import List

import numpy as np
import pytest

import popxl
import popxl.ops as ops


def test_ir_basics(ir):
    assert ir.main_graph.id == "" and ir.main_graph.is_main_graph and ir.graphs == (ir.main_graph,)
    assert ir.num_host_transfers == 1 and ir.replication_factor == 1 and ir.instance_replication_factor == 1
    ir.num_host_transfers = 4
    assert ir.num_host_transfers == 4
    with pytest.raises(ValueError):
        ir.num_host_transfers = 0
    with pytest.raises(ValueError):
        ir.replication_factor = 0
    assert popxl.Ir().id != ir.id and ir == ir and hash(ir) == hash(ir.id)
    assert popxl.Ir(replication="popdist").replication_factor >= 1  # PopDist settings (one replica without PopRun)
    g = ir.create_empty_graph()
    g2 = ir.create_empty_graph("blk")
    assert g.id == "graph_0" and g2.id == "blk_0" and ir.create_empty_graph("blk").id == "blk_1"
    assert ir.graphs[1:] == (g, g2, ir.graphs[-1])


def test_replica_grouping_trivial(ir):
    rg = ir.replica_grouping()
    assert (rg.stride, rg.group_size, rg.num_groups, rg.assignment, rg.is_const) == (1, 1, 1, [0], True)
    assert rg.transpose() == rg
    assert ir.replica_grouping_from_assignments([0]).assignment == [0]
    ir8 = popxl.Ir(replication=8)
    assert ir8.replica_grouping(2, 4).assignment == [0, 1, 0, 1, 0, 1, 0, 1]
    assert ir8.replica_grouping(1, 2).assignment == [0, 0, 1, 1, 2, 2, 3, 3]
    assert ir8.replica_grouping(4, 2).assignment == [0, 1, 2, 3, 0, 1, 2, 3]


def test_create_graph_signature_order_and_names(ir):
    with ir.main_graph:
        x = popxl.variable(np.zeros((2, 2), np.float32), name="x")
        i = popxl.variable(np.zeros((3,), np.int32), name="i")

        def fn(a, bs: List[popxl.TensorByRef], *rest, scale=2.0, **kw):
            w = popxl.graph_input(a.shape, a.dtype, "w")
            assert isinstance(bs, list) and len(rest) == 1 and scale == 3.0 and set(kw) == {"extra"}
            return a * scale + w, kw["extra"]

        g = ir.create_graph(fn, x, [x, x], i, scale=3.0, extra=popxl.TensorSpec((4,), popxl.float16))
    assert g.id == "test_create_graph_signature_order_and_names.fn_0"  # qualname without .<locals>
    assert [t.name for t in g.inputs] == ["a", "bs_0", "bs_1", "rest_0", "extra", "w"]
    assert [t.dtype for t in g.inputs][3:5] == [popxl.int32, popxl.float16]
    assert g.by_ref_inputs == (g.inputs[1], g.inputs[2])
    assert len(g.outputs) == 2 and g.outputs[1] is g.inputs[4]
    assert all(t.graph is g for t in g.tensors) and g.inputs[0].id == g.id + "/a"


def test_create_graph_module_and_names(ir):
    class Linear(popxl.Module):
        def __init__(self):
            self.w = None

        def build(self, x):
            self.w = popxl.graph_input((x.shape[-1], 3), x.dtype, "w")
            return x @ self.w

    with ir.main_graph:
        x = popxl.variable(np.zeros((2, 4), np.float32))
        lin = Linear()
        g = ir.create_graph(lin, x)
        g2 = ir.create_graph(lin, x.spec)
    assert g.id.endswith("Linear_0") and g2.id.endswith("Linear_1") and lin.w.graph is g2
    assert g.outputs[0].shape == (2, 3)


def test_create_graph_errors(ir):
    with ir.main_graph:
        x = popxl.variable(np.zeros(2, np.float32))
        with pytest.raises(TypeError):
            ir.create_graph(42)
        with pytest.raises(ValueError, match="signature"):
            ir.create_graph(lambda a: a, x, x)
        with pytest.raises(TypeError, match="mixture"):
            ir.create_graph(lambda xs: xs[0], [x, 1.0])
        with pytest.raises(TypeError, match="mixture"):
            ir.create_graph(lambda *xs: xs[0], x, 1.0)
        with pytest.raises(ValueError, match="Output of subgraph"):
            ir.create_graph(lambda a: 3, x)
        with pytest.raises(ValueError, match="Output of subgraph"):
            ir.create_graph(lambda a: [a, 3], x)
        assert ir.create_graph(lambda a: None, x).outputs == ()
        assert len(ir.create_graph(lambda a, d: a * d["k"], x, {"k": 2.0}).inputs) == 1  # dicts pass through
    assert len(ir.graphs) == 3


def test_call_and_callsiteinfo(ir):
    with ir.main_graph:
        x = popxl.variable(np.zeros((2,), np.float32), name="x")
        y = popxl.variable(np.zeros((2,), np.float32), name="y")

        def body(a, b: popxl.TensorByRef):
            ops.var_updates.accumulate_(b, a)
            return a + 1.0

        g = ir.create_graph(body, x, y)
        info = ops.call_with_info(g, x, y)
        op = info.op
        assert op.type == "call" and op.attrs["graph"] is g and op.called_graphs == (g,)
        assert op.attrs["input_map"] == {0: 0, 1: 1} and op.attrs["by_ref"] == (1,) and op.modified == (1,)
        assert info.called_graph is g and info.outputs[0].shape == (2,)
        assert info.graph_to_parent(g.inputs[1]) is y and info.parent_to_graph(x) is g.inputs[0]
        assert info.graph_to_parent(g.outputs[0]) is info.outputs[0]
        assert info.parent_input(0) is x and info.parent_output(0) is info.outputs[0]
        (out,) = ops.call(g, [x], inputs_dict={g.inputs[1]: y})
        assert out.shape == (2,)
        assert ops.call(g, 1.0, y)[0].producer.inputs[0].dtype == popxl.float32  # scalar -> constant
        assert ir.main_graph.called_graphs == (g,)
        with pytest.raises(ValueError, match="Not enough inputs"):
            ops.call(g, x)
        with pytest.raises(ValueError, match="Too many inputs"):
            ops.call(g, x, y, x)
        with pytest.raises(ValueError, match="specified twice"):
            ops.call(g, x, y, inputs_dict={g.inputs[0]: x})
        with pytest.raises(ValueError, match="shape"):
            ops.call(g, popxl.variable(np.zeros(3, np.float32)), y)
        with pytest.raises(ValueError, match="dtype"):
            ops.call(g, popxl.variable(np.zeros(2, np.int32)), y)
        partial = ops.call_with_info(g, inputs_dict={g.inputs[1]: y}, check_inputs=False)
        assert partial.op.attrs["input_map"] == {1: 0}
        assert partial.parent_to_graph_input_index(0) == 1 and partial.graph_to_parent_input_index(1) == 0
        info.set_parent_input_modified(x)
        assert info.op.modified == (0, 1)
    other = ir.create_empty_graph("other")
    with other:
        with pytest.raises(ValueError, match="parent"):
            ops.call(g, x, y)


def test_repeat(ir):
    with ir.main_graph:
        x = popxl.variable(np.zeros((2,), np.float32), name="x")
        w = popxl.variable(np.ones((2,), np.float32), name="w")

        def body(acc, w):
            return acc + w

        g = ir.create_graph(body, x, w)
        info = ops.repeat_with_info(g, 5, x, w)
        op = info.op
        assert op.type == "repeat" and op.attrs["repeat_count"] == 5 and op.attrs["num_carried"] == 1
        assert len(info.outputs) == 1 and info.outputs[0].shape == (2,)
        assert ops.repeat(g, 0, x, inputs_dict={g.inputs[1]: w})[0].shape == (2,)
        with pytest.raises(ValueError, match=">= 0"):
            ops.repeat(g, -1, x, w)
        with pytest.raises(TypeError):
            ops.repeat(g, 1.5, x, w)
        with pytest.raises(ValueError, match="Not enough"):
            ops.repeat(g, 2, x)
        two_out = ir.create_graph(lambda a: (a + 1.0, a * 2.0), x)
        with pytest.raises(ValueError, match="greater than or equal"):
            ops.repeat(two_out, 2, x)
        reshaping = ir.create_graph(lambda a: a.reshape((1, 2)), x)
        with pytest.raises(ValueError, match="loop-carried"):
            ops.repeat(reshaping, 2, x)
        casting = ir.create_graph(lambda a: ops.cast(a, popxl.int32), x)
        with pytest.raises(ValueError, match="loop-carried"):
            ops.repeat(casting, 2, x)


def test_conditional(ir):
    with ir.main_graph:
        x = popxl.variable(np.zeros((2,), np.float32), name="x")
        y = popxl.variable(np.zeros((3,), np.float32), name="y")
        cond = popxl.variable(True, name="cond")
        then_g = ir.create_graph(lambda a: a + 1.0, x)
        else_g = ir.create_graph(lambda a, b: a * 2.0, x, y)
        info = ops.conditional_with_info(cond, then_g, else_g, [x], [x, y])
        op = info.op
        assert op.type == "conditional" and op.inputs == (cond, x, x, y)
        assert op.attrs["then_input_map"] == {0: 1} and op.attrs["else_input_map"] == {0: 2, 1: 3}
        assert op.called_graphs == (then_g, else_g) and info.called_graph == (then_g, else_g)
        assert info.is_parent_index_in_then_branch(1) and not info.is_parent_index_in_then_branch(3)
        assert info.parent_to_graph(y) is else_g.inputs[1]
        assert info.outputs[0].shape == (2,)
        with pytest.raises(TypeError):
            ops.conditional(popxl.variable(1.0), then_g, else_g, [x], [x, y])
        with pytest.raises(ValueError, match="Not enough"):
            ops.conditional(cond, then_g, else_g, [x], [x])
        shape_g = ir.create_graph(lambda a: a.reshape((1, 2)), x)
        with pytest.raises(ValueError, match="same shape"):
            ops.conditional(cond, then_g, shape_g, [x], [x])
        none_g = ir.create_graph(lambda a: None, x)
        with pytest.raises(ValueError, match="same number of outputs"):
            ops.conditional(cond, then_g, none_g, [x], [x])
        with pytest.raises(NotImplementedError):
            info.set_parent_input_modified(x)


def test_name_scope_and_ipu(main, var):
    x = var((2,), name="x")
    with popxl.name_scope("a"):
        with popxl.name_scope("b") as scopes:
            assert scopes == ["a", "b"]
            y = x + 1.0
            c = popxl.constant(1.0, name="c")
        z = ops.relu(y)
    assert y.id == "a/b/add_out" and y.name == "a/b/add_out" and c.id == "a/b/c"
    assert y.producer.name == "a/b/add" and y.producer.scope == "a/b" and z.producer.scope == "a"
    assert (x + 1.0).producer.scope == "" and (x + 1.0).producer.name == "add"
    with popxl.ipu(1):
        t = x * 2.0
    assert t.producer.ipu == 1 and t.ipu == 1
    with pytest.raises(ValueError, match="different IPUs"):
        y + t
    for bad in (-1, 1.0, "1"):
        with pytest.raises(ValueError, match=r"an int >= 0"):
            with popxl.ipu(bad):
                pass
    with popxl.io_tiles():
        io = ops.io_tile_copy(y)
    with pytest.raises(ValueError, match="tile sets"):
        io + y


def test_in_sequence(main, var):
    x = var((2,), name="x")
    with popxl.in_sequence():
        a = x + 1.0
        b = x + 2.0
        with popxl.in_sequence(False):
            c = x + 3.0
            d = x + 4.0
        e = x + 5.0
    free = x + 6.0
    ops_ = [t.producer for t in (a, b, c, d, e, free)]
    assert ops_[0].after == ()
    assert ops_[1].after == (ops_[0],)
    assert ops_[2].after == (ops_[1],) and ops_[3].after == (ops_[1],)
    assert set(ops_[4].after) == {ops_[1], ops_[2], ops_[3]}  # after the whole False block
    assert ops_[5].after == ()
    with popxl.in_sequence(True):
        p = x - 1.0
        with popxl.in_sequence("pass"):
            q = x - 2.0
        r = x - 3.0
    assert q.producer.after == () and r.producer.after == ()  # 'pass' adds nothing and forgets
    assert p.producer.after == ()
    with pytest.raises(TypeError):
        with popxl.in_sequence(None):
            pass
    ids = [op.id for op in main.ops]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)


def test_op_created_hooks(ir):
    seen, seen_main = [], []
    ctx = popxl.get_current_context()
    h = ctx.register_op_created_hook(seen.append)
    h2 = ir.main_graph.register_op_created_hook(seen_main.append)
    try:
        with ir.main_graph:
            x = popxl.variable(np.zeros(2, np.float32))
            y = x + 1.0
            g = ir.create_graph(lambda a: a * 2.0, x)
    finally:
        ctx.remove_op_created_hook(h)
        ir.main_graph.remove_op_created_hook(h2)
    # hooks get PopART's _ir.Op views (as in PopXL); `_op` is the popxl Op behind one
    assert [op._op.type for op in seen] == ["add", "mul"] and [op._op for op in seen_main] == [y.producer]
    assert seen_main[0] is y.producer._pb_op and seen_main[0].opType() == "Add"
    with pytest.raises(ValueError):
        ctx.remove_op_created_hook(h)
    assert g.ops[0].graph is g


def test_context_helpers(ir):
    with ir.main_graph:
        assert popxl.gcg() is ir.main_graph and popxl.gmg() is ir.main_graph and popxl.get_ir() is ir
        g = ir.create_empty_graph()
        with g:
            assert popxl.gcg() is g and popxl.gmg() is ir.main_graph

    @popxl.op_debug_context("my_block")
    def block(t):
        return ops.relu(t)

    with ir.main_graph:
        out = block(popxl.variable(np.zeros(2, np.float32)))
    assert out.producer.debug_context == ("my_block", "relu")


def test_streams(ir):
    with ir.main_graph:
        h2d = popxl.h2d_stream((2, 3), popxl.float32, name="x")
        d2h = popxl.d2h_stream((2, 3), popxl.float32, name="y")
        unused = popxl.h2d_stream((1,), popxl.int32)
        assert h2d.shape == (2, 3) and h2d.dtype == popxl.float32 and h2d.spec == popxl.TensorSpec((2, 3), popxl.float32)
        x = ops.host_load(h2d)
        assert x.id == "x" and x.producer.attrs["stream"] is h2d and x.producer.inputs == ()
        ops.host_store(d2h, x + 1.0)
        assert ops.host_load(h2d, "x2").id == "x2"
        with pytest.raises(ValueError, match="shape"):
            ops.host_store(d2h, popxl.variable(np.zeros(3, np.float32)))
        with pytest.raises(ValueError, match="dtype"):
            ops.host_store(d2h, popxl.variable(np.zeros((2, 3), np.int32)))
        with pytest.raises(TypeError):
            ops.host_load(d2h)
        g = ir.create_graph(lambda: ops.host_load(h2d))  # streams can be read inside subgraphs
        assert g.outputs[0].shape == (2, 3)
    assert ir.get_all_h2d_streams() == {h2d} and ir.get_all_d2h_streams() == {d2h}
    assert unused not in ir.get_all_h2d_streams()
    with ir.main_graph:
        assert popxl.h2d_stream((1,), popxl.float32, "x").tensor_id != "x"


def _dot_ir():
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros(2, np.float32), name="x")
        g = ir.create_graph(lambda a: a + 1.0, x)
        with popxl.in_sequence():
            (y,) = ops.call(g, x)
            ops.host_store(popxl.d2h_stream(y.shape, y.dtype), y)
    return ir


def test_dot_checkpoint_writes_popart_file_names_in_log_dir(tmp_path, monkeypatch):
    """PopART's default (separateCallOpPdfs): a file per graph with ops, `<check>_r.dot` for the
    main graph and `<check>_<graph id>.dot` for the others."""
    monkeypatch.delenv("POPART_DOT_CHECKS", raising=False)
    monkeypatch.chdir(tmp_path)
    ir = _dot_ir()
    sub = ir.graphs[1].id
    ir.create_empty_graph("empty")  # no ops: no file, as PopART opens a file at a graph's first op
    ir.dot_checkpoint("fwd", tmp_path / "dots")
    assert sorted(p.name for p in (tmp_path / "dots").iterdir()) == sorted(["fwd_r.dot", f"fwd_{sub}.dot"])
    main = (tmp_path / "dots" / "fwd_r.dot").read_text()
    assert main.startswith("digraph") and f"call<{sub}>" in main and "host_store" in main and "->" in main
    assert "style=dotted" in main and 'box, label="add' not in main  # the in_sequence edge; the add is elsewhere
    text = (tmp_path / "dots" / f"fwd_{sub}.dot").read_text()
    assert 'box, label="add' in text and "call" not in text
    opts = ir._pb_ir.getSessionOptions()
    assert opts.logDir == str(tmp_path / "dots") and opts.dotChecks == {"ALL"}  # as PopXL sets them
    ir.dot_checkpoint("again")  # the save_dir became logDir: later checkpoints go there too
    assert (tmp_path / "dots" / "again_r.dot").exists()
    assert not list(tmp_path.glob("*.dot"))  # nothing in the working directory


def test_dot_checkpoint_in_one_file_and_an_op_range(tmp_path, monkeypatch):
    monkeypatch.delenv("POPART_DOT_CHECKS", raising=False)
    ir = _dot_ir()
    opts = ir._pb_ir.getSessionOptions()
    opts.separateCallOpPdfs = False
    ir.dot_checkpoint("one", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["one_all.dot"]
    text = (tmp_path / "one_all.dot").read_text()
    assert "cluster_0" in text and "cluster_1" in text and "style=dashed" in text  # the call reaches its graph
    opts.finalDotOp = 1  # the schedule's first op only: the main graph's call
    ir.dot_checkpoint("first", tmp_path)
    text = (tmp_path / "first_all.dot").read_text()
    assert "call<" in text and "host_store" not in text and "cluster_1" not in text
    opts.firstDotOp = 5
    opts.finalDotOp = 2
    with pytest.raises(RuntimeError, match=r"Invalid dot range \(5, 2\) with schedule of size 3"):
        ir.dot_checkpoint("none", tmp_path)


def test_dot_checkpoint_without_a_directory_uses_the_working_directory(tmp_path, monkeypatch):
    monkeypatch.delenv("POPART_DOT_CHECKS", raising=False)
    monkeypatch.chdir(tmp_path)
    ir = _dot_ir()
    ir.dot_checkpoint("here")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["here_r.dot", f"here_{ir.graphs[1].id}.dot"])


def test_dot_checks_select_which_checkpoints_are_written(tmp_path, monkeypatch):
    monkeypatch.setenv("POPART_DOT_CHECKS", "FWD0:FINAL")
    ir = _dot_ir()
    ir._pb_ir.getSessionOptions().separateCallOpPdfs = False
    ir.dot_checkpoint("skipped", tmp_path)
    ir.dot_checkpoint("FINAL", tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["FINAL_all.dot"]
    monkeypatch.delenv("POPART_DOT_CHECKS")
    ir2 = _dot_ir()
    ir2._pb_ir.getSessionOptions().dotChecks = {"mine"}
    ir2._pb_ir.getSessionOptions().separateCallOpPdfs = False
    ir2.dot_checkpoint("other", tmp_path)
    ir2.dot_checkpoint("mine", tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["FINAL_all.dot", "mine_all.dot"]


def test_random_seed_helpers():
    from popxl.random_seed import create_seeds, two_uint32_to_uint64, uint64_to_two_uint32
    s = create_seeds(1, batches_per_step=3, replicas=2)
    assert s.shape == (3, 2, 2) and s.dtype == np.uint32
    assert (create_seeds(1) == create_seeds(1)).all() and create_seeds(1).shape == (2,)
    assert uint64_to_two_uint32(2**32 + 5) == (1, 5) and two_uint32_to_uint64(1, 5) == 2**32 + 5
    with pytest.raises(ValueError):
        uint64_to_two_uint32(-1)
    with pytest.raises(ValueError):
        two_uint32_to_uint64(2**32, 0)


def test_create_graph_without_a_graph_context(ir):
    g = ir.create_graph(lambda a: ops.relu(a), popxl.TensorSpec((3,), popxl.float32))
    assert g.outputs[0].shape == (3,) and popxl.get_current_context()._graphs == []


def test_testing_helpers():
    from popxl.testing import get_all_dtypes, get_all_int_dtypes
    assert popxl.float8_143 in get_all_dtypes() and len(get_all_dtypes()) == 16
    assert get_all_int_dtypes(include_unsigned=False) == [popxl.int8, popxl.int16, popxl.int32, popxl.int64]


@pytest.mark.parametrize("checks,expected", [("", []), ("FINAL", ["FINAL_r.dot"]),
                                             ("FWD:BWD", ["bwd_r.dot", "fwd_r.dot"]),
                                             ("all", ["FINAL_r.dot", "bwd_r.dot", "fwd_r.dot"])])
def test_dot_checks_name_checkpoints_in_any_case_and_a_session_writes_final(tmp_path, monkeypatch, checks, expected):
    """PopART compares check names in upper case; a Session writes the checkpoint FINAL of the Ir
    it compiles when it is wanted (POPART_DOT_CHECKS or the dotChecks option)."""
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    monkeypatch.setenv("POPART_DOT_CHECKS", checks)
    ir = popxl.Ir()
    ir._pb_ir.getSessionOptions().logDir = str(tmp_path)
    with ir.main_graph:
        x = popxl.variable(np.ones(2, np.float32))
        y = x + 1.0
        ir.dot_checkpoint("fwd")
        ops.host_store(popxl.d2h_stream(y.shape, y.dtype), y * 2.0)
        ir.dot_checkpoint("bwd")
    popxl.Session(ir, "ipu_model")
    assert sorted(p.name for p in tmp_path.glob("*.dot")) == expected
    if "FINAL_r.dot" in expected:
        assert "host_store" in (tmp_path / "FINAL_r.dot").read_text()
