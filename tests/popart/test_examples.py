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


@pytest.mark.slow  # two MPI processes start and compile: ~20 s
def test_replicated_training_over_two_poprun_instances_matches_one_process(tmp_path, monkeypatch):
    """poprun 2 instances x 2 replicas each (--popdist) trains to the weights one process with 4
    replicas reaches, bitwise."""
    import subprocess
    import sys

    import numpy as np
    root = os.path.dirname(os.path.dirname(EXAMPLES))
    env = dict(os.environ, IPU_SIM_TARGET="small:4", PYTHONPATH=root)
    save = tmp_path / "w.npy"
    p = subprocess.run([sys.executable, "-m", "popdist.poprun", "--num-instances", "2", "--num-replicas", "4",
                        sys.executable, os.path.join(EXAMPLES, "replicated_training.py"), "--popdist", "--steps", "3",
                        "--save", str(save)], capture_output=True, text=True, timeout=300, env=env, cwd=root)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "replicas 2..3 of 4" in p.stdout
    one = _load("replicated_training")["main"](["--steps", "3", "--tiles", "4"])
    assert np.array_equal(np.load(save).view(np.uint32), one["weights"].view(np.uint32))
