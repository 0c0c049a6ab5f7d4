"""poptorch.Options (toDict, loadFromFile, the option groups), PopTorch's own ops
(set_available_memory, serializedMatMul, recomputationCheckpoint, nop, ipu_print_tensor,
dynamic_slice / update, MultiConv, NameScope), half precision and randomness."""
import pytest
import torch
import torch.nn.functional as F

import poptorch

import models


def test_to_dict_and_load_from_file(tmp_path):
    cfg = tmp_path / "opts.txt"
    cfg.write_text("deviceIterations(4)\n# a comment\nreplicationFactor(2)\nTraining.gradientAccumulation(3)\n"
                   "outputMode(poptorch.OutputMode.Sum)\nPrecision.setPartialsType(torch.half)\n"
                   "_Popart.set('autoRecomputation', 3)\nrandomSeed(7)\n")
    opts = poptorch.Options().loadFromFile(str(cfg))
    d = opts.toDict()
    assert d["device_iterations"] == 4 and d["replication_factor"] == 2 and d["gradient_accumulation"] == 3
    assert d["output_mode"] == poptorch.OutputMode.Sum and d["partialsTypeMatMuls"] == "half"
    assert d["autoRecomputation"] == 3 and d["random_seed"] == 7
    bad = tmp_path / "bad.txt"
    bad.write_text("deviceIterations(__import__('os'))\n")
    with pytest.raises(poptorch.options.ConfigFileError, match="bad.txt:1"):
        poptorch.Options().loadFromFile(str(bad))
    bad.write_text("noSuchOption(1)\n")
    with pytest.raises(poptorch.options.ConfigFileError, match="unknown option"):
        poptorch.Options().loadFromFile(str(bad))
    with pytest.raises(poptorch.Error, match="output mode must be picked"):
        poptorch.Options().toDict()


def test_option_groups_are_accepted(small_ipu, tmp_path):
    opts = poptorch.Options()
    opts.useIpuModel(True).enableExecutableCaching(str(tmp_path / "cache")).randomSeed(3)
    opts.setAvailableMemoryProportion({"IPU0": 0.3})
    opts.Precision.enableStochasticRounding(False).runningStatisticsAlwaysFloat(True)
    opts.Precision.halfFloatCasting(poptorch.HalfFloatCastingBehavior.HalfUpcastToFloat)
    opts.TensorLocations.setOptimizerLocation(poptorch.TensorLocationSettings().useOnChipStorage(True))
    opts.Distributed.disable()
    opts.Jit.traceModel(False)
    opts.logCycleCount(True)
    model = models.MLP()
    trainer = poptorch.trainingModel(model, opts)
    x, y = models.data("mlp", 4)
    trainer(x, y)
    assert trainer.cycleCount() > 0
    with pytest.raises(ValueError, match="Invalid key"):
        poptorch.Options().setAvailableMemoryProportion({"GPU0": 0.5})
    frozen = poptorch.Options()
    poptorch.inferenceModel(torch.nn.Linear(1, 1), frozen)
    with pytest.raises(AttributeError, match="frozen"):
        frozen.deviceIterations(2)


class Annotated(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 12)
        self.b = torch.nn.Linear(12, 6)
        self.c1 = torch.nn.Conv2d(2, 3, 3)
        self.c2 = torch.nn.Conv2d(2, 3, 1)

    def forward(self, x, img, start):
        h = poptorch.set_available_memory(self.a(x), 0.2)
        h = poptorch.recomputationCheckpoint(torch.relu(h))
        h = poptorch.nop(h)
        w = self.b.weight.t()
        h = poptorch.serializedMatMul(h, w, poptorch.MatMulSerializationMode.ReducingDim, 3) + \
            poptorch.serializedMatMul(h, w, poptorch.MatMulSerializationMode.OutputChannels, 2) + \
            poptorch.serializedMatMul(h, w, poptorch.MatMulSerializationMode.InputChannels, 2)
        with poptorch.NameScope("convs"), poptorch.MultiConv().availableMemoryProportions((0.3, 0.4)):
            u, v = self.c1(img), self.c2(img)
        s = poptorch.dynamic_slice(h, 1, start, 3, 1)
        h2 = poptorch.dynamic_update(h, s * 2, 1, start, 3)
        return h2, u.sum() + v.sum()


def test_annotation_ops_keep_the_numbers(small_ipu):
    torch.manual_seed(0)
    model = Annotated()
    x, img = torch.randn(4, 8), torch.randn(4, 2, 5, 5)
    start = torch.tensor([2])
    got = poptorch.inferenceModel(model)(x, img, start)
    want = model(x, img, start)
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w.detach(), rtol=1e-4, atol=1e-5)


def test_ipu_print_tensor(small_ipu, capfd):
    class P(torch.nn.Module):
        def forward(self, x):
            return poptorch.ipu_print_tensor(x * 2, "doubled") + 1

    poptorch.inferenceModel(P())(torch.arange(3, dtype=torch.float32).reshape(1, 3))
    out = capfd.readouterr()
    assert "doubled" in out.out + out.err


@pytest.mark.slow
def test_half_model(small_ipu):
    torch.manual_seed(0)
    model = models.MLP()
    x, y = models.data("mlp", 6)
    want = model(x, y)[0].detach()
    got = poptorch.inferenceModel(model.half())(x.half(), y)[0]
    assert got.dtype == torch.float16
    torch.testing.assert_close(got.float(), want, rtol=2e-2, atol=2e-2)
    trainer = poptorch.trainingModel(model, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.01,
                                                                         loss_scaling=128.0))
    _, loss = trainer(x.half(), y)
    assert loss.dtype == torch.float16 and torch.isfinite(loss)


def test_dropout_uses_the_seed(small_ipu):
    class D(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.l = torch.nn.Linear(4, 64)

        def forward(self, x):
            y = F.dropout(self.l(x), 0.5, training=self.training)
            return y, poptorch.identity_loss(y.sum(), "sum")

    def run(seed):
        torch.manual_seed(0)
        opts = poptorch.Options().randomSeed(seed)
        model = D()
        out, _ = poptorch.trainingModel(model, opts, torch.optim.SGD(model.parameters(), lr=0.0))(torch.ones(2, 4))
        return out

    a, b, c = run(1), run(1), run(2)
    assert torch.equal(a, b) and not torch.equal(a, c)
    zeros = (a == 0).float().mean().item()
    assert 0.3 < zeros < 0.7
