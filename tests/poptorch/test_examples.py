"""examples/poptorch/: MNIST training and a BERT-style encoder's inference run on the simulated
GC200 and check themselves against PyTorch on the CPU."""
import os
import runpy

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples",
                        "poptorch")


@pytest.fixture(autouse=True)
def default_target(monkeypatch):
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)


def _load(name):
    return runpy.run_path(os.path.join(EXAMPLES, f"{name}.py"), run_name="example")


@pytest.mark.slow  # 8 calls of 10 training steps of a CNN on the 1472-tile GC200
def test_mnist_trains():
    res = _load("mnist")["main"](["--train-size", "640", "--test-size", "160", "--device-iterations", "10",
                                  "--lr", "0.1"])
    assert res["first_loss_error"] < 1e-5
    assert res["losses"][-1] < res["losses"][0]
    assert res["accuracy"] > 30  # ten classes: chance is 10%


def test_bert_encoder_inference_matches_pytorch():
    res = _load("bert_encoder_inference")["main"](["--layers", "2", "--hidden", "64", "--heads", "2", "--seq", "16",
                                                   "--calls", "2"])
    assert res["error"] < 1e-4 and res["cycles"] > 0


def test_bert_encoder_pipelined_over_two_ipus():
    res = _load("bert_encoder_inference")["main"](["--layers", "2", "--hidden", "32", "--heads", "2", "--seq", "8",
                                                   "--ipus", "2", "--calls", "1"])
    assert res["error"] < 1e-4
