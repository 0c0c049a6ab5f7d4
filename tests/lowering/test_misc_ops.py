"""print_tensor, init and histogram through popxl.Session on a small simulated IPU."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops

from helpers import run_popxl


def test_print_tensor_prints_during_the_run_and_passes_the_tensor_on(capsys):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out, session = run_popxl(lambda a: ops.print_tensor(a, "my tensor") + 1, [x])
    np.testing.assert_array_equal(out, x + 1)
    captured = capsys.readouterr()
    # Poplar prints to standard error, in its PrintTensor format
    assert captured.out == ""
    assert captured.err == "my tensor: [\n [0.0000000 1.0000000 2.0000000]\n [3.0000000 4.0000000 5.0000000]\n]\n"
    assert any(s.kind == "device_to_host" and "print" in s.name for s in session.executable.steps)


def test_print_tensor_in_a_loop_prints_every_iteration(capsys):
    ir = popxl.Ir()
    with ir.main_graph:
        v = popxl.variable(np.zeros((2,), np.int32), name="v")

        def body(t: popxl.TensorByRef):
            ops.print_tensor(t, "v")
            ops.increment_mod_(t, 1, 100)

        g = ir.create_graph(body, v)
        ops.repeat(g, 3, v)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
    assert capsys.readouterr().err == "v: [0 0]\nv: [1 1]\nv: [2 2]\n"


def test_print_tensor_default_title_is_print_underscore_and_the_tensor_name(capsys):
    """PopXL 3.x titles an untitled print `print_<name>`; print_self=False prints nothing of the
    tensor itself."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.array([0.0, 1.0], np.float32), name="x")
        y = ops.print_tensor(x)
        o = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(o, y)
    with popxl.Session(ir, "ipu_model") as session:
        session.run()
    assert capsys.readouterr().err == "print_x: [0.0000000 1.0000000]\n"


def test_print_tensor_print_self_false_prints_nothing_and_bad_brackets_are_refused(capsys):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.array([0.0, 1.0], np.float32), name="x")
        y = ops.print_tensor(x, print_self=False)
        o = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(o, y)
        with pytest.raises(ValueError, match="Parameter open_bracket must be 1 character exactly"):
            ops.print_tensor(x, open_bracket="[[")
    with popxl.Session(ir, "ipu_model") as session:
        out = session.run()
    assert capsys.readouterr().err == ""
    np.testing.assert_array_equal(out[o], [0.0, 1.0])


# The outputs Poplar printed for PopTorch's print test (graphcore/poptorch tests/print_tensor_test.py)
# of 1 + torch.rand((2, 2)) with torch.manual_seed(0).
POPTORCH_VALUES = np.array([[1.4962566, 1.7682219], [1.0884774, 1.1320305]], np.float32)
POPLAR_OUTPUTS = [
    (dict(summarise_threshold=1000, edge_items=3, max_line_width=75, digits=8, float_format="auto",
          separator=" ", open_bracket="{", close_bracket="}"),
     "title: {\n {1.4962566 1.7682219}\n {1.0884774 1.1320305}\n}"),
    (dict(summarise_threshold=500, edge_items=2, max_line_width=15, digits=8, float_format="scientific",
          separator=",", open_bracket="[", close_bracket="]"),
     "title: [\n [1.4962566e+00,\n   1.7682219e+00]\n [1.0884774e+00,\n   1.1320305e+00]\n]"),
    (dict(summarise_threshold=1500, edge_items=1, max_line_width=125, digits=8, float_format="fixed",
          separator=";", open_bracket="(", close_bracket=")"),
     "title: (\n (1.4962566;1.7682219)\n (1.0884774;1.1320305)\n)"),
]


@pytest.mark.parametrize("options,expected", POPLAR_OUTPUTS)
def test_print_tensor_matches_what_poplar_prints(capsys, options, expected):
    out, _ = run_popxl(lambda a: ops.print_tensor(a, "title", **options), [POPTORCH_VALUES])
    assert capsys.readouterr().err == expected + "\n"


def test_print_tensor_summarises_long_tensors(capsys):
    x = np.arange(2000, dtype=np.float32) / 4
    run_popxl(lambda a: ops.print_tensor(a, "t", summarise_threshold=10, edge_items=2, digits=4,
                                         float_format="fixed", separator=",", open_bracket="(", close_bracket=")"),
              [x])
    assert capsys.readouterr().err == "t: (0.0,0.2,...,499.5,499.8)\n"


def test_print_tensor_prints_the_gradient_when_asked(capsys):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.array([1.0, 2.0], np.float32), name="x")

        def fwd(t):
            return ops.print_tensor(t * 3.0, "y", print_gradient=True)

        g = ir.create_graph(fwd, x)
        grad_info = popxl.transforms.autodiff(g)
        info = ops.call_with_info(g, x)
        dx = ops.call(grad_info.graph, popxl.constant(np.ones(2, np.float32)),
                      inputs_dict=grad_info.inputs_dict(info))[0]
        o = popxl.d2h_stream(dx.shape, dx.dtype)
        ops.host_store(o, dx)
    with popxl.Session(ir, "ipu_model") as session:
        out = session.run()[o]
    np.testing.assert_array_equal(out, [3.0, 3.0])
    err = capsys.readouterr().err
    assert "y: [3.0000000 6.0000000]\n" in err
    assert "y_gradient: [1.0000000 1.0000000]\n" in err


@pytest.mark.parametrize("dt", [popxl.float32, popxl.float16, popxl.int32])
@pytest.mark.parametrize("shape", [(1,), (7,), (130, 3)])
def test_init_zero(dt, shape):
    out, _ = run_popxl(lambda a: ops.init(shape, dt) + a, [np.ones(shape, dt.as_numpy())])
    np.testing.assert_array_equal(out, np.ones(shape, dt.as_numpy()))


def test_init_undef_gives_a_tensor_of_the_shape():
    def build(a):
        u = ops.init((4, 3), popxl.float32, init_type="undef")
        return ops.dynamic_update(u, popxl.constant(np.array([0], np.int32)), a, axes=[0], sizes=[4],
                                  no_overlap=True)

    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    out, _ = run_popxl(build, [x])
    np.testing.assert_array_equal(out, x)


def _histogram(x, levels, absolute):
    v = np.abs(x) if absolute else x
    return np.bincount(np.searchsorted(np.asarray(levels, x.dtype), v, side="right"),
                       minlength=len(levels) + 1).astype(np.uint32)


@pytest.mark.parametrize("dt", [np.float32, np.float16])
@pytest.mark.parametrize("shape", [(1,), (13,), (1000,), (37, 29)])
@pytest.mark.parametrize("absolute", [False, True])
def test_histogram(dt, shape, absolute):
    x = np.random.default_rng(sum(shape)).standard_normal(shape).astype(dt)
    levels = [-1.5, -0.1, 0.0, 0.3, 1.0]
    out, _ = run_popxl(lambda a: ops.histogram(a, levels, absolute), [x])
    np.testing.assert_array_equal(out, _histogram(x.reshape(-1), levels, absolute))
    assert out.dtype == np.uint32 and out.sum() == x.size


def test_histogram_of_a_view():
    x = np.random.default_rng(0).standard_normal((40, 30)).astype(np.float32)
    out, _ = run_popxl(lambda a: ops.histogram(a.T[3:], [0.0], False), [x])
    np.testing.assert_array_equal(out, _histogram(x.T[3:].reshape(-1), [0.0], False))


def test_histogram_of_ints_is_a_clear_error():
    with pytest.raises(TypeError, match="float32 or float16"):
        run_popxl(lambda a: ops.histogram(a, [0.0], False), [np.arange(4, dtype=np.int32)])


def test_the_print_op_takes_a_separator_of_several_characters(capsys):
    """PopART's PrintTensor op prints any separator (PopTorch's default is ", "); only PopXL's
    print_tensor API holds it to one character."""
    from popxl.ops.misc import print_tensor_op
    x = np.array([[1.0, 2.5], [3.0, 4.0]], np.float32)
    run_popxl(lambda a: print_tensor_op(a, "t", digits=4, separator=", ", open_bracket="(", close_bracket=")"), [x])
    assert capsys.readouterr().err == "t: (\n (1.000, 2.500)\n (3.000, 4.000)\n)\n"
    ir = popxl.Ir()
    with ir.main_graph, pytest.raises(ValueError, match="Parameter separator must be 1 character exactly"):
        ops.print_tensor(popxl.variable(x), separator=", ")
