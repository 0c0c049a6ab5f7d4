"""The nested settings structures of PopART's SessionOptions (sessionoptions.hpp) and their enums,
with PopART's fields, defaults and constructor order, so scripts build them as they do on
hardware (``opts.accumulateOuterFragmentSettings = popart.AccumulateOuterFragmentSettings(
popart.AccumulateOuterFragmentSchedule.OverlapMemoryOptimized, [0])``). The simulator records
them: they change scheduling and memory placement on hardware, not results."""
from __future__ import annotations

from typing import Any, Tuple

from ._enum import PybindEnum


class AccumulateOuterFragmentSchedule(PybindEnum):
    Scheduler = 0
    Serial = 1
    OverlapCycleOptimized = 2
    OverlapMemoryOptimized = 3


class BatchSerializationBatchSchedule(PybindEnum):
    Scheduler = 0
    Isomorphic = 1
    OverlapOnIo = 2
    OverlapOnCompute = 3


class BatchSerializationTransformContext(PybindEnum):
    Fwd = 0
    Bwd = 1


class BatchSerializationMethod(PybindEnum):
    UnrollDynamic = 0
    UnrollStatic = 1
    Loop = 2


class ExecutionPhaseIOSchedule(PybindEnum):
    Preload = 0
    OnDemand = 1


class ExecutionPhaseSchedule(PybindEnum):
    Interleaving = 0
    Batch = 1
    BatchClusteredIO = 2


class GradientTensorTrackingMethod(PybindEnum):
    AllNonViewChangingGradientTensors = 0
    ConvAndMatmulGradients = 1
    GradientsOfUserSpecifiedTensors = 2


class AutodiffStitchStrategy(PybindEnum):
    RecomputeMinimal = 0
    RecomputeAllNonInputs = 1
    AddFwdOutputs = 2
    SafeAddFwdOutputs = 3


class IrSerializationFormat(PybindEnum):
    JSON = 0


class _Struct:
    """A settings structure: ``_fields`` are (name, default) in the C++ constructor's order;
    construct with no arguments (the defaults), positionally or by name."""
    _fields: Tuple[Tuple[str, Any], ...] = ()

    def __init__(self, *args, **kwargs):
        names = [n for n, _ in self._fields]
        if len(args) > len(names):
            raise TypeError(f"{type(self).__name__} takes at most {len(names)} arguments ({', '.join(names)})")
        values = {n: list(d) if isinstance(d, list) else d for n, d in self._fields}
        values.update(zip(names, args))
        for name, value in kwargs.items():
            if name not in values:
                raise TypeError(f"{type(self).__name__} has no field {name!r} (fields: {', '.join(names)})")
            values[name] = value
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name, value):
        if name not in {n for n, _ in self._fields}:
            raise AttributeError(f"'popart.{type(self).__name__}' object has no attribute {name!r}")
        object.__setattr__(self, name, value)

    def __eq__(self, other):
        return type(other) is type(self) and vars(self) == vars(other)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{n}={getattr(self, n)!r}' for n, _ in self._fields)})"


class AccumulateOuterFragmentSettings(_Struct):
    _fields = (("schedule", AccumulateOuterFragmentSchedule.Serial), ("excludedVirtualGraphs", []))


class BatchSerializationSettings(_Struct):
    _fields = (("factor", 0), ("concatOnVirtualGraphChange", True), ("concatOnExecutionPhaseChange", True),
               ("concatOnPipelineStageChange", True), ("transformContext", BatchSerializationTransformContext.Fwd),
               ("method", BatchSerializationMethod.UnrollDynamic),
               ("batchSchedule", BatchSerializationBatchSchedule.Isomorphic))


class ExecutionPhaseSettings(_Struct):
    _fields = (("phases", 0), ("stages", 2), ("weightIOSchedule", ExecutionPhaseIOSchedule.Preload),
               ("activationIOSchedule", ExecutionPhaseIOSchedule.Preload),
               ("optimizerStateIOSchedule", ExecutionPhaseIOSchedule.OnDemand),
               ("accumulatorIOSchedule", ExecutionPhaseIOSchedule.Preload),
               ("schedule", ExecutionPhaseSchedule.Interleaving))


class AutomaticLossScalingSettings(_Struct):
    _fields = (("enabled", False), ("toTrackTensors", None), ("binEdgeLocation", 0.125),
               ("thresholdUpperCountProportion", 1e-7), ("updatePeriod", 1),
               ("gradientTensorTrackingMethod", GradientTensorTrackingMethod.AllNonViewChangingGradientTensors))


class ReplicatedCollectivesSettings(_Struct):
    _fields = (("prepareScheduleForMergingCollectives", False), ("mergeAllReduceCollectives", False))


class AutodiffSettings(_Struct):
    _fields = (("stitchStrategy", AutodiffStitchStrategy.RecomputeAllNonInputs),)
