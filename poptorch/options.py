"""poptorch.Options and the option groups (Training, Precision, Distributed, TensorLocations,
Jit, _Popart), the execution strategies (Pipelined / Sharded / Serial and Parallel Phased) with
their Stage and Phase, as PopTorch 3.x spells them.

Which options change what the simulator does is listed in docs/poptorch.md; the others are kept
(and appear in toDict()) so that scripts written for hardware run unchanged.
"""
from __future__ import annotations

import copy
import os
from typing import Any, Dict, List, Optional, Union

import torch

from . import _options_config, enums
from ._logging import logger
from ._options_impl import IStageManager, OptionsDict
from .errors import Error


class ConfigFileError(Exception):
    """A line of an options file (Options.loadFromFile) that cannot be applied."""


class _JitOptions(OptionsDict):
    """Options.Jit: `traceModel(bool)`. PopTorch 3.x captures models with PyTorch's dispatcher;
    here too (docs/poptorch.md), whatever the value."""

    def __init__(self) -> None:
        super().__init__(trace_model=False)

    def traceModel(self, trace_model: bool) -> "_JitOptions":  # noqa: N802
        self.set(trace_model=bool(trace_model))
        return self


class _PrecisionOptions(OptionsDict):
    """Options.Precision: half / float casting, running statistics, partials type."""

    def __init__(self, popart_options: "_PopartOptions") -> None:
        self._popart_options = popart_options
        super().__init__(half_float_casting=enums.HalfFloatCastingBehavior.Default,
                         running_statistics_always_float=True)

    def halfFloatCasting(self, half_float_casting: enums.HalfFloatCastingBehavior) -> "_PrecisionOptions":  # noqa: N802
        if not isinstance(half_float_casting, enums.HalfFloatCastingBehavior):
            raise ValueError("halfFloatCasting must be set to poptorch.HalfFloatCastingBehavior.FloatDowncastToHalf "
                             "or poptorch.HalfFloatCastingBehavior.HalfUpcastToFloat or poptorch.Default")
        self.set(half_float_casting=half_float_casting)
        return self

    def runningStatisticsAlwaysFloat(self, value: bool) -> "_PrecisionOptions":  # noqa: N802
        if not isinstance(value, bool):
            raise ValueError("runningStatisticsAlwaysFloat needs to be set to a bool")
        self.set(running_statistics_always_float=value)
        return self

    def enableFloatingPointExceptions(self, enabled: bool) -> "_PrecisionOptions":  # noqa: N802
        if not isinstance(enabled, bool):
            raise ValueError("enableFloatingPointExceptions needs to be set to a bool")
        self._popart_options.set("enableFloatingPointChecks", enabled)
        return self

    def enableStochasticRounding(self, enabled: bool) -> "_PrecisionOptions":  # noqa: N802
        self._popart_options.set("enableStochasticRounding", bool(enabled))
        return self

    def setPartialsType(self, dtype: torch.dtype) -> "_PrecisionOptions":  # noqa: N802
        if dtype in (torch.float, torch.float32):
            name = "float"
        elif dtype in (torch.half, torch.float16):
            name = "half"
        else:
            raise ValueError("parameter to setPartialsType should be either torch.float or torch.half")
        self._popart_options.set("partialsTypeMatMuls", name)
        self._popart_options.set("convolutionOptions", {"partialsType": name})
        return self


class _TrainingOptions(OptionsDict):
    """Options.Training: gradient accumulation and how accumulated / replicated gradients reduce."""

    def __init__(self, popart_options: "_PopartOptions") -> None:
        self._popart_options = popart_options
        super().__init__(gradient_accumulation=1,
                         accumulation_and_replication_reduction_type=enums.ReductionType.Mean,
                         meanAccumulationAndReplicationReductionStrategy=enums.MeanReductionStrategy.Post)

    def gradientAccumulation(self, gradient_accumulation: int) -> "_TrainingOptions":  # noqa: N802
        if not isinstance(gradient_accumulation, int) or gradient_accumulation < 1:
            raise ValueError(f"gradientAccumulation must be a positive integer, not {gradient_accumulation!r}")
        self.set(gradient_accumulation=gradient_accumulation)
        return self

    def accumulationAndReplicationReductionType(self, reduction_type: enums.ReductionType) -> "_TrainingOptions":  # noqa: N802
        if not isinstance(reduction_type, enums.ReductionType) or reduction_type == enums.ReductionType.NoReduction:
            raise ValueError("accumulationAndReplicationReductionType must be set to poptorch.ReductionType.Mean or "
                             "poptorch.ReductionType.Sum")
        self.set(accumulation_and_replication_reduction_type=reduction_type)
        return self

    def setMeanAccumulationAndReplicationReductionStrategy(  # noqa: N802
            self, mean_reduction_strategy: enums.MeanReductionStrategy) -> "_TrainingOptions":
        if not isinstance(mean_reduction_strategy, enums.MeanReductionStrategy):
            raise ValueError("mean_reduction_strategy must be a poptorch.MeanReductionStrategy")
        self.set(meanAccumulationAndReplicationReductionStrategy=mean_reduction_strategy)
        return self

    def setAutomaticLossScaling(self, enabled: bool) -> "_TrainingOptions":  # noqa: N802
        self._popart_options.set("automaticLossScalingSettings.enabled", bool(enabled))
        return self

    def setConvolutionDithering(self, enabled: bool) -> "_TrainingOptions":  # noqa: N802
        self._popart_options.set("convolutionOptions", {"enableConvDithering": bool(enabled)})
        return self


class _PopartOptions:
    """Options._Popart: PopART session options by name (advanced users)."""

    def __init__(self) -> None:
        self._is_frozen = False
        self.options: Dict[str, Any] = {}
        self.set("instrumentWithHardwareCycleCounter", False)
        self.set("rearrangeAnchorsOnHost", False)

    def checkIsFrozen(self, option=None) -> None:  # noqa: N802
        if self._is_frozen:
            raise AttributeError("Can't modify frozen Options")

    def _freeze(self) -> None:
        self._is_frozen = True

    def set(self, key: str, value) -> "_PopartOptions":
        self.checkIsFrozen()
        self.options[key] = value
        return self

    def setEngineOptions(self, engine_options: Dict[str, str]) -> "_PopartOptions":  # noqa: N802
        return self.set("engineOptions", dict(engine_options))

    def setPatterns(self, patterns: Dict[str, bool], level: int = 2) -> "_PopartOptions":  # noqa: N802
        if not isinstance(patterns, dict) or not isinstance(level, int):
            raise ValueError("setPatterns takes a dict of pattern names to bools and an int level")
        self.set("patterns_level", level)
        return self.set("patterns", dict(patterns))

    def __deepcopy__(self, memo):
        new = _PopartOptions()
        new.options = copy.deepcopy(self.options, memo)
        return new

    def __repr__(self) -> str:
        return f"_PopartOptions({', '.join(f'{k}={v!r}' for k, v in self.options.items())})"


class _DistributedOptions(OptionsDict):
    """Options.Distributed: this process's index and the number of processes (set by
    popdist.poptorch.Options under poprun; read from Open MPI's variables by default)."""

    def __init__(self) -> None:
        super().__init__(num_distributed_processes=1, distributed_process_id=0, ipuof_configs={})
        self.setEnvVarNames("OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_RANK")

    def disable(self) -> "_DistributedOptions":
        self.set(num_distributed_processes=1, distributed_process_id=0)
        return self

    def setEnvVarNames(self, var_num_processes: str, var_process_id: str) -> "_DistributedOptions":  # noqa: N802
        return self.configureProcessId(int(os.environ.get(var_process_id, "0")),
                                       int(os.environ.get(var_num_processes, "1")))

    def configureProcessId(self, process_id: int, num_processes: int) -> "_DistributedOptions":  # noqa: N802
        if not 0 <= int(process_id) < max(int(num_processes), 1):
            raise ValueError(f"process_id {process_id} must be in [0, num_processes={num_processes})")
        self.set(distributed_process_id=int(process_id), num_distributed_processes=int(num_processes))
        return self

    @property
    def processId(self) -> int:  # noqa: N802
        return self.distributed_process_id

    @property
    def numProcesses(self) -> int:  # noqa: N802
        return self.num_distributed_processes


class TensorLocationSettings(OptionsDict):
    """Where a class of tensors lives (on chip or in streaming memory, replica-sharded or not)."""

    def minElementsForOffChip(self, min_elements: int) -> "TensorLocationSettings":  # noqa: N802
        self.createOrSet(minElementsForOffChip=int(min_elements))
        return self

    def minElementsForReplicatedTensorSharding(self, min_elements: int) -> "TensorLocationSettings":  # noqa: N802
        self.createOrSet(minElementsForReplicatedTensorSharding=int(min_elements))
        return self

    def useOnChipStorage(self, use: Optional[bool] = True) -> "TensorLocationSettings":  # noqa: N802
        if use is None:
            self.deleteIfExists("onChip")
        else:
            self.createOrSet(onChip=int(bool(use)))
        return self

    def useReplicatedTensorSharding(self, use: bool = True) -> "TensorLocationSettings":  # noqa: N802
        self.createOrSet(useReplicatedTensorSharding=int(bool(use)))
        return self

    def useIOTilesToLoad(self, use: bool = True) -> "TensorLocationSettings":  # noqa: N802
        self.createOrSet(useIOTilesToLoad=int(bool(use)))
        return self

    def useIOTilesToStore(self, use: bool = True) -> "TensorLocationSettings":  # noqa: N802
        self.createOrSet(useIOTilesToStore=int(bool(use)))
        return self


class _TensorLocationOptions(OptionsDict):
    """Options.TensorLocations: settings for activations, weights, optimizer state, accumulators."""

    def numIOTiles(self, num_tiles: int) -> "_TensorLocationOptions":  # noqa: N802
        if not isinstance(num_tiles, int) or not 32 <= num_tiles <= 192 or num_tiles % 2:
            raise ValueError("numIOTiles must be an even number between 32 and 192.")
        self.createOrSet(numIOTiles=num_tiles)
        return self

    def _location(self, key: str, location: TensorLocationSettings) -> "_TensorLocationOptions":
        if not isinstance(location, TensorLocationSettings):
            raise ValueError(f"{key} takes a poptorch.TensorLocationSettings, not {type(location).__name__}")
        self.createOrSet(**{key: location.toDict()})
        return self

    def setActivationLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":  # noqa: N802
        return self._location("location_activation", location)

    def setWeightLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":  # noqa: N802
        return self._location("location_weight", location)

    def setOptimizerLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":  # noqa: N802
        return self._location("location_optimizer", location)

    def setAccumulatorLocation(self, location: TensorLocationSettings) -> "_TensorLocationOptions":  # noqa: N802
        return self._location("location_accumulator", location)


# -- execution strategies --------------------------------------------------------------------------------------

BlockId = str


class Stage:
    """One or more blocks run on one IPU (a pipeline stage, a shard, or part of a phase)."""

    def __init__(self, *block_ids: BlockId) -> None:
        if not all(isinstance(b, str) for b in block_ids):
            raise ValueError(f"Block IDs are supposed to be strings but got {block_ids}")
        self._blocks = block_ids
        self._stage_id = -1
        self._phase_id = -1
        self._ipu: Optional[int] = None

    @property
    def blocks(self) -> List[BlockId]:
        return list(self._blocks)

    def ipu(self, ipu: int) -> "Stage":
        if not isinstance(ipu, int):
            raise ValueError(f"Stage.ipu takes an int, not {ipu!r}")
        self._ipu = ipu
        return self

    def _setStage(self, stage: Optional[int]) -> "Stage":  # noqa: N802
        if stage is not None:
            self._stage_id = stage
        return self


class _DefaultStageManager(IStageManager):
    def __init__(self, auto_stage: enums.AutoStage) -> None:
        super().__init__()
        self._next_id = 1
        self._block_map: Dict[str, Stage] = {}
        self._auto_stage = auto_stage

    def getStage(self, block_id: BlockId) -> Stage:  # noqa: N802
        if block_id not in self._block_map:
            stage = Stage(block_id)
            if self._auto_stage == enums.AutoStage.SameAsIpu:
                if self._current_ipu is None:
                    raise Error(f"poptorch.AutoStage.SameAsIpu was selected but no IPU was specified for block "
                                f"{block_id}")
                stage_id = self._current_ipu
            else:
                stage_id = self._next_id
                self._next_id += 1
            stage._setStage(stage_id)
            self._block_map[block_id] = stage
        return self._block_map[block_id]


class _ExplicitStageManager(IStageManager):
    def __init__(self, block_map: Dict[str, Stage]) -> None:
        super().__init__()
        self._block_map = block_map

    def getStage(self, block_id: BlockId) -> Stage:  # noqa: N802
        if block_id not in self._block_map:
            raise Error(f"Unknown Block '{block_id}' list of expected Blocks: {list(self._block_map)}")
        return self._block_map[block_id]


class _IExecutionStrategy:
    kind = "pipelined"

    def __init__(self, stages_manager: IStageManager, block_map: Dict[str, Stage]) -> None:
        self._block_map = block_map
        self._stages_manager = stages_manager

    def stage(self, block_id: str) -> Stage:
        if block_id not in self._block_map:
            raise Error(f"Unknown block {block_id}")
        return self._block_map[block_id]

    def onStartTracing(self) -> None:  # noqa: N802
        from . import ops
        self._stages_manager.clearDebug()
        self._stages_manager.resetAutoId()
        ops.Block._stages_manager = self._stages_manager

    def onEndTracing(self) -> None:  # noqa: N802
        from . import ops
        self._stages_manager.printDebug()
        ops.Block._stages_manager = None

    def backendOptions(self) -> Dict[str, Any]:  # noqa: N802
        return {}


def _block_map_from(args) -> Dict[str, Stage]:
    block_map: Dict[str, Stage] = {}
    for stage_id, arg in enumerate(args):
        if isinstance(arg, Stage):
            stage = arg
        elif isinstance(arg, str):
            stage = Stage(arg)
        else:
            stage = Stage(*arg)
        stage._setStage(stage_id)
        for block in stage.blocks:
            if block in block_map:
                raise Error(f"{block} associated with more than one stage")
            block_map[block] = stage
    return block_map


class PipelinedExecution(_IExecutionStrategy):
    """Pipeline the stages over the IPUs (the default). Arguments: stages, block ids, lists of
    block ids, or one poptorch.AutoStage."""

    def __init__(self, *args) -> None:
        auto_stage = enums.AutoStage.SameAsIpu
        block_map: Dict[str, Stage] = {}
        if len(args) == 1 and isinstance(args[0], enums.AutoStage):
            auto_stage = args[0]
        else:
            block_map = _block_map_from(args)
        manager = _ExplicitStageManager(block_map) if block_map else _DefaultStageManager(auto_stage)
        super().__init__(manager, block_map)

    def backendOptions(self) -> Dict[str, Any]:  # noqa: N802
        return {"execution_mode": 0}


class ShardedExecution(PipelinedExecution):
    """Each stage on its IPU, one after the other (no pipelining)."""

    kind = "sharded"

    def backendOptions(self) -> Dict[str, Any]:  # noqa: N802
        return {"execution_mode": 1}


class Phase:
    """An execution phase: one or more stages that run at the same time."""

    def __init__(self, *arg: Union[BlockId, Stage]) -> None:
        if arg and all(isinstance(a, Stage) for a in arg):
            self.stages = list(arg)
        else:
            if not all(isinstance(a, str) for a in arg):
                raise ValueError("All arguments must either be block IDs (strings) or Stages: "
                                 f"{[type(a) for a in arg]}")
            self.stages = [Stage(*arg)]

    def stage(self, idx: int) -> Stage:
        return self.stages[idx]

    def ipus(self, *ipus: int) -> None:
        if len(ipus) != len(self.stages):
            raise ValueError(f"Phase contains {len(self.stages)} stages but you provided {len(ipus)} ipus")
        for stage, ipu in zip(self.stages, ipus):
            stage.ipu(ipu)


class _IPhasedExecution(_IExecutionStrategy):
    kind = "phased"

    def __init__(self, *phases) -> None:
        self._tensors_liveness = enums.Liveness.AlwaysLive
        self._separate_backward_phase = False
        self._phases: List[Phase] = []
        block_map: Dict[str, Stage] = {}
        if len(phases) == 1 and isinstance(phases[0], list) and phases[0] and \
                all(isinstance(p, (Phase, list)) for p in phases[0]):
            phases = tuple(phases[0])
        for phase_id, arg in enumerate(phases):
            phase = arg if isinstance(arg, Phase) else Phase(*(arg if isinstance(arg, (list, tuple)) else [arg]))
            self._phases.append(phase)
            for stage in phase.stages:
                stage._phase_id = phase_id
                stage._setStage(phase_id)
                for block in stage.blocks:
                    if block in block_map:
                        raise Error(f"{block} associated with more than one stage")
                    block_map[block] = stage
        if not phases:
            raise Error("There is currently no AutoStage for PhasedExecution, please explicitly specify the phases")
        super().__init__(_ExplicitStageManager(block_map), block_map)

    def phase(self, phase: int) -> Phase:
        if not isinstance(phase, int) or phase < 0:
            raise ValueError("Phases are identified by positive integers")
        return self._phases[phase]

    def useSeparateBackwardPhase(self, use: bool = True):  # noqa: N802
        self._separate_backward_phase = bool(use)
        return self

    def backendOptions(self) -> Dict[str, Any]:  # noqa: N802
        return {"execution_mode": 2, "separate_backward_phase": self._separate_backward_phase,
                "tensors_liveness": int(self._tensors_liveness)}


class ParallelPhasedExecution(_IPhasedExecution):
    """Phases alternate between two groups of IPUs."""

    def sendTensorsOffChipAfterFwd(self, off_chip: bool = True) -> "ParallelPhasedExecution":  # noqa: N802
        self._tensors_liveness = enums.Liveness.OffChipAfterFwd if off_chip else enums.Liveness.AlwaysLive
        return self

    def backendOptions(self) -> Dict[str, Any]:  # noqa: N802
        return {**super().backendOptions(), "serial_phases_execution": False}


class SerialPhasedExecution(_IPhasedExecution):
    """All phases run one after the other on one group of IPUs."""

    def setTensorsLiveness(self, liveness: enums.Liveness) -> "SerialPhasedExecution":  # noqa: N802
        if not isinstance(liveness, enums.Liveness):
            raise ValueError("setTensorsLiveness takes a poptorch.Liveness")
        self._tensors_liveness = liveness
        return self

    def backendOptions(self) -> Dict[str, Any]:  # noqa: N802
        return {**super().backendOptions(), "serial_phases_execution": True}


# -- the options --------------------------------------------------------------------------------------------------

class Options(OptionsDict):
    """Everything that controls how a model is compiled and run (see docs/poptorch.md)."""

    def __init__(self) -> None:
        self._jit = _JitOptions()
        self._popart = _PopartOptions()
        self._graphProcessing = _PrecisionOptions(self._popart)
        self._training = _TrainingOptions(self._popart)
        self._distributed = _DistributedOptions()
        self._tensor_locations = _TensorLocationOptions()
        self._execution_strategy: _IExecutionStrategy = PipelinedExecution()
        self._relax_optimizer_checks = False
        self._show_compilation_progress_bar = True
        self._module_namescope_enabled = True
        super().__init__(replication_factor=1, broadcast_buffers=True, device_iterations=1, log_dir=".",
                         auto_round_num_ipus=False, anchored_tensors={}, output_mode=enums.OutputMode.Default.value,
                         output_return_period=1, connection_type=enums.ConnectionType.Always.value,
                         sync_pattern=enums.SyncPattern.Full.value, available_memory_proportion={},
                         input_group_size=1, input_group_type=enums.CommGroupType.Consecutive.value)
        path = os.environ.get("POPTORCH_CACHE_DIR", "")
        if path:
            logger.info("POPTORCH_CACHE_DIR is set: setting cache path to %s", path)
            self.enableExecutableCaching(path)

    # option groups
    @property
    def TensorLocations(self) -> _TensorLocationOptions:  # noqa: N802
        return self._tensor_locations

    @property
    def Distributed(self) -> _DistributedOptions:  # noqa: N802
        return self._distributed

    @property
    def Jit(self) -> _JitOptions:  # noqa: N802
        return self._jit

    @property
    def Precision(self) -> _PrecisionOptions:  # noqa: N802
        return self._graphProcessing

    @property
    def Training(self) -> _TrainingOptions:  # noqa: N802
        return self._training

    @property
    def _Popart(self) -> _PopartOptions:  # noqa: N802
        return self._popart

    def _freeze(self) -> None:
        super()._freeze()
        self._popart._freeze()

    # general options
    def sourceLocationExcludes(self, excludes: List[str]) -> "Options":  # noqa: N802
        self._source_location_excludes = list(excludes)
        return self

    def appendToLocationExcludes(self, *excludes: str) -> "Options":  # noqa: N802
        self._source_location_excludes = list(getattr(self, "_source_location_excludes", [])) + list(excludes)
        return self

    def showCompilationProgressBar(self, show: bool = True) -> "Options":  # noqa: N802
        self._show_compilation_progress_bar = bool(show)
        return self

    def loadFromFile(self, filepath: str) -> "Options":  # noqa: N802
        """Apply an options file: one option a line as it would be called on the options object
        without the `options.` prefix, e.g. `deviceIterations(4)` or `Training.gradientAccumulation(2)`."""
        _options_config.parse_and_set_options(self, filepath, ConfigFileError)
        return self

    def relaxOptimizerAttributesChecks(self, relax: bool = True) -> "Options":  # noqa: N802
        self._relax_optimizer_checks = bool(relax)
        return self

    def autoRoundNumIPUs(self, auto_round_num_ipus: bool = True) -> "Options":  # noqa: N802
        self.set(auto_round_num_ipus=bool(auto_round_num_ipus))
        return self

    def deviceIterations(self, device_iterations: int) -> "Options":  # noqa: N802
        if not isinstance(device_iterations, int) or device_iterations < 1:
            raise ValueError(f"deviceIterations must be a positive integer, not {device_iterations!r}")
        self.set(device_iterations=device_iterations)
        return self

    def setExecutionStrategy(self, strategy: _IExecutionStrategy) -> "Options":  # noqa: N802
        if not isinstance(strategy, _IExecutionStrategy):
            raise ValueError("setExecutionStrategy takes a poptorch.PipelinedExecution, ShardedExecution, "
                             f"SerialPhasedExecution or ParallelPhasedExecution, not {type(strategy).__name__}")
        self._execution_strategy = strategy
        return self

    def setAvailableMemoryProportion(self, available_memory_proportion: Dict[str, float]) -> "Options":  # noqa: N802
        out = {}
        for key, mem in available_memory_proportion.items():
            if not (isinstance(key, str) and key.startswith("IPU") and key[3:].isdigit()):
                raise ValueError('Available memory proportions are expected to be in a dictionary of {"IPU0": 0.5} '
                                 f"where the 0 in IPU is the index of the IPU. Invalid key: {key}")
            if not 0.0 <= float(mem) <= 1.0:
                raise ValueError(f"Available memory proportion for {key} must be in [0, 1], not {mem}")
            out[int(key[3:])] = float(mem)
        self.createOrSet(available_memory_proportion=out)
        return self

    def replicationFactor(self, replication_factor: int) -> "Options":  # noqa: N802
        if not isinstance(replication_factor, int) or replication_factor < 1:
            raise ValueError(f"replicationFactor must be a positive integer, not {replication_factor!r}")
        self.set(replication_factor=replication_factor)
        return self

    def inputReplicaGrouping(self, input_group_size: int,  # noqa: N802
                             input_group_type: enums.CommGroupType = enums.CommGroupType.Consecutive) -> "Options":
        """Replicas in one group read the same input: the batch is split between replicationFactor /
        input_group_size groups. Consecutive groups are replicas [k*size, (k+1)*size); Orthogonal
        groups take every (replicationFactor / size)-th replica."""
        if not isinstance(input_group_size, int) or input_group_size < 1:
            raise ValueError(f"inputReplicaGrouping: input_group_size must be a positive integer, not "
                             f"{input_group_size!r}")
        if not isinstance(input_group_type, enums.CommGroupType) or input_group_type == enums.CommGroupType.All:
            raise ValueError(f"inputReplicaGrouping: input_group_type must be CommGroupType.Consecutive, "
                             f"Orthogonal or NoGrouping, not {input_group_type!r}")
        if input_group_type == enums.CommGroupType.NoGrouping and input_group_size != 1:
            raise ValueError("inputReplicaGrouping: CommGroupType.NoGrouping gives every replica its own input, so "
                             f"input_group_size must be 1, not {input_group_size}")
        self.set(input_group_size=input_group_size, input_group_type=input_group_type.value)
        return self

    def broadcastBuffers(self, broadcast_buffers: bool = True) -> "Options":  # noqa: N802
        self.set(broadcast_buffers=bool(broadcast_buffers))
        return self

    def updatableNamedBuffers(self, buffers: List[str]) -> "Options":  # noqa: N802
        """The model's buffers (by their names in named_buffers()) that copyNamedBuffersToDevice()
        writes to the device, without copying every weight as copyWeightsToDevice() does."""
        if isinstance(buffers, str) or not all(isinstance(b, str) for b in buffers):
            raise ValueError(f"updatableNamedBuffers takes a list of buffer names, not {buffers!r}")
        self.createOrSet(updatable_named_buffers=list(buffers))
        return self

    def logDir(self, log_dir: str) -> "Options":  # noqa: N802
        self.set(log_dir=log_dir)
        return self

    def modelName(self, name: str) -> "Options":  # noqa: N802
        self.createOrSet(model_name=name)
        return self

    def enableExecutableCaching(self, path: Optional[str]) -> "Options":  # noqa: N802
        if path is None:
            self._Popart.set("enableEngineCaching", False)
        else:
            self._Popart.set("cachePath", str(path))
            self._Popart.set("enableEngineCaching", True)
        return self

    def useIpuModel(self, use_model: bool) -> "Options":  # noqa: N802
        self.createOrSet(use_model=bool(use_model))
        return self

    def connectionType(self, connection_type: enums.ConnectionType) -> "Options":  # noqa: N802
        if not isinstance(connection_type, enums.ConnectionType):
            raise ValueError("connectionType takes a poptorch.ConnectionType")
        self.set(connection_type=connection_type.value)
        return self

    def syncPattern(self, sync_pattern: enums.SyncPattern) -> "Options":  # noqa: N802
        if not isinstance(sync_pattern, enums.SyncPattern):
            raise ValueError("syncPattern takes a poptorch.SyncPattern")
        self.set(sync_pattern=sync_pattern.value)
        return self

    def useIpuId(self, ipu_id: int) -> "Options":  # noqa: N802
        if not isinstance(ipu_id, int):
            raise ValueError("useIpuId takes an int device id")
        self.createOrSet(ipu_id=ipu_id)
        return self

    def useOfflineIpuTarget(self, ipu_version: int = 2) -> "Options":  # noqa: N802
        self.connectionType(enums.ConnectionType.Never)
        self.createOrSet(ipu_version=int(ipu_version))
        return self

    def anchorTensor(self, short_name: str, long_name: str, output_mode: Optional[enums.OutputMode] = None,  # noqa: N802
                     output_return_period: Optional[int] = 1) -> None:
        if output_mode != enums.OutputMode.EveryN:
            output_return_period = 1
        self.anchored_tensors[short_name] = [long_name, output_mode is None, output_mode, output_return_period]

    def outputMode(self, output_mode: enums.OutputMode, output_return_period: Optional[int] = None) -> "Options":  # noqa: N802
        if not isinstance(output_mode, enums.OutputMode):
            raise ValueError(f"outputMode takes a poptorch.OutputMode, not {output_mode!r}")
        if output_mode == enums.OutputMode.EveryN:
            if not (output_return_period and output_return_period > 0):
                raise ValueError("EveryN anchor must have output_return_period set to valid positive integer")
        elif output_return_period:
            logger.info("Anchor return period argument ignored with output_mode set to %s", output_mode)
        self.set(output_mode=output_mode.value, output_return_period=output_return_period or 1)
        return self

    def anchorMode(self, anchor_mode: enums.OutputMode, anchor_return_period: Optional[int] = None) -> "Options":  # noqa: N802
        """The spelling of outputMode before PopTorch 3.0."""
        logger.warning("poptorch.Options.anchorMode is deprecated: use poptorch.Options.outputMode")
        return self.outputMode(anchor_mode, anchor_return_period)

    def defaultOutputMode(self) -> bool:  # noqa: N802
        return self.output_mode == enums.OutputMode.Default

    defaultAnchorMode = defaultOutputMode

    def randomSeed(self, random_seed: int) -> "Options":  # noqa: N802
        if not isinstance(random_seed, int):
            raise ValueError("randomSeed takes an int")
        torch.manual_seed(random_seed)
        self.createOrSet(random_seed=random_seed)
        return self

    def enableStableNorm(self, enabled: bool) -> "Options":  # noqa: N802
        self._Popart.set("enableStableNorm", bool(enabled))
        return self

    def enableSyntheticData(self, enabled: bool) -> "Options":  # noqa: N802
        self._Popart.set("syntheticDataMode", 2 if enabled else 0)
        return self

    def logCycleCount(self, log_cycle_count: bool) -> "Options":  # noqa: N802
        self._Popart.set("instrumentWithHardwareCycleCounter", bool(log_cycle_count))
        return self

    def enableProfiling(self, profile_dir: Optional[str] = None) -> "Options":  # noqa: N802
        env = os.getenv("POPLAR_ENGINE_OPTIONS", default="")
        if any(k in env for k in ("debug.allowOutOfMemory", "autoReport.directory", "autoReport.all")):
            logger.warning("Profiling setting overriden by environment variable. Check content of "
                           "POPLAR_ENGINE_OPTIONS.")
        opts = dict(self._popart.options.get("engineOptions", {}))
        opts["debug.allowOutOfMemory"] = "true"
        opts["autoReport.directory"] = profile_dir or "."
        opts["autoReport.all"] = "true"
        self._popart.setEngineOptions(opts)
        return self

    def disableModuleNamescope(self) -> "Options":  # noqa: N802
        self._module_namescope_enabled = False
        return self

    def toDict(self) -> Dict[str, Any]:  # noqa: N802
        """Every option in one dictionary (what PopTorch passes to its backend)."""
        if self.defaultOutputMode():
            raise Error("An output mode must be picked before serialisation")
        out = self._execution_strategy.backendOptions()
        out.update(self._popart.options)
        out = self.update(out)
        out = self._training.update(out)
        out = self._distributed.update(out)
        out = self._tensor_locations.update(out)
        return out

    def clone(self) -> "Options":
        return copy.deepcopy(self)

    def __repr__(self) -> str:
        groups = ("TensorLocations", "Distributed", "Jit", "Precision", "Training", "_Popart")
        return (f"{type(self).__name__}(" + ", ".join(f"{k}={v!r}" for k, v in self._values.items()) + ", " +
                ", ".join(f"{g}={getattr(self, g)!r}" for g in groups) + ")")
