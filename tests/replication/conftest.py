import pytest


@pytest.fixture(autouse=True)
def small_target(monkeypatch):
    """Replication tests run on a GC200 cut down to 4 tiles per IPU (same costs per tile)."""
    monkeypatch.setenv("IPU_SIM_TARGET", "small:4")
    for k in ("POPDIST_NUM_TOTAL_REPLICAS", "POPDIST_NUM_LOCAL_REPLICAS", "POPDIST_REPLICA_INDEX_OFFSET",
              "POPDIST_NUM_IPUS_PER_REPLICA"):
        monkeypatch.delenv(k, raising=False)


import os  # noqa: E402
import sys  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))  # replication_helpers
