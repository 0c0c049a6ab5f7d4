import pytest


@pytest.fixture(autouse=True)
def small_ipu(monkeypatch):
    """PopXL scripts ask for "ipu_model"; a few tiles keep these tests fast."""
    monkeypatch.setenv("IPU_SIM_TARGET", "small:8")
