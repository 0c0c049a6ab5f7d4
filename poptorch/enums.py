"""PopTorch's enumerations (values as in PopTorch 3.x, so options files and toDict() agree)."""
import enum


class MeanReductionStrategy(enum.IntEnum):
    """When the Mean reduction of gradients divides: `Running` keeps a running mean, `Post`
    divides once after accumulating (the default), `PostAndLoss` is deprecated."""
    Running = 0
    Post = 1
    PostAndLoss = 2


class DataLoaderMode(enum.IntEnum):
    """`Sync`: read batches in the calling process; `Async`: through an AsynchronousDataAccessor
    (a worker process fills a ring buffer); `AsyncRebatched`: the same, the combined batch built
    in the accessor from single samples."""
    Sync = 0
    Async = 1
    AsyncRebatched = 2


class SharingStrategy(enum.IntEnum):
    """How the AsynchronousDataAccessor's worker process is started and sees the data."""
    SharedMemory = 0
    FileSystem = 1
    Fork = 2
    ForkServer = 3


class OutputMode(enum.IntEnum):
    """Which micro-batches' outputs a run returns: `All`, `Sum` (of all), `Final` (the last),
    `EveryN` (the last of every N), `Default` (All for inference, Final for training)."""
    Final = 0
    EveryN = 1
    All = 2
    Sum = 3
    Default = 4


AnchorMode = OutputMode  # the spelling of PopTorch before 3.0


class ConnectionType(enum.IntEnum):
    """When the model attaches to its (simulated) IPUs."""
    Always = 0
    OnDemand = 1
    Never = 2


class HalfFloatCastingBehavior(enum.IntEnum):
    FloatDowncastToHalf = 0
    HalfUpcastToFloat = 1
    Default = 2


class ReductionType(enum.IntEnum):
    Sum = 0
    Mean = 1
    NoReduction = 2


class SyncPattern(enum.IntEnum):
    Full = 0
    SinglePipeline = 1
    ReplicaAndLadder = 2


class MatMulSerializationMode(enum.Enum):
    """Which dimension of a matrix product serializedMatMul splits."""
    InputChannels = "input_channels"
    ReducingDim = "reducing_dim"
    OutputChannels = "output_channels"
    Disabled = "none"


class Liveness(enum.IntEnum):
    AlwaysLive = 0
    OffChipAfterFwd = 1
    OffChipAfterFwdNoOverlap = 2
    OffChipAfterEachPhase = 3


class OverlapMode(enum.Enum):
    NoOverlap = "no_overlap"
    OverlapAccumulationLoop = "overlap_accumulation_loop"
    OverlapDeviceIterationLoop = "overlap_device_iteration_loop"


class AutoStage(enum.IntEnum):
    """How blocks without an explicit Stage get their stage: the IPU number (`SameAsIpu`), or
    one new stage per block in order (`AutoIncrement`)."""
    SameAsIpu = 0
    AutoIncrement = 1


class MultiConvPlanType(enum.IntEnum):
    Parallel = 0
    Serial = 1


class CommGroupType(enum.IntEnum):
    All = 0
    Consecutive = 1
    Orthogonal = 2
    NoGrouping = 3


class VariableRetrievalMode(enum.IntEnum):
    OnePerGroup = 0
    AllReplicas = 2
