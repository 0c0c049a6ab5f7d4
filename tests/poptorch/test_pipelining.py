"""Blocks, stages and execution strategies: a model pipelined over 2 simulated IPUs trains like
the same model on one IPU; PopTorch's checks on pipelines."""
import copy

import pytest
import torch
import torch.nn.functional as F

import poptorch

import models


class TwoStageMLP(models.MLP):
    """models.MLP with its layers in two blocks, written with Block scopes."""

    def forward(self, x, labels):
        with poptorch.Block("first", ipu_id=0):
            h = F.relu(self.fc1(x))
        with poptorch.Block("second", ipu_id=1):
            h = F.gelu(self.fc2(h))
            logits = self.out(h)
            loss = F.cross_entropy(logits, labels)
        return logits, loss


def _train(model, opts, steps=2):
    x, y = models.data("mlp", 12)
    trainer = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.1))
    for _ in range(steps):
        _, loss = trainer(x, y)
    state = copy.deepcopy(model.state_dict())
    ipus = trainer._session.ipus_per_replica
    trainer.destroy()
    return state, ipus


def _reference(steps=2):
    torch.manual_seed(0)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    return _train(models.MLP(), opts, steps)[0]


def _assert_same(a, b):
    for k in a:
        torch.testing.assert_close(a[k], b[k], rtol=1e-5, atol=2e-6, msg=k)


def test_block_pipeline_over_two_ipus_equals_one_ipu(small_ipu):
    torch.manual_seed(0)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    state, ipus = _train(TwoStageMLP(), opts)
    assert ipus == 2
    _assert_same(state, _reference())


def test_begin_block_and_explicit_stages(small_ipu):
    torch.manual_seed(0)
    model = models.MLP()
    poptorch.BeginBlock(model.fc2, "B", ipu_id=1)
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    state, ipus = _train(model, opts)
    assert ipus == 2
    _assert_same(state, _reference())
    torch.manual_seed(0)
    model = models.MLP()
    poptorch.BeginBlock(model.fc1, "A")
    poptorch.BeginBlock(model.fc2, "B")
    opts = poptorch.Options()
    opts.Training.gradientAccumulation(3)
    opts.setExecutionStrategy(poptorch.PipelinedExecution(poptorch.Stage("A").ipu(0), poptorch.Stage("B").ipu(1)))
    state, ipus = _train(model, opts)
    assert ipus == 2
    _assert_same(state, _reference())


def test_sharded_and_phased_execution(small_ipu):
    for strategy in (poptorch.ShardedExecution(), poptorch.SerialPhasedExecution(
            poptorch.Phase(poptorch.Stage("first").ipu(0)), poptorch.Phase(poptorch.Stage("second").ipu(1)))):
        torch.manual_seed(0)
        opts = poptorch.Options()
        opts.Training.gradientAccumulation(3)
        opts.setExecutionStrategy(strategy)
        state, _ = _train(TwoStageMLP(), opts)
        _assert_same(state, _reference())


def test_pipeline_checks(small_ipu):
    x, y = models.data("mlp", 2)
    trainer = poptorch.trainingModel(TwoStageMLP())
    with pytest.raises(poptorch.Error, match=r"gradientAccumulation must be greater than or equal to the number of "
                                             r"pipeline stages \(3\).*2 pipeline stages .* additional 1 stages"):
        trainer(x, y)
    opts = poptorch.Options()
    inference = poptorch.inferenceModel(TwoStageMLP(), opts)
    with pytest.raises(poptorch.Error, match=r"deviceIterations must be greater than or equal to the number of "
                                             r"pipeline stages \(2\)"):
        inference(x, y)
    out, _ = poptorch.inferenceModel(TwoStageMLP(), poptorch.Options().deviceIterations(2))(x, y)
    assert out.shape == (2, 5)


def test_three_ipus_need_rounding(small_ipu):
    class Three(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b, self.c = (torch.nn.Linear(3, 3) for _ in range(3))

        def forward(self, x):
            with poptorch.Block(ipu_id=0):
                x = self.a(x)
            with poptorch.Block(ipu_id=1):
                x = self.b(x)
            with poptorch.Block(ipu_id=2):
                return self.c(x)

    x = torch.zeros(3, 3)
    opts = poptorch.Options().deviceIterations(3)
    opts.setExecutionStrategy(poptorch.ShardedExecution())
    with pytest.raises(poptorch.Error, match="not a power of 2"):
        poptorch.inferenceModel(Three(), opts)(x)
    opts = poptorch.Options().deviceIterations(3).autoRoundNumIPUs(True)
    opts.setExecutionStrategy(poptorch.ShardedExecution())
    model = Three()
    torch.testing.assert_close(poptorch.inferenceModel(model, opts)(x), model(x), rtol=1e-5, atol=1e-6)
