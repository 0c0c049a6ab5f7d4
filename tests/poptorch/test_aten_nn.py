"""Neural-network ATen ops (matrix products, convolutions, pooling, normalisations, softmax,
attention) and losses, forward and backward, against PyTorch on the CPU."""
import torch
import torch.nn.functional as F

from poptorch_helpers import Case, check_cases, t


def i64(*shape, low=0, high=5):
    return t(*shape, dtype=torch.int64, low=low, high=high)


def matmul_cases():
    return [
        Case("mm", torch.mm, [t(3, 7), t(7, 5)]),
        Case("mm_vec_k1", torch.mm, [t(4, 1), t(1, 6)]),
        Case("bmm", torch.bmm, [t(2, 3, 5), t(2, 5, 4)]),
        Case("matmul_bcast", torch.matmul, [t(2, 1, 3, 4), t(5, 4, 2)]),
        Case("matvec", torch.matmul, [t(3, 4), t(4)]),
        Case("linear", F.linear, [t(2, 5, 7), t(3, 7), t(3)]),
        Case("linear_nobias", F.linear, [t(6, 7), t(11, 7)]),
        Case("addmm", lambda b, x, y: torch.addmm(b, x, y, beta=0.5, alpha=2.0), [t(4), t(3, 5), t(5, 4)]),
        Case("baddbmm", lambda b, x, y: torch.baddbmm(b, x, y), [t(2, 3, 4), t(2, 3, 5), t(2, 5, 4)]),
        Case("einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), [t(2, 3, 4), t(2, 4, 2)]),
        Case("addbmm", lambda b, x, y: torch.addbmm(b, x, y, alpha=0.5), [t(3, 4), t(2, 3, 5), t(2, 5, 4)]),
        Case("addmv_dot", lambda b, m, v: (torch.addmv(b, m, v), torch.dot(v, v)), [t(3), t(3, 4), t(4)]),
    ]


def conv_cases():
    return [
        Case("conv2d", lambda x, w, b: F.conv2d(x, w, b, stride=2, padding=1), [t(2, 3, 7, 6), t(4, 3, 3, 3), t(4)],
             rtol=1e-4, atol=1e-5),
        Case("conv2d_groups", lambda x, w: F.conv2d(x, w, groups=2, dilation=(1, 2)), [t(1, 4, 6, 7), t(6, 2, 2, 2)],
             rtol=1e-4, atol=1e-5),
        Case("conv2d_depthwise", lambda x, w: F.conv2d(x, w, groups=3, padding=1), [t(2, 3, 5, 5), t(3, 1, 3, 3)],
             rtol=1e-4, atol=1e-5),
        Case("conv1d", lambda x, w, b: F.conv1d(x, w, b, padding=2), [t(2, 3, 11), t(5, 3, 4), t(5)], rtol=1e-4,
             atol=1e-5),
        Case("conv_transpose2d", lambda x, w: F.conv_transpose2d(x, w, stride=2, padding=1),
             [t(1, 2, 4, 3), t(2, 3, 3, 3)], rtol=1e-4, atol=1e-5),
        Case("max_pool2d", lambda x: F.max_pool2d(x, 3, stride=2, padding=1), [t(2, 3, 7, 8)]),
        Case("max_pool_ceil", lambda x: F.max_pool2d(x, 2, ceil_mode=True), [t(1, 2, 5, 5)]),
        Case("avg_pool2d", lambda x: F.avg_pool2d(x, 2), [t(2, 2, 6, 5)]),
        Case("avg_pool_pad", lambda x: F.avg_pool2d(x, 3, stride=1, padding=1), [t(1, 2, 5, 4)]),
        Case("avg_pool_nopadcount", lambda x: F.avg_pool2d(x, 3, stride=2, padding=1, count_include_pad=False),
             [t(1, 2, 5, 4)]),
        Case("adaptive_avg", lambda x: F.adaptive_avg_pool2d(x, (1, 1)), [t(2, 3, 5, 4)]),
        Case("adaptive_avg_even", lambda x: F.adaptive_avg_pool2d(x, (2, 3)), [t(1, 2, 4, 6)]),
        Case("adaptive_avg_uneven", lambda x: F.adaptive_avg_pool2d(x, 3), [t(1, 2, 7, 5)]),
        Case("max_pool1d", lambda x: F.max_pool1d(x, 2), [t(2, 3, 9)]),
        Case("upsample_nearest", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), [t(1, 2, 3, 3)]),
        Case("pools_1d", lambda x: (F.avg_pool1d(x, 3, stride=2), F.adaptive_avg_pool1d(x, 3),
                                    F.interpolate(x, scale_factor=3, mode="nearest")), [t(2, 3, 7)]),
        Case("pools_3d", lambda x: (F.avg_pool3d(x, 2), F.max_pool3d(x, 2), F.adaptive_avg_pool3d(x, (1, 2, 2)),
                                    F.adaptive_max_pool3d(x, 1), F.interpolate(x, scale_factor=2, mode="nearest")),
             [t(1, 2, 4, 4, 4)]),
        Case("adaptive_max", lambda x: F.adaptive_max_pool2d(x, (2, 1)), [t(2, 2, 4, 3)]),
    ]


def norm_cases():
    return [
        Case("batch_norm_train", lambda x, w, b: F.batch_norm(x, torch.zeros(3), torch.ones(3), w, b, training=True),
             [t(4, 3, 5, 2), t(3), t(3)], rtol=1e-4, atol=1e-5),
        Case("batch_norm_eval", lambda x, w, b, m, v: F.batch_norm(x, m, v, w, b, training=False),
             [t(4, 3, 2), t(3), t(3), t(3), t(3, positive=True)], rtol=1e-5, atol=1e-5, no_grad_inputs=(3, 4)),
        Case("layer_norm", lambda x, w, b: F.layer_norm(x, (7,), w, b), [t(2, 5, 7), t(7), t(7)], rtol=1e-4,
             atol=1e-5),
        Case("layer_norm_2d", lambda x: F.layer_norm(x, (3, 4)), [t(2, 3, 4)], rtol=1e-4, atol=1e-5),
        Case("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b), [t(2, 4, 3, 3), t(4), t(4)], rtol=1e-4,
             atol=1e-5),
        Case("softmax", lambda x: F.softmax(x, -1), [t(3, 11) * 3]),
        Case("softmax_dim0", lambda x: F.softmax(x, 0), [t(5, 2)]),
        Case("log_softmax", lambda x: F.log_softmax(x, 1), [t(4, 9) * 3]),
        Case("attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v), [t(2, 3, 5, 4), t(2, 3, 6, 4),
                                                                                     t(2, 3, 6, 4)],
             rtol=1e-4, atol=1e-5),
        Case("attention_causal_mask", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m),
             [t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8), t(4, 4)], rtol=1e-4, atol=1e-5),
        Case("dropout_eval", lambda x: F.dropout(x, 0.5, training=False), [t(5)]),
    ]


def loss_cases():
    return [
        Case("cross_entropy", lambda x, y: F.cross_entropy(x, y), [t(6, 5) * 2, i64(6)]),
        Case("cross_entropy_sum", lambda x, y: F.cross_entropy(x, y, reduction="sum"), [t(3, 4), i64(3, high=4)]),
        Case("cross_entropy_ignore", lambda x: F.cross_entropy(x, torch.tensor([1, -100, 2, 0])), [t(4, 3)]),
        Case("cross_entropy_weight", lambda x, y: F.cross_entropy(x, y, weight=torch.tensor([1.0, 2.0, 0.5])),
             [t(5, 3), i64(5, high=3)]),
        Case("cross_entropy_nd", lambda x, y: F.cross_entropy(x, y), [t(2, 4, 3, 2), i64(2, 3, 2, high=4)]),
        Case("cross_entropy_smooth", lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1), [t(4, 6), i64(4)]),
        Case("nll", lambda x, y: F.nll_loss(F.log_softmax(x, 1), y), [t(7, 3), i64(7, high=3)]),
        Case("nll_none", lambda x, y: F.nll_loss(x, y, reduction="none"), [t(4, 5), i64(4)]),
        Case("mse", F.mse_loss, [t(3, 4), t(3, 4)]),
        Case("l1", F.l1_loss, [t(3, 4), t(3, 4)]),
        Case("smooth_l1", lambda x, y: F.smooth_l1_loss(x, y, beta=0.5), [t(3, 4), t(3, 4)]),
        Case("huber", lambda x, y: F.huber_loss(x, y, delta=0.7), [t(10), t(10)]),
        Case("bce", lambda x, y: F.binary_cross_entropy(torch.sigmoid(x), y), [t(5, 2), t(5, 2, low=0.0, high=1.0)]),
        Case("bce_logits", F.binary_cross_entropy_with_logits, [t(5, 2) * 3, t(5, 2, low=0.0, high=1.0)]),
        Case("bce_logits_pos", lambda x, y: F.binary_cross_entropy_with_logits(x, y, pos_weight=torch.tensor([2.0, 0.5])),
             [t(5, 2), t(5, 2, low=0.0, high=1.0)]),
        Case("soft_margin", F.soft_margin_loss, [t(4, 3), torch.sign(t(4, 3))], no_grad_inputs=(1,)),
        Case("kl_div", lambda x, y: F.kl_div(F.log_softmax(x, 1), F.softmax(y, 1), reduction="batchmean"),
             [t(3, 4), t(3, 4)]),
    ]


def test_matmuls(small_ipu):
    check_cases(matmul_cases())


def test_convolutions_and_pools(small_ipu):
    check_cases(conv_cases())


def test_normalisations(small_ipu):
    check_cases(norm_cases())


def test_losses(small_ipu):
    check_cases(loss_cases())
