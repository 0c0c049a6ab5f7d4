"""The seam other frontends build on: the parts of popxl's internals that PopART (popart/) and the
frontends over it need, declared here and kept for them.

It is not PopXL API (PopXL has no such module). A frontend uses popxl's public API, this module
and `popxl._pb` (the views of PopART's internal IR, served as `popart._internal.ir`), and no other
private popxl module: tests/popart/test_seams.py holds popart/ to it. A name a frontend needs
from popxl's internals is added here, with the job it does for the frontend.
"""
from ._devices import (CPU_BYTES_PER_TILE, POD_IPUS, DeviceConnectionType, DeviceInfo, DeviceManager,
                       DeviceSelectionCriterion, DeviceType, SyncPattern)
from ._logging import LEVELS as LOG_LEVELS
from ._logging import get_level as get_log_level
from ._logging import log
from ._logging import set_level as set_log_level
from ._profiling import build as build_profile
from ._replication import ipus_per_replica
from .ops.nn import _batch_norm_training as batch_norm_training
from .ops.reduce import _cumsum as cumsum

__all__ = [
    # the simulated devices a session runs on (PopART's DeviceManager / DeviceInfo, popart.devices)
    "CPU_BYTES_PER_TILE", "POD_IPUS", "DeviceConnectionType", "DeviceInfo", "DeviceManager",
    "DeviceSelectionCriterion", "DeviceType", "SyncPattern",
    # PopART's log: its levels, per module (popart.getLogger)
    "LOG_LEVELS", "get_log_level", "set_log_level", "log",
    # the profile document of a session (Session.getReport-style readers)
    "build_profile",
    # how many IPUs one replica of an Ir takes (the device a session must be given)
    "ipus_per_replica",
    # PopART's BatchNormOp in training: y, the batch mean and 1 / std as one op
    "batch_norm_training",
    # ONNX's CumSum with its exclusive / reverse attributes (PopART's CumSumOp)
    "cumsum",
]
