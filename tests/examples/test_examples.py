"""Every example runs (on the default simulated GC200) and does what it says."""
import os
import runpy

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


@pytest.fixture(autouse=True)
def default_target(monkeypatch):
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)


@pytest.mark.parametrize("name", ["simple_addition", "tensor_addition", "subgraph_call", "repeat_loop"])
def test_script_examples(name, capsys):
    runpy.run_path(os.path.join(EXAMPLES, f"{name}.py"), run_name="__main__")  # each asserts its result
    assert capsys.readouterr().out


def _load(name):
    return runpy.run_path(os.path.join(EXAMPLES, f"{name}.py"), run_name="example")


def test_mlp_inference_matches_numpy():
    out = _load("mlp_inference")["main"](["--batch", "8", "--hidden", "64"])
    assert out.shape == (8, 10)


def test_mnist_trains_on_synthetic_data():
    res = _load("mnist")["main"](["--train-size", "960", "--test-size", "300", "--epochs", "1"])
    assert res["losses"][0] < 2.0
    assert res["first_losses"][0] > res["losses"][-1]
    assert res["accuracy"] > 0.6  # ten classes: chance is 0.1


@pytest.mark.parametrize("args", [["--optimizer", "adam", "--lr", "0.002"], ["--micro-batches", "2"]])
def test_mnist_variants_learn(args):
    res = _load("mnist")["main"](["--train-size", "640", "--test-size", "200", *args])
    assert res["accuracy"] > 0.3


def test_float8_inference_matches_float32():
    res = _load("float8_inference")["main"]([])
    assert res["float8"].dtype.name == "float16"
    assert res["relative_error"] < 0.1  # 3 mantissa bits: a few percent
    assert all(-32 <= s < 32 for s in res["scales"])


def test_custom_op_example_trains_through_its_leaky_relu():
    # imported as the module the other custom-op tests use (its op and codelets register once)
    import importlib
    import sys
    if EXAMPLES not in sys.path:
        sys.path.insert(0, EXAMPLES)
    assert importlib.import_module("custom_op").main(steps=2) > 0
