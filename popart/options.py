"""SessionOptions and the enums scripts set on them; Patterns.

SessionOptions keeps every field PopART has with its default. The fields the simulator acts on
are listed in `ACTED_ON`; a field set to a non-default value that changes nothing here (memory
placement, outlining, scheduling heuristics, ...) is named in a warning, once per field, when a
session is created. A name PopART does not have is an error at once, as PopART's pybind object
raises AttributeError for it.
"""
from __future__ import annotations

import warnings
from typing import Any, Dict, Optional

import numpy as np

from ._enum import PybindEnum
from ._settings import (AccumulateOuterFragmentSettings, AutodiffSettings, AutomaticLossScalingSettings,
                        BatchSerializationSettings, ExecutionPhaseSettings, ReplicatedCollectivesSettings)
from .errors import popart_exception


class VirtualGraphMode(PybindEnum):
    Off = 0
    Manual = 1
    Auto = 2
    ExecutionPhases = 3


class RecomputationType(PybindEnum):  # values as sessionoptions.hpp numbers them (RecomputeAll came last)
    NoRecompute = 0
    Standard = 1
    NormOnly = 2
    Pipeline = 3
    RecomputeAll = 4


class RecomputeType(PybindEnum):
    Undefined = 0
    Checkpoint = 1
    Recompute = 2
    Recomputed = 3


class ReductionType(PybindEnum):
    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(PybindEnum):
    Running = 0
    Post = 1


class MergeVarUpdateType(PybindEnum):
    Off = 0
    All = 1
    AutoTight = 2
    AutoLoose = 3


class SyntheticDataMode(PybindEnum):
    Off = 0
    Zeros = 1
    RandomNormal = 2
    RandomUniform = 3


class Instrumentation(PybindEnum):
    Outer = 0
    Inner = 1


class SubgraphCopyingStrategy(PybindEnum):
    OnEnterAndExit = 0
    JustInTime = 1


class InitType(PybindEnum):
    NoInit = 1
    Zero = 0


class PatternsLevel(PybindEnum):
    NoPatterns = 0
    Minimal = 1
    Default = 2
    All = 3


class VariableRetrievalMode(PybindEnum):
    OnePerGroup = 0
    AllReduceReplicas = 1
    AllReplicas = 2


class CommGroupType(PybindEnum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    Ungrouped = 3


VARIABLE_SETTINGS_KEY = "popart.variableSettings:"  # + tensor id: a model property the Builder writes


class CommGroup:
    """A domain of replicas (PopART's CommGroup): `All` replicas, `Consecutive` runs of
    `replicaGroupSize`, `Orthogonal` (every replicas / replicaGroupSize-th replica), or
    `Ungrouped` (each replica alone)."""

    def __init__(self, type: CommGroupType = CommGroupType.All, replicaGroupSize: int = 0):  # noqa: A002,N803
        if not isinstance(type, CommGroupType):
            raise popart_exception(f"CommGroup: type must be a popart.CommGroupType, not {type!r}")
        self.type, self.replicaGroupSize = type, int(replicaGroupSize)

    def __eq__(self, other):
        return isinstance(other, CommGroup) and (self.type, self.replicaGroupSize) == (other.type,
                                                                                       other.replicaGroupSize)

    def __hash__(self):
        return hash((self.type, self.replicaGroupSize))

    def __repr__(self):
        return f"CommGroup({self.type.name}, {self.replicaGroupSize})"


class VariableSettings:
    """How a variable is shared over the replicas (PopART's VariableSettings): replicas of one
    group hold the same value, and `retrievalMode` says what reading it back returns (one value
    per group, or one per replica).

        VariableSettings()                                   one value shared by all replicas
        VariableSettings(CommGroup(type, size)[, mode])      groups of a CommGroup
        VariableSettings(mode)                               all replicas in one group
        VariableSettings(stride, groupSize[, mode])          groups of `groupSize` replicas `stride` apart

    Methods take the replication factor, as PopART's do. An initializer of a variable with more
    than one group has a leading dimension of the number of groups (`shapeOnHost`)."""

    def __init__(self, *args):
        self._comm: Optional[CommGroup] = CommGroup()
        self._stride, self._size = 1, 0
        self._mode = VariableRetrievalMode.OnePerGroup
        rest = list(args)
        if rest and isinstance(rest[0], CommGroup):
            self._comm = rest.pop(0)
        elif len(rest) >= 2 and all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in rest[:2]):
            self._comm, self._stride, self._size = None, int(rest[0]), int(rest[1])
            rest = rest[2:]
        if rest and isinstance(rest[0], VariableRetrievalMode):
            self._mode = rest.pop(0)
        if rest:
            raise popart_exception(f"VariableSettings({', '.join(map(repr, args))}): the arguments are a CommGroup "
                                   "and/or a VariableRetrievalMode, or (stride, groupSize[, VariableRetrievalMode])")
        self.verify()

    # -- what it was made from --------------------------------------------------------------------
    def verify(self) -> None:
        if self._comm is not None:
            c = self._comm
            if c.type not in (CommGroupType.All, CommGroupType.Ungrouped) and c.replicaGroupSize < 1:
                raise popart_exception(f"VariableSettings: {c} needs a replicaGroupSize of at least 1")
        else:
            if self._stride < 1 or self._size < 1:
                raise popart_exception(f"VariableSettings: the stride ({self._stride}) and the group size "
                                       f"({self._size}) must be positive integers")
            if self._size == 1:
                self._stride = 1
        if self._mode == VariableRetrievalMode.AllReduceReplicas:
            raise popart_exception("VariableRetrievalMode.AllReduceReplicas is not supported (as in PopART): use "
                                   "OnePerGroup or AllReplicas")

    def isUsingCommGroup(self) -> bool:  # noqa: N802
        return self._comm is not None

    def getSharedVariableDomain(self) -> CommGroup:  # noqa: N802
        if self._comm is None:
            raise popart_exception("The variable settings were not made from a popart.CommGroup (they were made from "
                                   "a stride and a group size)")
        return CommGroup(self._comm.type, self._comm.replicaGroupSize)

    def getRetrievalMode(self) -> VariableRetrievalMode:  # noqa: N802
        return self._mode

    def getCommGroupType(self) -> CommGroupType:  # noqa: N802
        return self._comm.type if self._comm is not None else CommGroupType.Consecutive

    # -- the groups for a replication factor -------------------------------------------------------
    def _stride_size(self, replicaCount: int) -> tuple:  # noqa: N803
        """(stride, group size) of the groups over `replicaCount` replicas."""
        n = int(replicaCount)
        if n < 1:
            raise popart_exception(f"VariableSettings: the replica count must be at least 1, not {n}")
        if self._comm is None:
            stride, size = self._stride, self._size
        else:
            t, g = self._comm.type, self._comm.replicaGroupSize
            if t == CommGroupType.All:
                stride, size = 1, n
            elif t == CommGroupType.Ungrouped or g == 1:
                stride, size = 1, 1
            elif t == CommGroupType.Consecutive:
                stride, size = 1, g
            else:  # Orthogonal: group k is replicas k, k + n/g, k + 2n/g, ...
                if n % g:
                    raise popart_exception(f"VariableSettings: {self._comm} does not divide {n} replicas")
                stride, size = n // g, g
        if n % (stride * size):
            raise popart_exception(f"VariableSettings: groups of {size} replicas (stride {stride}) do not divide "
                                   f"{n} replicas")
        return stride, size

    def groups(self, replicaCount: int) -> list:  # noqa: N803
        """The replicas of every group, in group order."""
        n = int(replicaCount)
        stride, size = self._stride_size(n)
        out, seen = [], set()
        for first in range(n):
            if first in seen:
                continue
            block = (first // (stride * size)) * stride * size
            members = [block + (first - block) % stride + k * stride for k in range(size)]
            out.append(members)
            seen.update(members)
        return out

    def getGroupCount(self, replicaCount: int) -> int:  # noqa: N802,N803
        stride, size = self._stride_size(replicaCount)
        return int(replicaCount) // size

    groupCount = getGroupCount  # the name of the PopART user guide's replication example

    def getStride(self, replicaCount: Optional[int] = None) -> int:  # noqa: N802,N803
        if replicaCount is None:
            return self._stride
        return self._stride_size(replicaCount)[0]

    def getGroupSize(self) -> int:  # noqa: N802
        return self._size if self._comm is None else self._comm.replicaGroupSize

    def getRealGroupSize(self, replicaCount: int) -> int:  # noqa: N802,N803
        return self._stride_size(replicaCount)[1]

    def getGroupRepresentative(self, group: int) -> int:  # noqa: N802
        """The lowest replica of group `group`."""
        group = int(group)
        if self._comm is not None:
            t, g = self._comm.type, self._comm.replicaGroupSize
            if t == CommGroupType.All:
                return 0
            if t == CommGroupType.Consecutive and g > 1:
                return g * group
            return group
        stride, size = self._stride, self._size
        return (group // stride) * stride * size + group % stride

    def numReplicasReturningVariable(self, replicaCount: int) -> int:  # noqa: N802,N803
        """How many values reading the variable back gives: one per group, or one per replica."""
        if self._mode == VariableRetrievalMode.AllReplicas:
            return int(replicaCount)
        return self.getGroupCount(replicaCount)

    def shapeOnReplica(self, full_shape, replicaCount: int, name: str = "") -> list:  # noqa: N802,N803
        shape = list(full_shape)
        groups = self.getGroupCount(replicaCount)
        if groups == 1:
            return shape
        if not shape or shape[0] != groups:
            raise popart_exception(f"Tensor {name!r} of shape {shape}: with {groups} replica groups its outer dimension "
                                   f"must be the number of groups ({groups}), one value per group")
        return shape[1:]

    def shapeOnHost(self, replica_shape, replicaCount: int) -> list:  # noqa: N802,N803
        groups = self.getGroupCount(replicaCount)
        return list(replica_shape) if groups == 1 else [groups, *replica_shape]

    def _is_default(self) -> bool:
        return self._comm is not None and self._comm.type == CommGroupType.All and \
            self._mode == VariableRetrievalMode.OnePerGroup

    def __eq__(self, other):
        return isinstance(other, VariableSettings) and (self._comm, self._stride, self._size, self._mode) == \
            (other._comm, other._stride, other._size, other._mode)

    def __ne__(self, other):
        return not self == other

    def __repr__(self):
        dom = repr(self._comm) if self._comm is not None else f"stride={self._stride}, groupSize={self._size}"
        return f"VariableSettings({dom}, {self._mode.name})"

    # -- carried in the ONNX model (the Builder writes it, sessions read it) ------------------------------
    def _encode(self) -> str:
        if self._comm is not None:
            return f"commgroup:{self._comm.type.value}:{self._comm.replicaGroupSize}:{self._mode.value}"
        return f"stride:{self._stride}:{self._size}:{self._mode.value}"

    @classmethod
    def _decode(cls, text: str) -> "VariableSettings":
        kind, a, b, mode = text.split(":")
        mode = VariableRetrievalMode(int(mode))
        if kind == "commgroup":
            return cls(CommGroup(CommGroupType(int(a)), int(b)), mode)
        return cls(int(a), int(b), mode)


class TensorStorage(PybindEnum):
    """Where a tensor lives: tile memory or Streaming Memory (PopART's values)."""
    OnChip = 0
    OffChip = 1


class TileSet(PybindEnum):
    """The tiles a tensor is loaded onto or stored on: compute tiles or the IO tiles (numIOTiles)."""
    Compute = 0
    IO = 1


class ReplicatedTensorSharding(PybindEnum):
    Off = 0
    On = 1


class TensorLocation:
    """PopART's TensorLocation: storage, load and storage tile sets, replicated tensor sharding.
    Constructed as PopART's binding allows: (), (storage), (storage, replicatedTensorSharding) or
    (storage, loadTileSet, storageTileSet, replicatedTensorSharding). The simulator records it:
    where a tensor lives changes memory and cycles on hardware, not results."""

    def __init__(self, *args, **kwargs):
        names = ("storage", "loadTileSet", "storageTileSet", "replicatedTensorSharding")
        if len(args) == 2:  # (storage, replicatedTensorSharding)
            args = (args[0], TileSet.Compute, TileSet.Compute, args[1])
        if len(args) not in (0, 1, 4) or len(args) + len(kwargs) > 4 or set(kwargs) - set(names):
            raise TypeError("TensorLocation(): incompatible constructor arguments; it takes (), (storage), "
                            "(storage, replicatedTensorSharding) or (storage, loadTileSet, storageTileSet, "
                            "replicatedTensorSharding)")
        values = dict(zip(names, args), **kwargs)
        self.storage = values.get("storage", TensorStorage.OnChip)
        self.loadTileSet = values.get("loadTileSet", TileSet.Compute)
        self.storageTileSet = values.get("storageTileSet", TileSet.Compute)
        self.replicatedTensorSharding = values.get("replicatedTensorSharding", ReplicatedTensorSharding.Off)
        for name, kind in zip(names, (TensorStorage, TileSet, TileSet, ReplicatedTensorSharding)):
            if not isinstance(getattr(self, name), kind):
                raise TypeError(f"TensorLocation(): {name} must be a popart.{kind.__name__}, "
                                f"not {getattr(self, name)!r}")

    def isRemote(self) -> bool:  # noqa: N802
        return self.storage == TensorStorage.OffChip

    def __eq__(self, other):
        return isinstance(other, TensorLocation) and vars(self) == vars(other)

    def __repr__(self):
        return (f"TensorLocation({self.storage.name}, {self.loadTileSet.name}, {self.storageTileSet.name}, "
                f"RTS {self.replicatedTensorSharding.name})")


class TensorLocationSettings:
    """PopART's TensorLocationSettings((location | storage), minElementsForOffChip,
    minElementsForReplicatedTensorSharding): a bare TensorStorage means TensorLocation(storage)."""

    def __init__(self, location=None, minElementsForOffChip: int = 2, minElementsForReplicatedTensorSharding: int = 8192,  # noqa: N803
                 storage=None):
        if storage is not None:
            location = storage
        if isinstance(location, TensorStorage):
            location = TensorLocation(location)
        self.location = location if location is not None else TensorLocation()
        self.minElementsForOffChip = minElementsForOffChip
        self.minElementsForReplicatedTensorSharding = minElementsForReplicatedTensorSharding

    def __eq__(self, other):
        return isinstance(other, TensorLocationSettings) and vars(self) == vars(other)


class _Settings:
    """A small attribute bag for the nested settings objects (batch serialisation, ...)."""

    def __init__(self, **defaults):
        self.__dict__.update(defaults)

    def __eq__(self, other):
        return isinstance(other, _Settings) and vars(self) == vars(other)


def _defaults() -> Dict[str, Any]:
    return {
        # acted on
        "enableReplicatedGraphs": False, "replicatedGraphCount": 1, "virtualGraphMode": VirtualGraphMode.Off,
        "enablePipelining": False, "enableGradientAccumulation": False, "accumulationFactor": 1,
        "autoRecomputation": RecomputationType.NoRecompute, "engineOptions": {},
        "instrumentWithHardwareCycleCounter": False, "hardwareInstrumentations": {Instrumentation.Outer},
        "accumulationAndReplicationReductionType": ReductionType.Sum,
        "meanAccumulationAndReplicationReductionStrategy": MeanReductionStrategy.Post,
        "syntheticDataMode": SyntheticDataMode.Off, "constantWeights": True,
        "enableStochasticRounding": False, "reportOptions": {},
        # recorded only (performance / memory knobs with no effect on results)
        "accumulateOuterFragmentSettings": AccumulateOuterFragmentSettings(),
        "accumulatorTensorLocationSettings": TensorLocationSettings(),
        "activationTensorLocationSettings": TensorLocationSettings(),
        "optimizerStateTensorLocationSettings": TensorLocationSettings(),
        "weightTensorLocationSettings": TensorLocationSettings(),
        "aliasZeroCopy": False, "batchSerializationSettings": BatchSerializationSettings(),
        "cachePath": "session_cache", "compileEngine": True, "convolutionOptions": {}, "lstmOptions": {},
        "matmulOptions": {}, "gclOptions": {}, "createImplicitPipeliningFwdOnlyProgram": False,
        "customCodeletCompileFlags": "", "customCodelets": [], "decomposeGradSum": False, "delayVarUpdates": True,
        "disableGradAccumulationTensorStreams": True, "disableOptimizerStateTensorStreams": True,
        "dotChecks": set(), "dotOpNames": False, "enableConstantFoldingOfMultipleConsumers": True,
        "enableDistributedReplicatedGraphs": False, "enableEfficientOverlapIOTopoCons": False,
        "enableEngineCaching": False, "enableExplicitMainLoops": False, "enableFloatingPointChecks": False,
        "enableFullyConnectedPass": True, "enableLoadAndOffloadRNGState": False, "enableMergeExchange": True,
        "enableNonStableSoftmax": False, "enableOutlining": True, "enableOutliningCopyCostPruning": True,
        "enableStableNorm": False, "enableSupportedDataTypeCasting": True, "enableVariablesCaching": True,
        "ensureFp32LossScaleTensor": False, "executionPhaseSettings": ExecutionPhaseSettings(),
        "explicitRecomputation": False, "exportPoplarComputationGraph": False, "exportPoplarVertexGraph": False,
        "finalDotOp": 10000, "firstDotOp": 0, "globalReplicaOffset": 0, "globalReplicationFactor": 1,
        "groupHostSync": False, "kahnTieBreaker": "greedy", "logDir": "", "mergeVarUpdate": MergeVarUpdateType.Off,
        "mergeVarUpdateMemThreshold": 1000000,
        "numIOTiles": 0, "opxAliasChecking": False, "opxModifyChecking": False, "outlineSequenceBreakCost": 10000.0,
        "outlineThreshold": 1.0, "partialsTypeMatMuls": "", "rearrangeAnchorsOnHost": True,
        "rearrangeStreamsOnHost": False, "separateCallOpPdfs": True, "serializedPoprithmsAnnealGraphsDir": "",
        "serializedPoprithmsShiftGraphsDir": "", "stashAllTensorsInferencePipeline": False, "strictOpVersions": True,
        "subgraphCopyingStrategy": SubgraphCopyingStrategy.OnEnterAndExit, "swapLimitScheduler": -1,
        "throwIfLog2ScaleTensorNotInRange": True, "timeLimitScheduler": 1e9, "updatableNamedBuffers": [],
        "useHostCopyOps": False, "useLoopCandidateCreator": False, "virtualGraphSplitRatios": [],
        "automaticLossScalingSettings": AutomaticLossScalingSettings(), "autodiffSettings": AutodiffSettings(),
        "tensorLocationSettingsOverride": {}, "replicatedCollectivesSettings": ReplicatedCollectivesSettings(),
        "developerSettings": _Settings(), "experimentalSettings": _Settings(),
    }


# the fields the session reads: they change what the simulator builds, runs or reports. Setting
# any other field away from its default warns once (warn_unsupported)
ACTED_ON = {"enableReplicatedGraphs", "replicatedGraphCount", "virtualGraphMode", "enablePipelining",
            "enableGradientAccumulation", "accumulationFactor", "engineOptions",
            "instrumentWithHardwareCycleCounter", "accumulationAndReplicationReductionType", "syntheticDataMode",
            "enableDistributedReplicatedGraphs", "globalReplicationFactor", "globalReplicaOffset",
            "enableEngineCaching", "cachePath", "executionPhaseSettings", "autoRecomputation"}
# fields whose effect on hardware is more than speed or placement: the warning says what happens here
_NOT_SIMULATED = {
    "enableStochasticRounding": "float16 results are rounded to nearest, as without stochastic rounding",
    "constantWeights": "weights are always variables here, so results are the same either way",
}
_warned: set = set()


class SessionOptions:
    """PopART's session options: every field with its default; unknown names are refused."""

    def __init__(self):
        object.__setattr__(self, "_values", _defaults())
        object.__setattr__(self, "_defaults_", _defaults())

    def __getattr__(self, name):
        values = object.__getattribute__(self, "_values")
        if name in values:
            return values[name]
        raise AttributeError(f"'popart.SessionOptions' object has no attribute {name!r}")

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"'popart.SessionOptions' object has no attribute {name!r} (a PopART session option "
                                 f"of that name does not exist)")
        self._values[name] = value

    def _changed(self):
        """The fields set to something other than their default."""
        out = {}
        for k, v in self._values.items():
            d = self._defaults_[k]
            try:
                same = v == d
            except Exception:  # pragma: no cover - odd user objects
                same = v is d
            if not (same is True or (hasattr(same, "all") and same.all())):
                out[k] = v
        return out

    def warn_unsupported(self) -> None:
        """Warn once per field about settings that change nothing in the simulation."""
        for k in self._changed():
            if k not in ACTED_ON and k not in _warned:
                _warned.add(k)
                why = _NOT_SIMULATED.get(k, "it changes performance or memory placement on hardware, not results")
                warnings.warn(f"SessionOptions.{k} is recorded but has no effect in the simulator ({why})",
                              stacklevel=3)

    def __repr__(self) -> str:
        return f"SessionOptions({', '.join(f'{k}={v!r}' for k, v in self._changed().items())})"


class Patterns:
    """PopART's graph rewrite patterns: recorded; the simulator's popxl lowering needs none of them."""

    def __init__(self, arg=PatternsLevel.Default):
        self.level = arg if isinstance(arg, PatternsLevel) else PatternsLevel.Default
        self.names = list(arg) if isinstance(arg, (list, tuple)) else []
        self.runtimeAsserts = True
        self.inplaceEnabled = True
        self.updateInplacePrioritiesForIpuEnabled = True

    @property
    def InPlace(self) -> bool:  # noqa: N802
        return self.inplaceEnabled

    @InPlace.setter
    def InPlace(self, v: bool) -> None:  # noqa: N802
        self.inplaceEnabled = bool(v)

    def enablePattern(self, name: str, enabled: bool = True):  # noqa: N802
        if enabled and name not in self.names:
            self.names.append(name)
        elif not enabled and name in self.names:
            self.names.remove(name)
        return self

    def isPatternEnabled(self, name: str) -> bool:  # noqa: N802
        return name in self.names or self.level in (PatternsLevel.Default, PatternsLevel.All)

    def enableInPlace(self, v: bool):  # noqa: N802
        self.inplaceEnabled = bool(v)
        return self

    def isInPlaceEnabled(self) -> bool:  # noqa: N802
        return self.inplaceEnabled

    def enableRuntimeAsserts(self, v: bool):  # noqa: N802
        self.runtimeAsserts = bool(v)
        return self


def check_option(condition: bool, message: str) -> None:
    if not condition:
        raise popart_exception(message)
