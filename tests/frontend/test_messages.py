"""Messages that used to mislead (issue 17, item 6): tensors and streams of another Ir, shapes that
are not integers, and example arguments that cannot work."""
import os
import runpy

import numpy as np
import pytest

import popxl
import popxl.ops as ops

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_tensor_of_another_ir_is_named_as_such():
    ir1, ir2 = popxl.Ir(), popxl.Ir()
    with ir1.main_graph:
        a = popxl.variable(np.ones(3, np.float32), name="a")
    with ir2.main_graph:
        with pytest.raises(ValueError, match="belongs to another popxl.Ir") as e:
            a + 1
    assert "is in the main graph, but it is being used in the main graph" not in str(e.value)


def _main_variable_and_subgraph():
    """A variable `a` of an Ir's main graph, and an empty graph 'sub' of the same Ir."""
    ir = popxl.Ir()
    with ir.main_graph:
        a = popxl.variable(np.ones(3, np.float32), name="a")
    return a, ir.create_empty_graph("sub")


def test_tensor_of_another_graph_of_the_same_ir_keeps_the_graph_message():
    a, g = _main_variable_and_subgraph()
    with g:
        with pytest.raises(ValueError, match="is in the main graph, but it is being used in graph 'sub"):
            a + 1


def test_tensors_of_another_graph_are_refused_in_popxl_words_first():
    """PopXL's check_in_graph texts (users match on them); our explanation follows."""
    from popxl.ops.utils import check_in_graph
    a, g = _main_variable_and_subgraph()
    with g:
        sub = g.id
        with pytest.raises(ValueError, match=rf"^The input tensor `lhs` is not in the current Graph {sub}\. The tensor"):
            ops.add(a, a)
        with pytest.raises(ValueError, match=rf"^The input tensor `t` is not in the current Graph {sub}\. "):
            check_in_graph(g, t=a)
        with pytest.raises(TypeError, match=r"^The input `t` is not a Tensor\. Type: <class 'list'>\. Value: \[1\]\."):
            check_in_graph(g, t=[1])
    with popxl.Ir().main_graph:
        with pytest.raises(ValueError, match=r"^The input tensor `lhs` is not in the current Graph \. .*another popxl.Ir"):
            ops.add(a, a)


def test_stream_of_another_ir_is_refused_where_it_is_used(monkeypatch):
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    ir1, ir2 = popxl.Ir(), popxl.Ir()
    with ir1.main_graph:
        s1 = popxl.h2d_stream((3,), popxl.float32, name="in0")
        o1 = popxl.d2h_stream((3,), popxl.float32, name="out")
    with ir2.main_graph:
        with pytest.raises(ValueError, match="host_load: stream 'in0' was created in another popxl.Ir"):
            ops.host_load(s1)
        s2 = popxl.h2d_stream((3,), popxl.float32, name="in0")
        x = ops.host_load(s2)
        with pytest.raises(ValueError, match="host_store: stream 'out' was created in another popxl.Ir"):
            ops.host_store(o1, x)
        o2 = popxl.d2h_stream((3,), popxl.float32, name="out")
        ops.host_store(o2, x)
    with popxl.Session(ir2, "ipu_model") as sess:
        with pytest.raises(ValueError, match="'in0' belongs to another popxl.Ir than this session's"):
            sess.run({s1: np.ones(3, np.float32)})
        with pytest.raises(ValueError, match="'out' belongs to another popxl.Ir"):
            sess.run_with_outputs({s2: np.ones(3, np.float32)}, {o1: np.zeros(3, np.float32)})


@pytest.mark.parametrize("make", [
    lambda: popxl.h2d_stream((2.5,), popxl.float32),
    lambda: popxl.d2h_stream((2, 3.0), popxl.float32),
    lambda: popxl.h2d_stream(("3",), popxl.float32),
    lambda: ops.init((2.5, 2), popxl.float32),
    lambda: ops.reshape(popxl.constant(np.zeros(6, np.float32)), (2, 3.5)),
])
def test_shapes_that_are_not_integers_are_refused(make):
    ir = popxl.Ir()
    with ir.main_graph:
        with pytest.raises(TypeError, match="dimension"):
            make()


def test_integer_like_dimensions_are_accepted():
    ir = popxl.Ir()
    with ir.main_graph:
        s = popxl.h2d_stream((np.int64(2), 3), popxl.float32)
    assert s.shape == (2, 3) and all(type(d) is int for d in s.shape)


@pytest.mark.parametrize("argv, msg", [
    (["--batch-size", "0"], "must be at least 1, got 0"),
    (["--micro-batches", "-1"], "must be at least 1"),
    (["--batch-size", "2.5"], "not a whole number"),
    (["--train-size", "10", "--batch-size", "32"], "more than the 10 training images"),
])
def test_mnist_arguments_that_cannot_work(argv, msg, capsys):
    main = runpy.run_path(os.path.join(ROOT, "examples", "mnist.py"), run_name="example")["main"]
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert e.value.code == 2
    assert msg in capsys.readouterr().err
