"""PopART's Python API on the simulated IPU: ONNX models (from `popart.Builder` or files) are
translated into the popxl IR and run by the same lowering, engine and profiler as PopXL."""
from . import builder
from .builder import (AiGraphcore, AiGraphcoreOpset1, AiOnnx, AiOnnx6, AiOnnx7, AiOnnx8, AiOnnx9, AiOnnx10, AiOnnx11,
                      AiOnnxMl, Builder)
from .dataflow import (AnchorReturnType, AnchorReturnTypeId, DataFlow, ExchangeStrategy, InputShapeInfo, PyStepIO,
                       PyStepIOCallback, PyWeightsIO)
from .devices import (DeviceConnectionType, DeviceInfo, DeviceManager, DeviceSelectionCriterion, DeviceType,
                      SyncPattern)
from .logging import getLogger
from .errors import (OutOfMemoryException, popart_exception, popart_internal_exception,
                     poplar_application_runtime_error, poplar_exception, poplar_runtime_error)
from .optimizers import (SGD, Adam, AdamMode, Adaptive, AdaptiveMode, ClipNormSettings, ConstSGD, Optimizer,
                         OptimizerValue, OptimizerValueMap, SGDAccumulatorAndMomentum, WeightDecayMode)
from .options import (CommGroup, CommGroupType, InitType, Instrumentation, MeanReductionStrategy, MergeVarUpdateType,
                      Patterns, PatternsLevel, RecomputationType, RecomputeType, ReductionType, SessionOptions,
                      ReplicatedTensorSharding, SubgraphCopyingStrategy, SyntheticDataMode, TensorLocation,
                      TensorLocationSettings, TensorStorage, TileSet, VariableRetrievalMode, VariableSettings,
                      VirtualGraphMode)
from ._settings import (AccumulateOuterFragmentSchedule, AccumulateOuterFragmentSettings, AutodiffSettings,
                        AutodiffStitchStrategy, AutomaticLossScalingSettings, BatchSerializationBatchSchedule,
                        BatchSerializationMethod, BatchSerializationSettings, BatchSerializationTransformContext,
                        ExecutionPhaseIOSchedule, ExecutionPhaseSchedule, ExecutionPhaseSettings,
                        GradientTensorTrackingMethod, IrSerializationFormat, ReplicatedCollectivesSettings)
from .session import InferenceSession, TrainingSession, reservedAccumPrefix, reservedGradientPrefix
from .tensorinfo import DataType, TensorInfo
