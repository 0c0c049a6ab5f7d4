import os
import sys

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # popart_helpers


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


@pytest.fixture(autouse=True)
def _no_target_override(monkeypatch):
    """The device a PopART test creates decides the target, not IPU_SIM_TARGET."""
    monkeypatch.delenv("IPU_SIM_TARGET", raising=False)
