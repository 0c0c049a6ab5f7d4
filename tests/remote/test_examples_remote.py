"""The streaming-memory examples run on the default GC200 and check themselves against NumPy."""
import os
import runpy

import pytest

EXAMPLES = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "examples")


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):  # overrides tests/remote/conftest.py: examples run on the full GC200
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)


def _main(name):
    return runpy.run_path(os.path.join(EXAMPLES, f"{name}.py"), run_name="example")["main"]


def test_remote_variables_example(capsys):
    res = _main("remote_variables")(["--layers", "3", "--width", "64", "--steps", "2"])
    assert max(res["errors"]) < 1e-4
    assert "remote_load" in capsys.readouterr().out


def test_code_loading_example(capsys):
    res = _main("code_loading")(["--layers", "2", "--seq", "16", "--hidden", "32"])
    assert res["loaded"].max() < res["resident"].max()
    assert res["load_cycles"] > 0
    assert res["cycles"][1] - res["cycles"][0] >= res["load_cycles"] - 1000  # loads cost what they say
    out = capsys.readouterr().out
    assert "peak vertex code on the busiest tile" in out and "code-load steps" in out
