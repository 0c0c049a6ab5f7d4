"""The PopART examples run and do what they say (small sizes, small simulated IPUs)."""
from __future__ import annotations

import os
import runpy

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "popart")


def _load(name):
    return runpy.run_path(os.path.join(EXAMPLES, f"{name}.py"), run_name="example")


def test_simple_addition(capsys):
    runpy.run_path(os.path.join(EXAMPLES, "simple_addition.py"), run_name="__main__")
    assert "equal to data_a + data_b" in capsys.readouterr().out


@pytest.mark.parametrize("model", ["mlp", "cnn"])
@pytest.mark.parametrize("optimizer", ["sgd", "adam"])
def test_mnist_first_step_matches_numpy_and_loss_falls(model, optimizer):
    res = _load("mnist")["main"](["--model", model, "--optimizer", optimizer, "--steps", "6", "--batch-size", "16",
                                   "--tiles", "32"])
    assert res["step_diff"] < 1e-4 and res["loss_diff"] < 1e-4
    assert res["last"] < res["first"]


def test_pytorch_exported_models_match_pytorch():
    pytest.importorskip("torch", reason="torch is not installed (it is not a dependency); the example skips too")
    res = _load("pytorch_onnx")["main"]([])
    assert set(res) == {"cnn", "lstm"} and all(d < 1e-4 for d in res.values())


def test_pipeline_over_two_ipus_with_accumulation():
    res = _load("pipeline_two_ipus")["main"](["--steps", "3", "--tiles", "16"])
    assert res["num_ipus"] == 2 and res["max_diff"] < 1e-4
    assert res["losses"][-1] < res["losses"][0]


def test_replicated_training():
    res = _load("replicated_training")["main"](["--steps", "4", "--tiles", "16"])
    assert res["max_diff"] < 1e-4 and res["losses"][-1] < res["losses"][0]
