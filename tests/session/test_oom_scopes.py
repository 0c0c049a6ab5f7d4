"""Out of memory in PopXL terms: the error names the name scopes (forward and gradient ops alike)
that own what overflows."""
import os
import runpy

import pytest

import ipu
import popxl

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_out_of_memory_names_the_layers(monkeypatch):
    bert = runpy.run_path(os.path.join(ROOT, "examples", "bert_layers.py"), run_name="bert")
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    weights = bert["init_weights"](2, 128)
    ir, _ = bert["build_ir"](2, 128, 4, 32, popxl.float32, False, 0.01, weights)
    with pytest.raises(ipu.OutOfMemoryError) as err:
        popxl.Session(ir, "ipu_model")
    e = err.value
    msg = str(e)
    assert e.categories and "Fix what overflows" in msg
    scopes = e.report[0]["scopes"]
    assert any(s.startswith("layer0/") or s == "layer0" for s in scopes), scopes
    assert any(s.startswith("layer1") for s in scopes), scopes
    assert "Name scopes owning the most of it" in msg
