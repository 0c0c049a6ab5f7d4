"""examples/bert_layers.py: BERT encoder stacks trained with autodiff + SGD, checked against NumPy.

The default suite runs small sizes (hidden 64); the full BERT-base sizes (hidden 768, 12 heads,
sequence 128) are marked slow (`pytest -m slow`)."""
import os
import runpy

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")
SMALL = ["--hidden", "64", "--heads", "4", "--seq", "16", "--steps", "2", "--quiet"]


@pytest.fixture(scope="module")
def bert():
    return runpy.run_path(os.path.join(EXAMPLES, "bert_layers.py"), run_name="example")


@pytest.fixture(autouse=True)
def default_target(monkeypatch):
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)


def _check(r, dtype):
    loss_tol, out_tol, upd_tol = (1e-5, 1e-4, 1e-3) if dtype == "float32" else (2e-3, 5e-2, 0.1)
    assert abs(r["losses"][0] - r["ref_loss"]) <= loss_tol * max(1.0, abs(r["ref_loss"]))
    assert r["out_err"] < out_tol
    assert r["update_err"] < upd_tol
    assert r["worst_bytes"] <= r["tile_bytes"] and r["cycles"] > 0


@pytest.mark.parametrize("args, dtype", [
    (["--layers", "2"], "float32"),
    (["--layers", "3", "--shared"], "float32"),
    (["--layers", "2", "--dtype", "float16"], "float16"),
    (["--layers", "3", "--shared", "--dtype", "float16"], "float16"),
    (["--layers", "2", "--dtype", "float16", "--lr", "1"], "float16"),  # updates float16 can hold
])
def test_small_stacks_match_numpy(bert, args, dtype):
    _check(bert["main"](args + SMALL), dtype)


def test_shared_layer_is_lowered_once(bert):
    """Compile work is flat in the number of calls: one layer graph, L call sites."""
    r1 = bert["main"](["--layers", "1", "--shared", "--steps", "1"] + SMALL[:6] + ["--quiet"])
    r4 = bert["main"](["--layers", "4", "--shared", "--steps", "1"] + SMALL[:6] + ["--quiet"])
    # worst-tile growth from 1 to 4 calls is the per-layer weights and saved activations only,
    # not 4 copies of the layer's code and temporaries
    c1, c4 = r1["worst_categories"], r4["worst_categories"]
    # the most exchange code on any tile: 4 calls of the one layer graph stay far below 4 layers of code
    assert r4["max_categories"]["exchange_code"] < 1.5 * r1["max_categories"]["exchange_code"]
    assert c4.get("vertex_state", 0) < 1.2 * c1.get("vertex_state", 0)


@pytest.mark.slow
@pytest.mark.parametrize("args, dtype", [
    (["--layers", "4"], "float32"),
    (["--layers", "4", "--dtype", "float16"], "float16"),
    (["--layers", "12", "--shared", "--dtype", "float16"], "float16"),
])
def test_bert_base_stacks_fit_and_match_numpy(bert, args, dtype):
    r = bert["main"](args + ["--steps", "1", "--quiet"])
    _check(r, dtype)
