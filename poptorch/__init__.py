"""PopTorch on the simulated IPU: `poptorch.trainingModel` / `inferenceModel` wrap a PyTorch model,
capture it at the ATen level and run it through popxl's autodiff, lowering and engine (docs/poptorch.md).

PyTorch is an optional dependency of the project: `pip install -e ".[torch]"`.
"""
try:
    import torch
except ImportError as _e:  # pragma: no cover - exercised without torch installed
    raise ImportError(
        "poptorch needs PyTorch, an optional dependency of ipu-sim: install it with `pip install -e \".[torch]\"` "
        "from the project's root (this takes the CPU build of torch; see the README)") from _e

from . import enums, optim, profiling  # noqa: E402
from ._dataloader import AsynchronousDataAccessor, DataLoader  # noqa: E402
from ._logging import logger, setLogLevel  # noqa: E402
from .enums import (AnchorMode, AutoStage, CommGroupType, ConnectionType, DataLoaderMode,  # noqa: E402,F401
                    HalfFloatCastingBehavior, Liveness, MatMulSerializationMode, MeanReductionStrategy,
                    MultiConvPlanType, OutputMode, OverlapMode, ReductionType, SharingStrategy, SyncPattern,
                    VariableRetrievalMode)
from .errors import Error, RecoverableError, UnrecoverableError  # noqa: E402,F401
from .ops import (CPU, BeginBlock, Block, BlockFunction, MultiConv, NameScope, cond, custom_op,  # noqa: E402,F401
                  dynamic_slice, dynamic_update, for_loop, identity_loss, ipu_print_tensor, isRunningOnIpu, nop,
                  recomputationCheckpoint, removeBlocks, serializedMatMul, set_available_memory,
                  set_overlap_for_input, set_overlap_for_output)
from .options import (Options, ParallelPhasedExecution, Phase, PipelinedExecution,  # noqa: E402,F401
                      SerialPhasedExecution, ShardedExecution, Stage, TensorLocationSettings)

__version__ = "3.4.0+ipusim"


def __getattr__(name):
    # The executor (and with it popxl, popart and the simulator) loads when a model is wrapped:
    # `import poptorch` in a DataLoader's worker process costs only PyTorch's import.
    if name == "PoplarExecutor":
        from ._executor import PoplarExecutor
        return PoplarExecutor
    raise AttributeError(f"module 'poptorch' has no attribute {name!r}")


def trainingModel(model, options=None, optimizer=None):  # noqa: N802
    """Wrap `model` for training on the IPU: each call runs the forward pass, the backward pass and
    the optimizer (default poptorch.optim.SGD(lr=0.01)) on the device's copy of the weights."""
    from ._executor import PoplarExecutor
    if isinstance(model, PoplarExecutor):  # a wrapped model: the model under it, its weights kept in sync
        model = model.model
    return PoplarExecutor(model=model, options=options, training=True, poptorch_version=__version__,
                          optimizer=optimizer, user_model=model)


def inferenceModel(model, options=None):  # noqa: N802
    """Wrap `model` for inference on the IPU."""
    from ._executor import PoplarExecutor
    if isinstance(model, PoplarExecutor):  # as PopTorch: inferenceModel(training_model) shares its weights
        model = model.model
    return PoplarExecutor(model=model, options=options, training=False, poptorch_version=__version__)


def load(filename: str, edit_opts_fn=None):
    """Recreate a model saved by compileAndExport / save (with export_model=True): the model, its
    options and optimizer are restored and compiled for the recorded inputs."""
    from ._executor import read_export
    data = read_export(filename)
    if "model" not in data:
        raise Error(f"{filename} was saved with export_model=False: create the model with poptorch.inferenceModel / "
                    f"trainingModel and call loadExecutable({filename!r})")
    options = data["options"].clone()
    if edit_opts_fn is not None:
        edit_opts_fn(options)
    if data["training"]:
        m = trainingModel(data["model"], options, data.get("optimizer"))
    else:
        m = inferenceModel(data["model"], options)
    m.loadExecutable(filename)
    return m


def registerPreCompileHook(hook):  # noqa: N802
    """Call `hook()` before each model compiles; returns a handle whose remove() unregisters it."""
    from . import _executor
    return _executor.register_compile_hook(_executor._PRECOMPILE_HOOKS, hook, "Pre")


def registerPostCompileHook(hook):  # noqa: N802
    """Call `hook()` after each model has compiled; returns a handle whose remove() unregisters it."""
    from . import _executor
    return _executor.register_compile_hook(_executor._POSTCOMPILE_HOOKS, hook, "Post")


def ipuHardwareIsAvailable(num_ipus: int = 1) -> bool:  # noqa: N802
    """Always False: the IPUs here are simulated (models still run, on the simulator)."""
    return False


def ipuHardwareVersion() -> int:  # noqa: N802
    """The IPU version the simulator targets (2: Mk2 GC200; 1 with IPU_SIM_TARGET=GC2)."""
    import ipu
    t = ipu.get_target(None) if hasattr(ipu, "get_target") else None
    return 1 if t is not None and "GC2" == getattr(t, "name", "") else 2


__all__ = ["trainingModel", "inferenceModel", "load", "Options", "DataLoader", "AsynchronousDataAccessor",
           "PoplarExecutor", "Error", "RecoverableError", "UnrecoverableError", "optim", "enums", "logger",
           "setLogLevel"]
