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
