import os
import sys

import pytest

import popdist

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # programs, poprun_helpers


@pytest.fixture(autouse=True)
def clean_popdist_env(monkeypatch):
    """Tests run on a GC200 cut down to 4 tiles per IPU, outside any PopRun environment."""
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    for k in (*popdist.ENV_VARS, "PMI_SIZE", "PMI_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK"):
        monkeypatch.delenv(k, raising=False)
