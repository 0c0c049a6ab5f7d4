"""Layout, indexing and reduction ATen ops, forward and backward, against PyTorch on the CPU."""
import pytest
import torch
import torch.nn.functional as F

import poptorch
from poptorch_helpers import Case, check_cases, t


def i64(*shape, low=0, high=5):
    return t(*shape, dtype=torch.int64, low=low, high=high)


def view_cases():
    return [
        Case("view", lambda x: x.view(7, 6) * 2, [t(2, 3, 7)]),
        Case("reshape_neg", lambda x: x.reshape(-1, 3) + 1, [t(4, 1, 3)]),
        Case("permute", lambda x: x.permute(2, 0, 1) * 1.5, [t(2, 3, 5)]),
        Case("transpose", lambda x: x.transpose(0, 2).contiguous(), [t(3, 1, 4)]),
        Case("t", lambda x: x.t() @ x, [t(5, 3)]),
        Case("unsqueeze_squeeze", lambda x: x.unsqueeze(1).squeeze(0) * 3, [t(1, 6)]),
        Case("flatten", lambda x: torch.flatten(x, 1) - 1, [t(2, 3, 5)]),
        Case("slice", lambda x: x[1:4, ::2] * 2, [t(5, 7)]),
        Case("alias", lambda x: x[...] * 2 + x[:, :], [t(3, 2)]),  # whole-tensor indexing: aten::alias
        Case("slice_neg", lambda x: x[..., -3:] + x[..., :3], [t(2, 6)]),
        Case("select", lambda x: x[:, 2] * x[0], [t(3, 3)]),
        Case("narrow", lambda x: x.narrow(1, 1, 2) * 4, [t(3, 4)]),
        Case("cat", lambda a, b: torch.cat([a, b, a], dim=1), [t(2, 3), t(2, 1)]),
        Case("stack", lambda a, b: torch.stack([a, b], dim=1), [t(4, 3), t(4, 3)]),
        Case("split", lambda x: tuple(p * (i + 1) for i, p in enumerate(torch.split(x, [2, 3, 2], dim=0))),
             [t(7, 2)]),
        Case("chunk", lambda x: tuple(x.chunk(3, dim=1)), [t(2, 7)]),
        Case("unbind", lambda x: tuple(p * 2 for p in x.unbind(1)), [t(3, 2)]),
        Case("expand", lambda x: x.expand(4, 3, 5) * 1.0, [t(3, 1)]),
        Case("expand_many", lambda x: x.expand(2, 31) * 2, [t(2, 1)]),
        Case("repeat", lambda x: x.repeat(2, 3), [t(2, 2)]),
        Case("flip", lambda x: torch.flip(x, [0, 1]), [t(3, 4)]),
        Case("roll", lambda x: torch.roll(x, 2, 1), [t(3, 5)]),
        Case("pad", lambda x: F.pad(x, (1, 2, 0, 1), value=0.5), [t(2, 3, 3)]),
        Case("tril", lambda x: torch.tril(x) + torch.triu(x, 1), [t(4, 5)]),
        Case("setitem", lambda x: _setitem(x), [t(4, 5)]),
        Case("inplace_chain", lambda x: _inplace(x), [t(3, 4)]),
        Case("to_half_and_back", lambda x: x.half().float() * 2, [t(5)], rtol=1e-3, atol=1e-3),
        Case("cast_int", lambda x: (x * 3).int() + (x > 0).long(), [t(6)], grad=False),
        # adaptive pooling of a channels-last tensor restrides its result in place (aten::as_strided_)
        Case("pool_channels_last", lambda x: F.adaptive_avg_pool2d(x.contiguous(memory_format=torch.channels_last),
                                                                    1) * 2, [t(2, 3, 4, 5)]),
        Case("as_strided_windows", lambda x: torch.as_strided(x, (4, 3), (2, 1), 1) * 2, [t(3, 4)]),
        Case("as_strided_prime", lambda x: torch.as_strided(x, (2, 3, 2), (5, 1, 3), 2) + 1, [t(13)]),
        Case("as_strided_of_transposed", lambda x: torch.as_strided(x.t(), (2, 5), (1, 3)) * 3, [t(5, 3)]),
    ]


def _setitem(x):
    y = x.clone()
    y[:, 1] = 2.0
    y[1:3, 2:4] = y[1:3, 2:4] * 3
    return y


def _inplace(x):
    y = x * 1.0
    y.add_(1).mul_(2).relu_()
    return y


def index_cases():
    return [
        Case("index_select", lambda x, i: torch.index_select(x, 1, i), [t(3, 6), i64(4, high=6)]),
        Case("index_tensor", lambda x, i: x[i], [t(5, 3), i64(2, 2)]),
        Case("index_two", lambda x, i, j: x[i, j], [t(4, 5), i64(6, high=4), i64(6, high=5)]),
        Case("index_middle", lambda x, i: x[:, i], [t(2, 5, 3), i64(4)]),
        Case("index_negative", lambda x: x[torch.tensor([-1, 0])], [t(4, 2)]),
        Case("gather", lambda x, i: torch.gather(x, 1, i), [t(3, 5), i64(3, 4)]),
        Case("embedding", lambda w, i: F.embedding(i, w), [t(10, 4), i64(2, 3, high=10)]),
        Case("embedding_pad", lambda w, i: F.embedding(i, w, padding_idx=1), [t(6, 4), i64(7, high=6)]),
        Case("bool_mask_const", lambda x: x[torch.tensor([True, False, True])], [t(3, 2)]),
        Case("arange_mask", lambda x: x * (torch.arange(5) < 3), [t(2, 5)]),
        Case("scatter", lambda x, i, s: x.scatter(1, i, s), [t(3, 4), torch.tensor([[1], [0], [3]]), t(3, 1)]),
        Case("scatter_add", lambda x, i, s: x.scatter_add(0, i, s), [t(3, 4), i64(5, 4, high=3), t(5, 4)]),
        Case("masked_assign", lambda x, m: x.masked_fill(m, 0.0) + x, [t(4, 3), t(4, 3, dtype=torch.bool)]),
        Case("index_put", lambda x, v: x.index_put((torch.tensor([0, 2]),), v), [t(4, 3), t(2, 3)]),
        Case("scatter_value", lambda x, i: x.scatter(0, i, 1.5), [t(3, 4), torch.tensor([[2, 0, 1, 2]])]),
        Case("factories_like", lambda x: (torch.zeros_like(x) + x, torch.ones_like(x) * x, torch.full_like(x, 2.0) - x,
                                          x.new_zeros(3) + 1, x.new_ones(2, 2), x.new_full((2,), 7.0),
                                          x.new_empty(3).fill_(1.0) * 2), [t(2, 3)]),
    ]


def reduce_cases():
    return [
        Case("sum_all", lambda x: x.sum(), [t(5, 7)]),
        Case("sum_dims", lambda x: x.sum((0, 2), keepdim=True), [t(3, 4, 5)]),
        Case("mean", lambda x: x.mean(-1), [t(3, 13)]),
        Case("amax", lambda x: x.amax(1), [t(4, 6)]),
        Case("max_dim", lambda x: torch.max(x, 0), [t(5, 3)]),
        Case("min_all", lambda x: x.min(), [t(2, 9)]),
        Case("argmax", lambda x: (x.argmax(1), x.argmin(), x.argmax(0, keepdim=True)), [t(4, 5)], grad=False),
        Case("prod", lambda x: x.prod(1), [t(3, 4, positive=True)]),
        Case("var_std", lambda x: (x.var(1), x.std(0, unbiased=False), torch.var_mean(x, 1)), [t(4, 6)]),
        Case("logsumexp", lambda x: torch.logsumexp(x, 1), [t(3, 7) * 4]),
        Case("norm", lambda x: (torch.linalg.vector_norm(x, dim=1), x.norm(p=1), x.norm()), [t(3, 5)]),
        Case("cumsum", lambda x: torch.cumsum(x, 1), [t(2, 9)]),
        Case("any_all", lambda x: (x.any(1), x.all()), [t(3, 4, dtype=torch.bool)], grad=False),
        Case("sum_int", lambda x: x.sum(1), [i64(3, 4)], grad=False),
        Case("min_max_all", lambda x: (x.max(), torch.min(x, 1), x.amin((0, 2)), x.prod()),
             [t(2, 3, 4, positive=True)]),
        Case("any_all_dims", lambda x: (x.any(), x.any((0, 1)), x.all(1), x.all((0, 2))),
             [t(2, 3, 4, dtype=torch.bool)], grad=False),
        Case("norms", lambda x: (torch.norm(x, p=3, dim=1), torch.norm(x, p=1), torch.norm(x, dim=0, keepdim=True),
                                 torch.norm(x, float("inf"), dim=1)), [t(3, 5)]),
    ]


def test_view_ops(small_ipu):
    check_cases(view_cases())


def test_index_ops(small_ipu):
    check_cases(index_cases())


def test_reductions(small_ipu):
    check_cases(reduce_cases())


def test_as_strided_past_its_input_says_so(small_ipu):
    class M(torch.nn.Module):
        def forward(self, x):
            return torch.as_strided(x[1:], (3, 4), (4, 1), 0) * 2  # reads the row the slice left out

    with pytest.raises(poptorch.Error, match="does not hold"):
        poptorch.inferenceModel(M())(t(3, 4))
