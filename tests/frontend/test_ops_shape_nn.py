"""Output shapes of layout, indexing, matmul, nn, random, misc and var_updates ops."""
import numpy as np
import pytest

import popxl
import popxl.ops as ops


@pytest.mark.parametrize("a, b", [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((2, 1, 3, 4), (5, 4, 6)), ((7, 3, 4), (7, 4, 2)), ((3, 4), (2, 4, 5)),
])
def test_matmul_shapes(main, var, a, b):
    out = ops.matmul(var(a), var(b))
    assert out.shape == np.matmul(np.zeros(a), np.zeros(b)).shape
    assert out.producer.attrs["partials_type"] == popxl.float32


def test_matmul_errors_and_options(main, var):
    with pytest.raises(ValueError, match="contracting"):
        ops.matmul(var((3, 4)), var((5, 6)))
    with pytest.raises(ValueError):
        ops.matmul(var((2, 3, 4)), var((5, 4, 2)))
    with pytest.raises(ValueError):
        ops.matmul(var(()), var((2,)))
    with pytest.raises(TypeError):
        ops.matmul(var((2, 2), np.int32), var((2, 2), np.int32))
    with pytest.raises(TypeError):
        ops.matmul(var((2, 2)), var((2, 2), np.float16))
    out = ops.matmul(var((2, 2), np.float16), var((2, 2), np.float16), output_type=popxl.float32,
                     partials_type=popxl.float16)
    assert out.dtype == popxl.float32 and out.producer.attrs["partials_type"] == popxl.float16
    with pytest.raises(TypeError, match="float8"):
        ops.matmul_pow2scaled(var((2, 2)), var((2, 2)), popxl.constant(0))


def test_reshape_transpose_squeeze(main, var):
    x = var((2, 3, 4))
    assert ops.reshape(x, (4, -1)).shape == (4, 6)
    assert ops.reshape(x, (24,)).producer.attrs["shape"] == (24,)
    for bad in ((5, -1), (-1, -1), (2, -2), (25,)):
        with pytest.raises(ValueError):
            ops.reshape(x, bad)
    assert ops.transpose(x).shape == (4, 3, 2)
    assert ops.transpose(x, (0, -1, 1)).producer.attrs["permutation"] == (0, 2, 1)
    with pytest.raises(ValueError):
        ops.transpose(x, (0, 0, 1))
    y = var((1, 3, 1))
    assert ops.squeeze(y).shape == (3,) and ops.squeeze(y, [-1]).shape == (1, 3)
    with pytest.raises(ValueError):
        ops.squeeze(y, [1])
    assert ops.flatten(x).shape == (24,)


def test_slice_and_subsample(main, var):
    x = var((5, 6))
    assert ops.slice(x, start=1).shape == (4, 6)
    assert ops.slice(x, start=[1, 2], stop=[3, 6], step=[1, 2]).shape == (2, 2)
    assert ops.slice(x, stop=3, step=-1, axis=1).shape == (5, 2)
    assert ops.slice(x, start=-2, axis=-1).shape == (5, 2)
    v = ops.slice_(x, start=1)
    assert v.producer.aliases == {0: 0} and v.producer.type == "slice"
    with pytest.raises(ValueError):
        ops.slice(x, start=[1, 2], stop=[3])
    with pytest.raises(ValueError):
        ops.slice(x, start=0, step=0)
    assert ops.subsample(x, [2, 2]).shape == (3, 3) and ops.subsample(x, [1, 4]).shape == (5, 2)
    assert ops.subsample(x, (2, 3)).shape == (3, 2) and ops.subsample(x, np.array([5, 1])).shape == (1, 6)
    assert ops.subsample(x, (s for s in [1, 6])).shape == (5, 1)
    assert ops.subsample(ops.flatten(x), 7).shape == (5,)  # an int is one stride, for a rank-1 tensor
    with pytest.raises(ValueError, match="The length of subsample `strides` must match the rank"):
        ops.subsample(x, 2)  # as in PopXL: an int is a list of one stride
    with pytest.raises(ValueError, match="The length of subsample `strides` must match the rank"):
        ops.subsample(x, [1])
    with pytest.raises(ValueError, match=">= 1"):
        ops.subsample(x, [0, 1])
    with pytest.raises(TypeError, match="iterable of ints"):
        ops.subsample(x, 2.5)


def test_concat_split(main, var):
    a, b = var((2, 3)), var((2, 5))
    assert ops.concat([a, b], axis=-1).shape == (2, 8)
    with pytest.raises(ValueError):
        ops.concat([a, b], axis=0)
    with pytest.raises(TypeError, match=r"All inputs to a concat operation must have the same type: "
                                        r"\[popxl.dtypes.float32, popxl.dtypes.int32\]"):
        ops.concat([a, var((2, 3), np.int32)], 1)
    with pytest.raises(TypeError, match="All inputs to a concat operation must have the same type"):
        ops.concat_([a, var((2, 3), np.float16)], 0)
    assert ops.concat_([a, a]).producer.attrs["view"]
    parts = ops.split(var((6, 4)), 3)
    assert isinstance(parts, list) and [p.shape for p in parts] == [(2, 4)] * 3
    assert [p.shape for p in ops.split(var((6, 4)), [1, 3], axis=1)] == [(6, 1), (6, 3)]
    with pytest.raises(ValueError):
        ops.split(var((6, 4)), 4)
    with pytest.raises(ValueError):
        ops.split(var((6, 4)), [1, 2], axis=1)


def test_gather_scatter_dynamic(main, var):
    t = var((5, 4, 3))
    idx = var((2, 6), np.int32)
    assert ops.gather(t, idx).shape == (2, 6, 4, 3)
    assert ops.gather(t, idx, axis=-1).shape == (5, 4, 2, 6)
    assert ops.tied_gather(t, idx, 1).producer.type == "tied_gather"
    with pytest.raises(TypeError):
        ops.gather(t, var((2,)))
    assert ops.groupedgather(var((2, 5, 3)), var((2, 4), np.int32), axis=0, group_size=2).shape == (2, 4, 3)
    s = ops.scatter(var((3, 3)), var((2, 3), np.int32), var((2, 3)), axis=0)
    assert s.shape == (3, 3)
    with pytest.raises(ValueError):
        ops.scatter(var((3, 3)), var((2, 3), np.int32), var((3, 3)))
    r = ops.scatter_reduce(var((6, 4)), var((6,), np.int32), "sum", axis_size=3)
    assert r.shape == (3, 4) and r.producer.attrs["reduction"] == "sum"
    r2 = ops.scatter_reduce(var((6, 4)), var((6, 4), np.int32), "max", initial_values=var((2, 4)))
    assert r2.shape == (2, 4) and len(r2.producer.inputs) == 3
    with pytest.raises(ValueError):
        ops.scatter_reduce(var((6, 4)), var((6,), np.int32), "sum")
    with pytest.raises(ValueError):
        ops.scatter_reduce(var((6, 4)), var((6,), np.int32), "avg", axis_size=3)
    index = var((2,), np.uint32)
    ds = ops.dynamic_slice(t, index, [0, 2], [2, 1], no_overlap=True)
    assert ds.shape == (2, 4, 1) and ds.producer.attrs["axes"] == (0, 2)
    du = ops.dynamic_update_(t, index, var((2, 4, 1)), [0, 2], [2, 1], False)
    assert du.shape == t.shape and du.producer.modified == (0,)
    with pytest.raises(ValueError):
        ops.dynamic_update(t, index, var((2, 4, 2)), [0, 2], [2, 1], False)
    with pytest.raises(ValueError):
        ops.dynamic_slice(t, var((3,), np.uint32), [0, 2], [2, 1], True)
    # popops also takes one offset per row of a (number of axes, 1) index
    assert ops.dynamic_slice(t, var((2, 1), np.uint32), [0, 2], [2, 1], True).shape == (2, 4, 1)
    with pytest.raises(ValueError, match=r"shape \(2,\) or \(2, 1\)"):
        ops.dynamic_slice(t, var((2, 2), np.uint32), [0, 2], [2, 1], True)


def test_onehot(main, var):
    labels = var((4,), np.int32)
    values = popxl.constant([0.0, 1.0])
    assert ops.onehot(labels, popxl.constant(10), values, axis=-1).shape == (4, 10)
    assert ops.onehot(labels, 3, values, axis=0).shape == (3, 4)
    with pytest.raises(ValueError):
        ops.onehot(labels, var((), np.int32), values, axis=0)


def test_nn_ops(main, var):
    x = var((4, 6))
    assert ops.softmax(x, -1).producer.attrs["axis"] == 1
    w, b = var((6,)), var((6,))
    ln = ops.layer_norm(x, w, b)
    op = ln.producer
    assert op.type == "group_norm" and op.attrs["num_groups"] == 1 and ln.shape == (4, 6)
    assert [o.shape for o in op.outputs] == [(4, 6), (4,), (4,)]
    gn = ops.group_norm(var((2, 6, 5)), w, b, num_groups=3)
    assert gn.producer.outputs[1].shape == (6,)
    with pytest.raises(ValueError):
        ops.group_norm(x, w, b, num_groups=4)
    with pytest.raises(ValueError):
        ops.layer_norm(x, var((5,)), b)
    bn = ops.batch_norm_inference(var((2, 6, 3, 3)), w, b, w, b)
    assert bn.shape == (2, 6, 3, 3)
    probs, labels = var((8, 5)), var((8,), np.int32)
    assert ops.nll_loss(probs, labels).shape == ()
    assert ops.nll_loss(probs, labels, reduction="none").shape == (8,)
    loss, grad = ops.nll_loss_with_softmax_grad(probs, labels)
    assert loss.shape == () and grad.shape == (8, 5)
    with pytest.raises(ValueError):
        ops.nll_loss(probs, var((5,), np.int32))
    # PopART flattens the labels: (N, 1) labels are taken, and the 'none' loss has their shape
    assert ops.nll_loss(probs, var((8, 1), np.uint32), reduction="none").shape == (8, 1)
    assert ops.nll_loss_with_softmax_grad(ops.cast(probs, popxl.float16), var((8, 1), np.int8))[0].dtype == popxl.float16
    with pytest.raises(TypeError):
        ops.nll_loss(probs, var((8,)))
    assert ops.lamb_square(x).shape == () and ops.lamb_square(x).dtype == popxl.float32


def test_conv_and_pool(main, var):
    img = var((2, 3, 9, 9))
    w = var((8, 3, 3, 3))
    assert ops.conv(img, w).shape == (2, 8, 7, 7)
    assert ops.conv(img, w, stride=(2, 2), padding=(1, 1, 1, 1)).shape == (2, 8, 5, 5)
    assert ops.conv(img, w, pad_type="same_upper").shape == (2, 8, 9, 9)
    assert ops.conv(img, w, dilation=(2, 2)).shape == (2, 8, 5, 5)
    assert ops.conv(var((1, 4, 5, 5)), var((6, 2, 1, 1)), groups=2).shape == (1, 6, 5, 5)
    with pytest.raises(ValueError):
        ops.conv(img, var((8, 4, 3, 3)))
    assert ops.conv_transpose(img, var((3, 4, 3, 3)), stride=(2, 2)).shape == (2, 4, 19, 19)
    assert ops.max_pool(img, (3, 3), (3, 3)).shape == (2, 3, 3, 3)
    assert ops.average_pool(img, (2, 2), (2, 2)).shape == (2, 3, 4, 4)
    assert ops.average_pool(img, (2, 2), (2, 2), ceil_mode=True).shape == (2, 3, 5, 5)
    assert ops.max_pool(var((1, 2, 10)), (3,)).shape == (1, 2, 8)
    with pytest.raises(ValueError, match=r"kernel_size \(0, 2\) must be >= 1"):
        ops.max_pool(img, (0, 2))
    assert ops.interpolate(img, (1.0, 1.0, 2.0, 2.0)).shape == (2, 3, 18, 18)
    with pytest.raises(TypeError, match="one float per axis"):  # was "'NoneType' object is not iterable"
        ops.interpolate(img, None)
    rois = ops.roi_align(img, var((5, 4)), var((5,), np.int32), (2, 2), 1.0, 2)
    assert rois.shape == (5, 3, 2, 2)
    with pytest.raises(TypeError, match="float8"):
        ops.conv_pow2scaled(img, w, popxl.constant(0))


def test_random_ops(main, var):
    seed = popxl.variable(popxl.random_seed.create_seeds(0), popxl.uint32)
    assert seed.shape == (2,)
    assert ops.random_uniform(seed, (2, 3)).shape == (2, 3)
    assert ops.random_normal(seed, (4,), dtype=popxl.float16).dtype == popxl.float16
    assert ops.dropout(var((3, 4)), seed, 0.1).producer.attrs["ratio"] == 0.1
    assert ops.shaped_dropout(var((3, 4)), seed, (1, 4), 0.5).shape == (3, 4)
    seeds = ops.split_random_seed(seed, 3)
    assert len(seeds) == 3 and all(s.shape == (2,) and s.dtype == popxl.uint32 for s in seeds)
    with pytest.raises(ValueError, match="seed"):
        ops.random_uniform(var((2,), np.int32), (2,))
    with pytest.raises(ValueError):
        ops.dropout(var((3,)), seed, 1.0)
    with pytest.raises(ValueError):
        ops.shaped_dropout(var((3, 4)), seed, (2, 4), 0.5)


def test_misc_ops(main, var):
    x = var((2, 3))
    assert ops.cast(x, popxl.int32).dtype == popxl.int32
    assert ops.cast(x, "float16").producer.attrs["dtype"] == popxl.float16
    assert ops.identity(x, "copy").id == "copy"
    assert ops.init((2, 5), popxl.float16, "buf", "undef").producer.attrs["init_type"] == "undef"
    with pytest.raises(ValueError):
        ops.init((2,), popxl.float32, init_type="ones")
    p = ops.print_tensor(x, "title")
    assert p.shape == x.shape and p.producer.attrs["title"] == "title"
    h = ops.histogram(x, [0.0, 1.0, 2.0], absolute_of_input=True)
    assert h.shape == (4,) and h.dtype == popxl.uint32
    with pytest.raises(ValueError):
        ops.histogram(x, [1.0, 0.5], False)
    with popxl.io_tiles():
        io = ops.io_tile_copy(x)
    assert io.tile_set == "io" and io.producer.attrs["destination"] == "io"
    with pytest.raises(ValueError, match="scalar"):
        ops.pow2scale_cast_to_fp8(x, x, popxl.float8_143)
    with pytest.raises(TypeError, match="pow2scale_cast_to_fp8"):
        ops.cast(x, popxl.float8_152)


def test_var_updates(main, var):
    vu = ops.var_updates
    t, g = var((3, 4)), var((3, 4))
    a = vu.accumulate_(t, g)
    op = a.producer
    assert op.type == "accumulate" and op.attrs["accumulation_type"] == "add" and op.attrs["factor"] is None
    assert op.modified == (0,) and op.aliases == {0: 0} and op.inplace and a.shape == (3, 4)
    b = vu.accumulate_(t, g, popxl.constant(0.5)).producer
    assert b.attrs["accumulation_type"] == "dampened_add" and b.attrs["input_names"] == ("t", "X", "f")
    assert vu.accumulate_square_(t, g, 0.5).producer.attrs == {
        "accumulation_type": "dampened_add_square", "factor": 0.5, "input_names": ("t", "X")}
    assert vu.accumulate_mean_(t, g, 3).producer.attrs["accumulation_type"] == "mean"
    assert vu.accumulate_moving_average_(t, g, 0.9).producer.attrs["factor"] == 0.9
    assert vu.accumulate_moving_average_square_(t, g, 0.9).producer.attrs["accumulation_type"] == \
        "moving_average_square"
    z = vu.accumulator_zero_(t).producer
    assert z.type == "accumulator_scale" and z.attrs["factor"] == 0.0
    with pytest.raises(ValueError):
        vu.accumulate_(t, var((5,)))
    sp = vu.sparse_accumulate_(var((10, 4)), var((3, 4)), var((3,), np.int32), 0, 0.5).producer
    assert sp.type == "sparse_accumulate" and sp.attrs["input_names"] == ("t", "X", "indices")
    step = popxl.variable(0.0, name="step")
    upd = vu.adam_updater(t, g, time_step=step, beta1=0.9, beta2=0.999)
    op = upd.producer
    assert op.attrs["mode"] == "adam" and op.inputs[op.modified[0]] is step and not op.aliases
    assert upd.shape == (3, 4)
    assert vu.adam_updater(t, g).producer.attrs["mode"] == "adam_no_bias"
    assert not vu.adam_updater(t, g).producer.inplace
    assert vu.lamb_updater(t, g, weight=t, weight_decay=0.1).producer.attrs["input_names"] == \
        ("weight", "acc_first_order", "acc_second_order")
    with pytest.raises(ValueError):
        vu.adam_updater(t, g, weight_decay=0.1)
    with pytest.raises(ValueError):
        vu.adam_updater(t, g, time_step=step, beta1=0.9)
    with pytest.raises(ValueError):
        vu.adamax_updater(t, g)
    assert vu.adamax_updater(t, g, time_step=step).producer.attrs["mode"] == "adamax"
    r1, r2 = ops.lamb_square(t), ops.lamb_square(g)
    av = vu.adam_var_update(t, upd, r1, r2, learning_rate=0.01).producer
    assert av.attrs["learning_rate"] == 0.01 and av.modified == (0,) and len(av.inputs) == 4
    cv = vu.copy_var_update_(t, g).producer
    assert cv.type == "copy_var_update" and cv.aliases == {0: 0}
    with pytest.raises(ValueError):
        vu.copy_var_update_(t, var((4, 3)))


def test_not_yet_available_ops(main, var):
    x = var((2,))
    buf = popxl.remote_buffer((2,), popxl.float32)
    # streaming memory (tests/remote runs it): the ops are recorded; code_copy is unimplemented, as in PopXL
    assert ops.remote_load(buf, 0).shape == (2,) and ops.remote_load_(buf, 0, x).shape == (2,)
    ops.remote_store(buf, 0, x)
    assert [op.type for op in main.ops[-3:]] == ["remote_load", "remote_load", "remote_store"]
    with pytest.raises(ValueError):  # the graph it is in
        ops.remote_code_load(main, "executable")
    with pytest.raises(NotImplementedError):
        ops.code_copy(main, "buffer", "executable")
    c = ops.collectives  # one replica: the collectives are recorded (tests/replication runs them)
    assert c.replicated_all_reduce(x).shape == x.shape and c.replicated_all_gather(x).shape == x.shape
    assert c.replicated_reduce_scatter(x).shape == (x.nelms,) and ops.ipu_copy(x, 1, 0).ipu == 1


def test_pool_padding_must_be_smaller_than_the_kernel(main, var):
    x = var((1, 2, 5, 5))
    assert ops.max_pool(x, (3, 3), padding=(2, 2, 2, 2)).shape == (1, 2, 7, 7)
    for pool in (ops.max_pool, ops.average_pool):
        with pytest.raises(ValueError, match="smaller than the kernel"):
            pool(x, (2, 2), padding=(2, 0, 0, 0))
        with pytest.raises(ValueError, match="smaller than the kernel"):
            pool(x, (3, 3), padding=(0, 0, 0, 3))
