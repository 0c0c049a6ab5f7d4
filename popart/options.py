"""SessionOptions and the enums scripts set on them; Patterns.

SessionOptions keeps every field PopART has with its default. The fields the simulator acts on
are listed in `ACTED_ON`; a field set to a non-default value that changes nothing here (memory
placement, outlining, scheduling heuristics, ...) is named in a warning, once per field, when a
session is created. A name PopART does not have is an error at once, as PopART's pybind object
raises AttributeError for it.
"""
from __future__ import annotations

import enum
import warnings
from typing import Any, Dict

from .errors import popart_exception


class VirtualGraphMode(enum.Enum):
    Off = 0
    Manual = 1
    Auto = 2
    ExecutionPhases = 3


class RecomputationType(enum.Enum):
    NoRecompute = 0
    Standard = 1
    NormOnly = 2
    RecomputeAll = 3
    Pipeline = 4


class RecomputeType(enum.Enum):
    Undefined = 0
    Checkpoint = 1
    Recompute = 2
    Recomputed = 3


class ReductionType(enum.Enum):
    Sum = 0
    Mean = 1
    NoReduction = 2


class MeanReductionStrategy(enum.Enum):
    Running = 0
    Post = 1


class MergeVarUpdateType(enum.Enum):
    Off = 0
    All = 1
    AutoTight = 2
    AutoLoose = 3


class SyntheticDataMode(enum.Enum):
    Off = 0
    Zeros = 1
    RandomNormal = 2
    RandomUniform = 3


class Instrumentation(enum.Enum):
    Outer = 0
    Inner = 1


class SubgraphCopyingStrategy(enum.Enum):
    OnEnterAndExit = 0
    JustInTime = 1


class InitType(enum.Enum):
    NoInit = 1
    Zero = 0


class PatternsLevel(enum.Enum):
    NoPatterns = 0
    Minimal = 1
    Default = 2
    All = 3


class VariableRetrievalMode(enum.Enum):
    OnePerGroup = 0
    AllReduceReplicas = 1
    AllReplicas = 2


class CommGroupType(enum.Enum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    Ungrouped = 3


class CommGroup:
    def __init__(self, type: CommGroupType = CommGroupType.All, replicaGroupSize: int = 0):  # noqa: A002,N803
        self.type, self.replicaGroupSize = type, replicaGroupSize


class VariableSettings:
    def __init__(self, *args):
        self.args = args

    def _is_default(self) -> bool:
        return not self.args or (isinstance(self.args[0], CommGroup) and self.args[0].type == CommGroupType.All)


class TensorLocationSettings:
    def __init__(self, location=None, minElementsForOffChip: int = 2, minElementsForReplicatedTensorSharding: int = 8192):  # noqa: N803
        self.location = location
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
        "accumulateOuterFragmentSettings": _Settings(schedule=0, excludedVirtualGraphs=[]),
        "accumulatorTensorLocationSettings": TensorLocationSettings(),
        "activationTensorLocationSettings": TensorLocationSettings(),
        "optimizerStateTensorLocationSettings": TensorLocationSettings(),
        "weightTensorLocationSettings": TensorLocationSettings(),
        "aliasZeroCopy": False, "batchSerializationSettings": _Settings(factor=0, method=0, batchSchedule=0),
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
        "ensureFp32LossScaleTensor": False, "executionPhaseSettings": _Settings(phases=0, stages=2),
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
        "automaticLossScalingSettings": _Settings(enabled=False), "autodiffSettings": _Settings(stitchStrategy=0),
        "tensorLocationSettingsOverride": {}, "replicatedCollectivesSettings": _Settings(),
        "developerSettings": _Settings(), "experimentalSettings": _Settings(),
    }


# the fields the session reads: they change what the simulator builds, runs or reports. Setting
# any other field away from its default warns once (warn_unsupported)
ACTED_ON = {"enableReplicatedGraphs", "replicatedGraphCount", "virtualGraphMode", "enablePipelining",
            "enableGradientAccumulation", "accumulationFactor", "engineOptions",
            "instrumentWithHardwareCycleCounter", "accumulationAndReplicationReductionType", "syntheticDataMode",
            "enableDistributedReplicatedGraphs", "globalReplicationFactor", "globalReplicaOffset"}
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
