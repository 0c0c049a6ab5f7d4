"""Profiles of PopTorch models: written as for PopXL programs (IPU_SIM_PROFILE, or
Options.enableProfiling), with layer names from the module hierarchy."""
import json

import torch

import poptorch
from profiler import _format
from profiler.cli import main as ipu_profile

import models


def test_profile_has_module_names(monkeypatch, tmp_path, small_ipu, capsys):
    monkeypatch.setenv("IPU_SIM_PROFILE", str(tmp_path))
    model = models.Encoder(layers=1)
    trainer = poptorch.trainingModel(model)
    x, y = models.data("encoder", 2)
    trainer(x, y)
    trainer.destroy()
    doc = _format.load(tmp_path)
    names = " ".join(st["name"] for st in doc["steps"])
    for layer in ("encoder/layers/0/self_attn", "encoder/layers/0/linear1", "tok", "head"):
        assert layer in names, layer
    assert doc["info"]["frontend"] == "poptorch"
    assert ipu_profile(["report", str(tmp_path), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report


def test_enable_profiling_option(monkeypatch, tmp_path, small_ipu):
    monkeypatch.delenv("IPU_SIM_PROFILE", raising=False)
    monkeypatch.delenv("POPLAR_ENGINE_OPTIONS", raising=False)
    opts = poptorch.Options().enableProfiling(str(tmp_path))
    model = poptorch.inferenceModel(torch.nn.Linear(3, 2), opts)
    model(torch.ones(2, 3))
    model.destroy()  # detaching writes the profile (a script's also is at exit)
    assert list(tmp_path.glob("profile*.json"))
