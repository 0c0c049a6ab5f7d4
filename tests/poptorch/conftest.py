import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # poptorch_helpers

try:
    import torch  # noqa: F401
except ImportError:  # pragma: no cover
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the PopTorch tests: install the torch extra (pip install -e '.[torch]')")
    collect_ignore_glob = ["test_*.py"]


@pytest.fixture
def small_ipu(monkeypatch):
    """A GC200 with 16 tiles: the same arithmetic and costs per tile, compiled in a fraction of
    the time of 1472 tiles."""
    monkeypatch.setenv("IPU_SIM_TARGET", "small:16")


@pytest.fixture(autouse=True)
def _seed():
    import torch
    torch.manual_seed(0)
