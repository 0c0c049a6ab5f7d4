"""Device iterations, replication, gradient accumulation and output modes: the shapes PopTorch
returns, and training that equals one IPU at the combined batch."""
import copy

import pytest
import torch

import poptorch

import models


def test_inference_output_modes(small_ipu):
    torch.manual_seed(42)
    model = torch.nn.Linear(6, 20)
    x = torch.randn(10, 1, 5, 6)
    native = model(x).detach()
    for mode in poptorch.OutputMode:
        opts = poptorch.Options().deviceIterations(10)
        opts.outputMode(mode, output_return_period=5)
        out = poptorch.inferenceModel(model, opts)(x)
        if mode in (poptorch.OutputMode.All, poptorch.OutputMode.Default):
            assert out.shape == (10, 1, 5, 20)
            torch.testing.assert_close(out, native, rtol=1e-5, atol=1e-6)
        elif mode == poptorch.OutputMode.EveryN:
            assert out.shape == (2, 1, 5, 20)
            torch.testing.assert_close(out[0], native[4], rtol=1e-5, atol=1e-6)
            torch.testing.assert_close(out[1], native[9], rtol=1e-5, atol=1e-6)
        elif mode == poptorch.OutputMode.Final:
            torch.testing.assert_close(out.reshape(native[-1].shape), native[-1], rtol=1e-5, atol=1e-6)
        else:
            torch.testing.assert_close(out, native.sum(0, keepdim=True), rtol=1e-5, atol=1e-5)


def test_anchor_mode_spelling_and_training_output_shapes(small_ipu):
    model = models.MLP()
    x, y = models.data("mlp", 12)
    opts = poptorch.Options().deviceIterations(3)
    opts.anchorMode(poptorch.AnchorMode.All)
    out, loss = poptorch.trainingModel(model, opts)(x, y)
    assert out.shape == (12, 5) and loss.shape == (3,)
    final = poptorch.trainingModel(models.MLP(), poptorch.Options().deviceIterations(3))
    out, loss = final(x, y)
    assert out.shape == (4, 5) and loss.shape == ()


def _train(kind, opts, batch, steps=2, lr=0.1):
    torch.manual_seed(0)
    model = models.make(kind)
    trainer = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=lr, momentum=0.5))
    x, y = models.data(kind, batch)
    for _ in range(steps):
        trainer(x, y)
    state = copy.deepcopy(model.state_dict())
    trainer.destroy()
    return state


def _assert_same(a, b, atol=2e-6):
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=atol, msg=k)


def test_replication_and_accumulation_equal_one_ipu(small_ipu):
    """4 replicas of micro-batch 2, or 4 accumulated micro-batches of 2, train like one IPU on the
    batch of 8 (the default Mean reduction of the gradients)."""
    one = _train("mlp", poptorch.Options(), 8)
    replicated = _train("mlp", poptorch.Options().replicationFactor(4), 8)
    _assert_same(one, replicated)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(4)
    _assert_same(one, _train("mlp", opts, 8))


def test_sum_reduction(small_ipu):
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    opts.Training.accumulationAndReplicationReductionType(poptorch.ReductionType.Sum)
    summed = _train("mlp", opts, 8, lr=0.05)
    _assert_same(_train("mlp", poptorch.Options(), 8, lr=0.1), summed)


def test_batch_dimension_error(small_ipu):
    opts = poptorch.Options().deviceIterations(3)
    m = poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)
    with pytest.raises(poptorch.Error, match=r"Invalid batch dimension.*\(4\).*= 3"):
        m(torch.zeros(4, 2))


def test_inference_refuses_gradient_accumulation():
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(2)
    with pytest.raises(poptorch.Error, match=r"gradientAccumulation to 1 .* Use poptorch.Options\(\).deviceIter"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)


def test_changed_input_shape_is_an_error(small_ipu):
    m = poptorch.inferenceModel(torch.nn.Linear(2, 3))
    m(torch.zeros(4, 2))
    with pytest.raises(poptorch.Error, match="differ from the ones the model was compiled with"):
        m(torch.zeros(5, 2))


@pytest.mark.parametrize("kind", [poptorch.CommGroupType.Consecutive, poptorch.CommGroupType.Orthogonal])
def test_input_replica_grouping_gives_a_group_one_slice(small_ipu, kind):
    """4 replicas in groups of 2 read 2 slices of the batch: Consecutive groups are replicas {0, 1}
    and {2, 3}, Orthogonal groups {0, 2} and {1, 3}."""
    torch.manual_seed(1)
    model = torch.nn.Linear(5, 3)
    opts = poptorch.Options().replicationFactor(4).deviceIterations(2).inputReplicaGrouping(2, kind)
    opts.outputMode(poptorch.OutputMode.All)
    x = torch.randn(2 * 2 * 3, 5)  # deviceIterations x input groups x micro-batch
    out = poptorch.inferenceModel(model, opts)(x)
    assert out.shape == (2 * 4 * 3, 3)
    slices = x.reshape(2, 2, 3, 5)
    group = [0, 0, 1, 1] if kind == poptorch.CommGroupType.Consecutive else [0, 1, 0, 1]
    want = torch.stack([torch.stack([model(slices[i, group[r]]) for r in range(4)]) for i in range(2)])
    torch.testing.assert_close(out.reshape(2, 4, 3, 3), want.detach(), rtol=1e-5, atol=1e-6)
    loader = poptorch.DataLoader(opts, torch.utils.data.TensorDataset(torch.randn(30, 5)), batch_size=3)
    assert loader.combinedBatchSize == 12


def test_input_replica_grouping_trains_like_one_ipu(small_ipu):
    """Replicas {0, 1} and {2, 3} each see one half of the batch of 8; the mean of their gradients is
    one IPU's gradient at batch 8."""
    opts = poptorch.Options().replicationFactor(4).inputReplicaGrouping(2, poptorch.CommGroupType.Consecutive)
    _assert_same(_train("mlp", poptorch.Options(), 8), _train("mlp", opts, 8))


def test_input_replica_grouping_errors(small_ipu):
    with pytest.raises(ValueError, match="must be CommGroupType.Consecutive, Orthogonal or NoGrouping"):
        poptorch.Options().inputReplicaGrouping(2, poptorch.CommGroupType.All)
    with pytest.raises(ValueError, match="input_group_size must be 1"):
        poptorch.Options().inputReplicaGrouping(2, poptorch.CommGroupType.NoGrouping)
    opts = poptorch.Options().replicationFactor(4).inputReplicaGrouping(3)
    with pytest.raises(poptorch.Error, match=r"input_group_size \(3\) must divide replicationFactor \(4\)"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)(torch.zeros(4, 2))
    opts = poptorch.Options().replicationFactor(4).inputReplicaGrouping(2)
    with pytest.raises(poptorch.Error, match=r"\(Options.replicationFactor\(4\) / Options.inputReplicaGrouping"
                                             r".input_group_size\(2\)\) \* .* = 2"):
        poptorch.inferenceModel(torch.nn.Linear(2, 2), opts)(torch.zeros(3, 2))
