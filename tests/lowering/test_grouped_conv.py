"""Grouped and depthwise convolutions through Session (one plan over the groups: HMAC forward, VMAC
weight update), against a float64 NumPy convolution over awkward shapes; and the property that
makes them fit real CNNs: their code and vertex state grow with the plan, not the group count."""
import numpy as np
import pytest

import ipu
import popxl
import popxl.ops as ops
from codelets.plans.conv_build import problem_of
from codelets.plans.conv_plan import plan_forward, plan_weight_update

from helpers import run_popxl

RNG = np.random.default_rng(11)


def conv_nd(x, w, stride, pads, dilation, groups):
    """float64 convolution of x (N, C, *S) with w (M, C / groups, *K); pads: begins then ends."""
    x, w = x.astype(np.float64), w.astype(np.float64)
    nd = x.ndim - 2
    xp = np.pad(x, [(0, 0), (0, 0)] + [(pads[i], pads[nd + i]) for i in range(nd)])
    n, c = x.shape[:2]
    m = w.shape[0]
    kernel = w.shape[2:]
    out_sp = [(xp.shape[2 + i] - dilation[i] * (kernel[i] - 1) - 1) // stride[i] + 1 for i in range(nd)]
    out = np.zeros((n, m) + tuple(out_sp))
    cg, mg = c // groups, m // groups
    for g in range(groups):
        for k in np.ndindex(*kernel):
            sl = [slice(None), slice(g * cg, (g + 1) * cg)]
            sl += [slice(k[i] * dilation[i], k[i] * dilation[i] + stride[i] * (out_sp[i] - 1) + 1, stride[i])
                   for i in range(nd)]
            patch = xp[tuple(sl)].reshape(n, cg, -1)
            wk = w[(slice(g * mg, (g + 1) * mg), slice(None)) + k]
            out[:, g * mg:(g + 1) * mg] += np.einsum("ncp,mc->nmp", patch, wk).reshape((n, mg) + tuple(out_sp))
    return out


# (x shape, groups, output channels, kernel, stride, pads, dilation)
FORWARD = [
    ((1, 6, 7, 9), 1, 4, (3, 3), (1, 1), (1, 1, 1, 1), (1, 1)),  # groups 1 (the im2col matmul)
    ((2, 6, 8, 5), 2, 4, (3, 2), (2, 1), (1, 0, 0, 1), (1, 2)),  # groups 2, non-square, dilated
    ((1, 5, 9, 9), 5, 5, (3, 3), (2, 2), (1, 1, 1, 1), (1, 1)),  # depthwise, stride 2
    ((3, 4, 6, 7), 4, 8, (5, 3), (1, 2), (2, 1, 2, 1), (1, 1)),  # depthwise, 2 outputs per channel
    ((1, 7, 1, 13), 7, 7, (1, 5), (1, 1), (0, 2, 0, 2), (1, 1)),  # one row
    ((1, 3, 5, 5), 3, 3, (3, 3), (1, 1), (0, 0, 0, 0), (2, 2)),  # no padding, dilated to the edge
    ((2, 9, 4, 4), 3, 6, (2, 2), (1, 1), (1, 1, 0, 0), (1, 1)),  # 3 in, 2 out per group
    ((1, 4, 11), 4, 4, (3,), (2,), (1, 1), (1,)),  # 1-D
    ((1, 2, 4, 5, 3), 2, 2, (3, 2, 2), (1, 2, 1), (1, 0, 1, 1, 1, 0), (1, 1, 1)),  # 3-D
]


@pytest.mark.parametrize("target", ["small:6", "small:64"])
@pytest.mark.parametrize("shape,groups,m,kernel,stride,pads,dilation", FORWARD)
def test_grouped_conv_matches_numpy(shape, groups, m, kernel, stride, pads, dilation, target):
    x = RNG.normal(size=shape).astype(np.float32)
    w = RNG.normal(size=(m, shape[1] // groups) + kernel).astype(np.float32)
    out, _ = run_popxl(lambda a, b: ops.conv(a, b, stride=stride, padding=pads, dilation=dilation, groups=groups),
                       [x, w], target=target)
    np.testing.assert_allclose(out, conv_nd(x, w, stride, pads, dilation, groups), rtol=1e-5, atol=1e-5)


def test_depthwise_float16():
    x = RNG.normal(size=(2, 8, 6, 6)).astype(np.float16)
    w = RNG.normal(size=(8, 1, 3, 3)).astype(np.float16)
    out, _ = run_popxl(lambda a, b: ops.conv(a, b, padding=(1, 1, 1, 1), groups=8), [x, w], target="small:16")
    assert out.dtype == np.float16
    np.testing.assert_allclose(out, conv_nd(x, w, (1, 1), (1, 1, 1, 1), (1, 1), 8), rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("shape,groups,m,kernel,stride,pads,dilation", FORWARD[1:7])
def test_grouped_conv_gradients_match_numpy(shape, groups, m, kernel, stride, pads, dilation):
    """Both gradients of a grouped convolution (input: the HMAC convolution of the output gradient;
    weights: conv_weights_grad, the VMAC weight update) against the float64 adjoint."""
    x = RNG.normal(size=shape).astype(np.float32)
    w = RNG.normal(size=(m, shape[1] // groups) + kernel).astype(np.float32)
    y_shape = conv_nd(x, w, stride, pads, dilation, groups).shape
    dy = RNG.normal(size=y_shape).astype(np.float32)
    ir = popxl.Ir()
    main = ir.main_graph
    with main:
        xv, wv = popxl.variable(x, name="x"), popxl.variable(w, name="w")
        g = ir.create_graph(lambda a, b: ops.conv(a, b, stride=stride, padding=pads, dilation=dilation, groups=groups),
                            xv.spec, wv.spec)
        gg = popxl.transforms.autodiff(g)
        info = ops.call_with_info(g, xv, wv)
        dyv = popxl.variable(dy, name="dy")
        dx, dw = ops.call(gg.graph, dyv, inputs_dict=gg.inputs_dict(info))
        sx, sw = popxl.d2h_stream(dx.shape, dx.dtype), popxl.d2h_stream(dw.shape, dw.dtype)
        ops.host_store(sx, dx)
        ops.host_store(sw, dw)
    import os
    os.environ["IPU_SIM_TARGET"] = "small:32"
    try:
        with popxl.Session(ir, "ipu_model") as s:
            res = s.run()
    finally:
        del os.environ["IPU_SIM_TARGET"]
    # the adjoint in float64: <dy, conv(x, w)> is bilinear, so its gradients are the sums below
    want_dw = np.zeros(w.shape)
    for idx in np.ndindex(*w.shape):
        e = np.zeros(w.shape)
        e[idx] = 1.0
        want_dw[idx] = (conv_nd(x, e, stride, pads, dilation, groups) * dy).sum()
    np.testing.assert_allclose(res[sw], want_dw, rtol=1e-4, atol=1e-4)
    want_dx = np.zeros(x.shape)
    for idx in np.ndindex(*x.shape):
        e = np.zeros(x.shape)
        e[idx] = 1.0
        want_dx[idx] = (conv_nd(e, w, stride, pads, dilation, groups) * dy).sum()
    np.testing.assert_allclose(res[sx], want_dx, rtol=1e-4, atol=1e-4)


def _depthwise_program(channels, tiles, batch=1):
    """Compile (do not run) a depthwise 3x3 convolution of a (batch, channels, 14, 14) input;
    returns the executable."""
    import os
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((batch, channels, 14, 14), np.float32), name="x")
        w = popxl.variable(np.zeros((channels, 1, 3, 3), np.float32), name="w")
        y = ops.conv(x, w, padding=(1, 1, 1, 1), groups=channels)
        s = popxl.d2h_stream(y.shape, y.dtype)
        ops.host_store(s, y)
    os.environ["IPU_SIM_TARGET"] = f"small:{tiles}"
    try:
        return popxl.Session(ir, "ipu_model").executable
    finally:
        del os.environ["IPU_SIM_TARGET"]


def test_depthwise_code_and_state_do_not_grow_with_the_group_count():
    """The same plan shape for 16 and 512 channels on 16 tiles: the same program steps (control
    code), vertices per tile and exchange code per tile; vertex state only gains each extra group's
    three 2-byte region pointers (poplin's vertex holds a pointer per region); the work lists
    (constants) do not change at all. The per-group lowering this replaces grew every one of them
    with the group count."""
    few, many = _depthwise_program(16, 16), _depthwise_program(512, 16)
    steps = lambda exe: sorted(st.kind for st in exe.steps)  # noqa: E731
    assert steps(few) == steps(many)
    cat = lambda exe, c: exe.plan.categories[c]  # noqa: E731
    assert cat(few, "control_code").max() == cat(many, "control_code").max()
    assert cat(few, "vertex_code").max() == cat(many, "vertex_code").max()
    verts = lambda exe: max(st.vertices for st in exe.steps if st.kind == "compute")  # noqa: E731
    assert verts(few) == verts(many) <= 16
    # 31 more groups per tile: 31 x 3 region pointers of 2 bytes
    grown = cat(many, "vertex_state").max() - cat(few, "vertex_state").max()
    assert 0 < grown <= 31 * 3 * 2
    # exchange code: the same runs per tile (one per channel's rows), whatever the channels
    ex_few, ex_many = cat(few, "exchange_code").max(), cat(many, "exchange_code").max()
    assert ex_many <= ex_few + 31 * (8 + 4) * 2


def test_depthwise_vertices_take_the_batch_as_regions():
    """The batch folds into each tile's ConvPartialHorizontalMac vertex (poplin's field): at batch 6
    a tile has as many of them as at batch 1, each batch element adding only its in and out
    regions' 2-byte pointers to the vertex state, and the cycles of a further element leave out
    the vertex's fixed part (supervisor overhead, group loops, each context's set-up)."""
    one, six = _depthwise_program(16, 16, batch=1), _depthwise_program(16, 16, batch=6)
    hmac = lambda exe: next(st for st in exe.steps if st.kind == "compute" and st.name.endswith("hmac"))  # noqa: E731
    assert hmac(six).vertices == hmac(one).vertices
    state_one = one.plan.categories["vertex_state"].max()  # 266 B: 44 + 216 of work-list entries + pointers
    grown = six.plan.categories["vertex_state"].max() - state_one
    # a vertex per batch element was 6 x 266; now the further elements' pointers (the plan puts 2
    # groups and 3 batch elements on a tile: 2 x 2 x 2 B a further element, and 2 more weight
    # pointers)
    assert 0 < grown <= 2 * (2 * 2 * 2) + 2 * 2 * 2
    # cycles: less than six vertices' worth of the one-element vertex
    c_one, c_six = int(hmac(one).tile_cycles.max()), int(hmac(six).tile_cycles.max())
    assert c_one < c_six < 6 * c_one


def test_depthwise_plans_split_groups_and_rows():
    # MobileNetV2's first depthwise layer on a GC200: every tile busy, each with one channel's rows
    p = problem_of((1, 32, 112, 112), (32, 1, 3, 3), (1, 32, 112, 112), 32, (1, 1), (1, 1), (1, 1))
    plan = plan_forward(p, ipu.FLOAT32, ipu.GC200)
    assert plan.num_tiles_used > 1000 and plan.chunks[1] == 1
    wu = plan_weight_update(problem_of((8, 32, 112, 112), (32, 1, 3, 3), (8, 32, 112, 112), 32, (1, 1), (1, 1),
                                       (1, 1)), ipu.FLOAT32, ipu.FLOAT32, ipu.GC200)
    assert wu.num_tiles_used > 1000


def test_out_of_memory_names_the_ops_that_generate_the_code():
    """A model whose depthwise convolutions' code and work lists overflow: the error says which kind
    of op generates them and which block holds most of them."""
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.zeros((1, 8, 12, 12), np.float32), name="x")
        for b, layers in enumerate((2, 2, 12)):
            with popxl.name_scope(f"block{b}"):
                for i in range(layers):
                    w = popxl.variable(np.zeros((8, 1, 3, 3), np.float32), name=f"w{i}")
                    x = ops.relu(ops.conv(x, w, padding=(1, 1, 1, 1), groups=8))
        s = popxl.d2h_stream(x.shape, x.dtype)
        ops.host_store(s, x)
    with pytest.raises(ipu.OutOfMemoryError) as e:
        popxl.Session(ir, ipu.small_target(4, bytes_per_tile=26 * 1024))
    msg = str(e.value)
    assert "depthwise convolution ops" in msg and "most in block2 (12 ops" in msg, msg
    kinds = e.value.report[0]["code_by_op_kind"]
    assert kinds[0]["kind"] == "depthwise convolution" and kinds[0]["ops"] == 16
