"""Recomputation through PopTorch: ``Options._Popart.set("autoRecomputation", n)`` and
``poptorch.recomputationCheckpoint`` act as PopTorch makes PopART act (popart/_recompute.py picks
the ops, the gradient graph reruns them). Results are bit-identical to keeping the activations;
fewer bytes are live and more cycles run."""
import copy

import numpy as np
import pytest
import torch
from torch import nn

import popart
import poptorch
from poptorch import _program


class _Net(nn.Module):
    """conv-BN-ReLU x 2 (12 x 12 images), global average pool, a linear layer, cross entropy;
    ``checkpoint``: poptorch.recomputationCheckpoint after the first block."""

    def __init__(self, checkpoint=False):
        super().__init__()
        self.checkpoint = checkpoint
        self.c1, self.b1 = nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.c2, self.b2 = nn.Conv2d(8, 8, 3, padding=1), nn.BatchNorm2d(8)
        self.fc = nn.Linear(8, 5)

    def forward(self, x, y):
        h = torch.relu(self.b1(self.c1(x)))
        if self.checkpoint:
            h = poptorch.recomputationCheckpoint(h)
        h = torch.relu(self.b2(self.c2(h)))
        logits = self.fc(h.mean(dim=(2, 3)))
        return logits, nn.functional.cross_entropy(logits, y)


_BASE = _Net()


def _train(mode=None, checkpoint=False, steps=2):
    model = _Net(checkpoint)
    model.load_state_dict(copy.deepcopy(_BASE.state_dict()))
    opts = poptorch.Options()
    opts._Popart.set("instrumentWithHardwareCycleCounter", True)
    if mode is not None:
        opts._Popart.set("autoRecomputation", int(mode))
    trainer = poptorch.trainingModel(model, opts, optimizer=poptorch.optim.SGD(model.parameters(), lr=0.1))
    g = torch.Generator().manual_seed(0)
    losses = []
    for _ in range(steps):
        x, y = torch.randn(4, 3, 12, 12, generator=g), torch.randint(0, 5, (4,), generator=g)
        losses.append(float(trainer(x, y)[1]))
    trainer.copyWeightsToHost()
    exe = trainer._session.executable
    return {"losses": losses, "state": {k: v.clone() for k, v in model.state_dict().items()},
            "cycles": trainer.cycleCount(), "live_peak": int(exe.liveness.max()),
            "vertex_state": int(exe.plan.categories["vertex_state"].sum())}


def _same(a, b):
    assert a["losses"] == b["losses"]
    for k, v in a["state"].items():
        np.testing.assert_array_equal(v.numpy(), b["state"][k].numpy(), err_msg=k)


@pytest.fixture(scope="module")
def kept():
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("IPU_SIM_TARGET", "small:16")
        return _train()


@pytest.mark.parametrize("mode", [popart.RecomputationType.Standard, popart.RecomputationType.NormOnly])
def test_auto_recomputation_same_numbers_fewer_bytes_live(small_ipu, kept, mode):
    got = _train(mode)
    _same(got, kept)
    assert got["live_peak"] < kept["live_peak"]
    assert got["cycles"] > kept["cycles"]
    assert got["vertex_state"] == kept["vertex_state"]  # the ops' own programs run again


def test_recomputation_checkpoint_is_where_recompute_all_stops(small_ipu, kept):
    """RecomputeAll keeps everything after the last checkpoint (PopART's rule): with no
    checkpoint nothing is recomputed; recomputationCheckpoint after the first block makes that
    block recomputed."""
    nothing = _train(popart.RecomputationType.RecomputeAll)
    _same(nothing, kept)
    assert nothing["cycles"] == kept["cycles"]
    with_checkpoint = _train(checkpoint=True)
    some = _train(popart.RecomputationType.RecomputeAll, checkpoint=True)
    _same(some, with_checkpoint)
    assert some["cycles"] > with_checkpoint["cycles"]
    assert some["live_peak"] < with_checkpoint["live_peak"]


def test_recomputation_type_as_poptorch_sets_it():
    none, pipeline = popart.RecomputationType.NoRecompute, popart.RecomputationType.Pipeline
    # PopTorch turns Pipeline recomputation on for a pipeline over several IPUs unless the user set it
    assert _program.recomputation({}, pipelined=True, num_ipus=2) == pipeline
    assert _program.recomputation({}, pipelined=True, num_ipus=1) == none
    assert _program.recomputation({}, pipelined=False, num_ipus=4) == none  # ShardedExecution
    assert _program.recomputation({"autoRecomputation": 0}, pipelined=True, num_ipus=2) == none
    assert _program.recomputation({"autoRecomputation": popart.RecomputationType.Standard}, True, 1).name == "Standard"
    with pytest.raises(poptorch.Error, match="RecomputationType out of range"):
        _program.recomputation({"autoRecomputation": 7}, pipelined=False, num_ipus=1)


def test_popart_enums_convert_to_int():
    """pybind11 enums convert to int: scripts pass int(popart.X.Y) to Options._Popart.set."""
    # PopART's numbering (sessionoptions.hpp): scripts also write the bare number, as PopTorch's
    # docstring does: _Popart.set("autoRecomputation", 3)  # RecomputationType::Pipeline
    assert int(popart.RecomputationType.Pipeline) == 3 and int(popart.RecomputationType.RecomputeAll) == 4
    assert int(popart.SyntheticDataMode.RandomNormal) == 2
    assert [0, 1, 2][popart.RecomputationType.NormOnly] == 2
