"""DeviceManager and DeviceInfo: the simulated devices a session runs on (popxl/_devices.py, where
popxl.Session finds them too)."""
from popxl._frontends import (CPU_BYTES_PER_TILE, POD_IPUS, DeviceConnectionType, DeviceInfo, DeviceManager,  # noqa: F401
                               DeviceSelectionCriterion, DeviceType, SyncPattern)

__all__ = ["CPU_BYTES_PER_TILE", "POD_IPUS", "DeviceConnectionType", "DeviceInfo", "DeviceManager", "DeviceSelectionCriterion",
           "DeviceType", "SyncPattern"]
