"""PoplarExecutor: the object poptorch.trainingModel / inferenceModel return.

The first call (or compile()) captures the model at its micro-batch size (_capture.py), builds the
popxl program (_program.py) and compiles it with popxl.Session for a simulated IPU; each call then
moves one run's inputs ([deviceIterations x gradientAccumulation x replicas x micro-batch] along
the batch axis) and returns the outputs the output mode asks for.

Weights live on the device. As in PopTorch, the wrapped model's parameters and buffers follow:
after a training run the host copy is marked stale and is read back the first time the model,
a parameter or a buffer is touched (the model's class and its parameters' classes are swapped
for subclasses that check, as PopTorch does: _weight_sync.py); copyWeightsToHost / copyWeightsToDevice move them
explicitly. An inference model of a model that another PopTorch model trains re-uploads the
weights when they changed.
"""
from __future__ import annotations

import collections
import os
import pickle
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch
from torch.utils import _pytree as pytree

import ipu
import popxl
from popart.options import ReductionType as PopartReduction
from popart.options import SyntheticDataMode

from . import _capture, _optimizer_convert, _program, enums, optim
from ._logging import logger
from ._translate import host_array
from ._weight_sync import raw_params, raw_state, unwrap, unwrapped, wrap_for_weight_sync
from .errors import Error, RecoverableError, createPoptorchError
from .options import Options, PipelinedExecution, ShardedExecution

NO_EXECUTABLE_ERR = "Model has not been compiled or has been destroyed."
UPDATED_VAR_PREFIX = "UpdatedVar___"  # PopART's name for a variable after its update (reservedUpdatedVarPrefix)
_FILE_MAGIC = b"IPU-SIM POPTORCH EXPORT 1\n"
# poptorch.registerPreCompileHook / registerPostCompileHook: called, without arguments, around every compile
# (OrderedDicts: torch's RemovableHandle keeps a weak reference to its dictionary)
_PRECOMPILE_HOOKS: Dict[int, Any] = collections.OrderedDict()
_POSTCOMPILE_HOOKS: Dict[int, Any] = collections.OrderedDict()


def register_compile_hook(hooks: Dict[int, Any], hook, when: str):
    if not callable(hook):
        raise RuntimeError(f"{when}-compile hook must be callable")
    handle = torch.utils.hooks.RemovableHandle(hooks)
    hooks[handle.id] = hook
    return handle


class _Inputs:
    """The flattened arguments of a call: tensors and the structure around them."""

    def __init__(self, args, kwargs):
        flat, self.spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
        self.flat = flat
        self.tensors = [x for x in flat if isinstance(x, torch.Tensor)]

    def signature(self):
        return (self.spec, tuple((tuple(t.shape), t.dtype) for t in self.tensors),
                tuple(None if isinstance(x, torch.Tensor) else repr(x) for x in self.flat))

    def unflatten(self, tensors):
        it = iter(tensors)
        leaves = [next(it) if isinstance(x, torch.Tensor) else x for x in self.flat]
        return pytree.tree_unflatten(leaves, self.spec)


class PoplarExecutor:
    """The wrapper around a model compiled for the (simulated) IPU."""

    def __init__(self, model: torch.nn.Module, options: Optional[Options], training: bool,
                 poptorch_version: str = "", optimizer=None, user_model: Optional[torch.nn.Module] = None):
        if options is not None:
            if not isinstance(options, Options):
                raise createPoptorchError(f"Invalid type: 'options' is of type {type(options)} (Expected "
                                          f"poptorch.Options)")
            options._freeze()
            options = options.clone()
        else:
            options = Options()
        self._user_model = user_model or model
        self._model = model
        self._training = training
        self._poptorch_version = poptorch_version
        if training:
            if options.defaultOutputMode():
                options.outputMode(enums.OutputMode.Final)
            if optimizer is None:
                optimizer = optim.SGD(self._user_model.parameters(), lr=0.01)
        else:
            if options.defaultOutputMode():
                options.outputMode(enums.OutputMode.All)
            if options.Training.gradient_accumulation != 1:
                msg = ("You must set poptorch.Options().Training.gradientAccumulation to 1 or leave it as its default "
                       "value (1) when running a poptorch.inferenceModel().")
                if _pipelines(options._execution_strategy):
                    msg += (" Use poptorch.Options().deviceIterations() to process a sufficient number of batches "
                            "each run for pipelined execution instead.")
                raise createPoptorchError(msg)
            if optimizer is not None:
                raise createPoptorchError("Optimizer should be None for inference")
        self._options = options
        self._optimizer = optimizer
        self._session: Optional[popxl.Session] = None
        self._program = None
        self._captured = None
        self._inputs_signature = None
        self._executable_inputs = None
        self._outputs = None
        self._is_attached = False
        self._dirty_host_weights = False
        self._host_weights_version = 0
        self._compiled_optimizer = None
        self._trained = []
        self._last_cycles = 0
        self._last_run = (0.0, 0.0)
        self._anchor_memory: Dict[str, torch.Tensor] = {}
        self._cached_rng_state = [options.random_seed] if options.exists("random_seed") else None
        self.per_replica_params: Dict[str, tuple] = {}
        self._options._freeze()
        if training:
            wrap_for_weight_sync(self)
            self._attach_optimizer(optimizer)

    # -- properties --------------------------------------------------------------------------------------------------
    @property
    def model(self) -> torch.nn.Module:
        return self._user_model

    @property
    def options(self) -> Options:
        return self._options

    @property
    def training(self) -> bool:
        return self._training

    def __getattr__(self, attr):
        if attr.startswith("__") or attr in ("_user_model", "_model"):
            raise AttributeError(attr)
        return getattr(self._user_model, attr)

    def __repr__(self):
        return repr(self._user_model)

    def isCompiled(self) -> bool:  # noqa: N802
        return self._session is not None

    def isAttachedToDevice(self) -> bool:  # noqa: N802
        return self.isCompiled() and self._is_attached

    def eval(self):
        """PopTorch models run in the mode they were wrapped with; eval() changes the CPU model."""
        self._user_model.eval()
        return self

    def train(self, mode: bool = True):
        self._user_model.train(mode)
        return self

    # -- compilation --------------------------------------------------------------------------------------------------
    def compile(self, *args, **kwargs) -> None:
        """Capture and compile the model for these inputs (as a call would) without running it."""
        inputs = _Inputs(args, kwargs)
        if self.isCompiled():
            logger.warning("Call to compile() ignored: the executable is already compiled")
            return
        self._compile(inputs)

    def _narrow(self, t: torch.Tensor, index: int) -> torch.Tensor:
        o = self._options
        groups = max(self._input_groups()) + 1
        n = o.device_iterations * groups * o.Training.gradient_accumulation
        b = 1 if t.dim() == 0 else t.shape[0]
        if b % n:
            replicas = f"Options.replicationFactor({o.replication_factor})"
            if o.input_group_size > 1:
                replicas = f"({replicas} / Options.inputReplicaGrouping.input_group_size({o.input_group_size}))"
            raise createPoptorchError(
                f"Invalid batch dimension: In the input {tuple(t.shape)}, the batch dimension ({b}) must be a multiple "
                f"of Options.deviceIterations({o.device_iterations}) * {replicas} * "
                f"Options.Training.gradientAccumulation({o.Training.gradient_accumulation}) "
                f"= {n} because it is used to calculate the batch size which will be executed on the device in any "
                f"given iteration. For a full explanation see the batching semantics page of the documentation.")
        if t.dim() == 0:
            return t
        return t.narrow(0, 0, b // n)

    def _input_groups(self) -> List[int]:
        """The input group (slice of each input's batch) each local replica reads."""
        o = self._options
        rf, size = o.replication_factor, o.input_group_size
        if rf % size:
            raise createPoptorchError(f"inputReplicaGrouping: input_group_size ({size}) must divide "
                                      f"replicationFactor ({rf})")
        if o.input_group_type == enums.CommGroupType.Orthogonal:
            return [r % (rf // size) for r in range(rf)]  # every (rf / size)-th replica reads the same slice
        return [r // size for r in range(rf)]  # Consecutive: replicas [k*size, (k+1)*size) read slice k

    def _compile(self, inputs: _Inputs) -> None:
        for hook in list(_PRECOMPILE_HOOKS.values()):
            hook()
        t0 = time.perf_counter()
        o = self._options
        if o.connection_type == enums.ConnectionType.Never:
            logger.info("connectionType(Never): compiling without attaching")
        for i, t in enumerate(inputs.tensors):
            if t.requires_grad:
                logger.warning("Input tensor has requires_grad=True set. This tensor will be detached because "
                               "backward pass via inputs is not supported.")
        micro = [self._narrow(t.detach(), i) for i, t in enumerate(inputs.tensors)]
        args, kwargs = inputs.unflatten(micro)
        with unwrapped(self):
            self._sync_host_for_capture()
            captured = _capture.capture(self._model, args, kwargs, self._training, o._execution_strategy,
                                        namescopes=o._module_namescope_enabled)
            state = {**dict(self._model.named_parameters(remove_duplicate=False)),
                     **dict(self._model.named_buffers(remove_duplicate=False))}
        self._captured = captured
        self._updatable_buffers()  # a name that is not a buffer fails here, before the build
        self._annotate(captured)
        loss = _capture.final_loss(captured) if self._training else None
        anchor_values: Dict[str, _capture.Value] = {}
        self._output_names = []
        for v in captured.outputs:
            if isinstance(v, _capture.Value) and not v.is_const:
                name = next((n for n, a in anchor_values.items() if a is v), None)
                if name is None:
                    name = f"out:{len(anchor_values)}"
                    anchor_values[name] = v
                self._output_names.append(name)
            else:
                self._output_names.append(None)
        keep = list(anchor_values.values()) + list(captured.state_updates.values()) + ([loss] if loss else [])
        _capture.prune(captured, keep)
        self._check_strategy(captured)
        settings = self._settings(captured, state)
        popart_opt, clip = None, None
        if self._training:
            named = dict(self._model.named_parameters())
            popart_opt, trained, clip = _optimizer_convert.convert(self._optimizer, named)
            trained = set(trained)
            captured.trainable = [n for n in captured.trainable if n in trained]
            self._compiled_optimizer = popart_opt
        reduction = (PopartReduction.Mean if o.Training.accumulation_and_replication_reduction_type ==
                     enums.ReductionType.Mean else PopartReduction.Sum)
        distributed = o.Distributed.numProcesses > 1
        global_rf = o.replication_factor * o.Distributed.numProcesses
        if distributed:
            import popdist
            if not popdist.isPopdistEnvSet():
                raise createPoptorchError("Options.Distributed has several processes but this process was not started "
                                          "by poprun (the PopDist environment is not set); use popdist.poptorch.Options "
                                          "under poprun")
            if o.input_group_size > 1:
                raise createPoptorchError("inputReplicaGrouping with several poprun instances is not supported by "
                                          "the simulator yet: group the replicas of one instance only")
            if popdist.getNumLocalReplicas() != o.replication_factor or popdist.getNumTotalReplicas() != global_rf:
                raise createPoptorchError(
                    f"replicationFactor({o.replication_factor}) x {o.Distributed.numProcesses} processes differs from "
                    f"poprun's {popdist.getNumLocalReplicas()} local / {popdist.getNumTotalReplicas()} total replicas; "
                    f"use popdist.poptorch.Options(), which sets them from poprun")
        mode = enums.OutputMode(o.output_mode)
        art = _program.anchor_type(mode, o.output_return_period)
        if mode == enums.OutputMode.EveryN and o.device_iterations % o.output_return_period:
            raise createPoptorchError(f"outputMode EveryN: the period {o.output_return_period} must divide "
                                      f"deviceIterations ({o.device_iterations})")
        synthetic = {0: SyntheticDataMode.Off, 1: SyntheticDataMode.Zeros, 2: SyntheticDataMode.RandomNormal,
                     3: SyntheticDataMode.RandomUniform}[int(o._Popart.options.get("syntheticDataMode", 0))]
        anchors = {n: art for n in anchor_values}
        anchors.update(self._tensor_anchors(captured, mode))
        spec = _program.TorchProgramSpec(
            model=None, io=None, anchors=anchors, bps=o.device_iterations,
            af=o.Training.gradient_accumulation, rf=o.replication_factor, training=self._training,
            optimizer=popart_opt, placement=captured.num_ipus > 1, reduction=reduction, synthetic=synthetic,
            distributed=distributed, global_rf=global_rf, clip_norm=clip, captured=captured, loss=loss,
            anchor_values=anchor_values, settings=settings,
            recomputation=_program.recomputation(o._Popart.options, _pipelines(o._execution_strategy),
                                                 captured.num_ipus))
        try:
            program = _program.build(spec)
        except (ValueError, TypeError, NotImplementedError) as e:
            raise Error(f"Building the program failed: {e}") from e
        ir = program.ir
        engine_options = dict(o._Popart.options.get("engineOptions", {}))
        ir._pb_ir.getSessionOptions().engineOptions = engine_options
        ir._pb_ir.getSessionOptions().instrumentWithHardwareCycleCounter = bool(
            o._Popart.options.get("instrumentWithHardwareCycleCounter", False))
        # popxl's executable cache: enableExecutableCaching(path); unset, POPTORCH_CACHE_DIR as in
        # PopTorch; enableExecutableCaching(None) turns both off
        enabled = o._Popart.options.get("enableEngineCaching")
        cache = o._Popart.options.get("cachePath") if enabled else None
        if enabled is None:
            cache = os.environ.get("POPTORCH_CACHE_DIR") or None
        if cache:
            ir._pb_ir.getSessionOptions().enableEngineCaching = True
            ir._pb_ir.getSessionOptions().cachePath = str(cache)
        self._check_ipu_count(captured)
        capture_seconds = time.perf_counter() - t0
        try:
            session = popxl.Session(ir, "ipu_model", weights_to_host_on_exit=False)
        except ipu.OutOfMemoryError as e:
            raise Error(f"Out of memory: {e}", type="poplar_out_of_memory") from e
        session.frontend = "poptorch"
        session.device_desc = "poptorch " + ("training" if self._training else "inference") + \
            f" ({session.target.name})"
        self._session, self._program = session, program
        self._inputs_signature = inputs.signature()
        self._executable_inputs = inputs
        self.capture_seconds = capture_seconds
        self.compile_seconds = session.compile_seconds
        if self._cached_rng_state is not None:
            self._write_seed(self._cached_rng_state[0])
        if o.connection_type != enums.ConnectionType.Never:
            self.attachToDevice()
        logger.info("Compiled in %.2f s (capture and translation %.2f s, simulated compile %.2f s)",
                    time.perf_counter() - t0, capture_seconds, session.compile_seconds)
        for hook in list(_POSTCOMPILE_HOOKS.values()):
            hook()

    def _tensor_anchors(self, c, mode):
        """Options.anchorTensor: the gradients of trained parameters ("Gradient___<name>", PopART's
        name for a gradient) are returned per micro-batch as outputs are; "UpdatedVar___<name>" (the
        parameter after the optimizer's update) is read from the device after each run. A name may
        carry the "model." prefix that PopTorch's tracing frontend gave parameters."""
        out = {}
        self._anchor_names, self._updated_var_anchors = {}, {}
        grad_prefix, updated_prefix = _program.GRAD_PREFIX, UPDATED_VAR_PREFIX
        for short, (long_name, use_default, amode, period) in self._options.anchored_tensors.items():
            prefix = next((p for p in (grad_prefix, updated_prefix) if long_name.startswith(p)), None)
            base = long_name[len(prefix):] if prefix else None
            if base is not None and base not in c.trainable and base.startswith("model.") and \
                    base[len("model."):] in c.trainable:
                base = base[len("model."):]
            if not self._training or base not in c.trainable:
                valid = [p + n for p in (grad_prefix, updated_prefix) for n in c.trainable] if self._training else []
                raise createPoptorchError(
                    f"anchorTensor({short!r}, {long_name!r}): the simulator can anchor the gradients and updated "
                    f"values of the trained parameters of a training model ({', '.join(valid) or 'none here'})")
            if prefix == updated_prefix:
                self._updated_var_anchors[short] = base
                continue
            amode = mode if use_default or amode is None else enums.OutputMode(amode)
            out[grad_prefix + base] = _program.anchor_type(amode, period if amode == enums.OutputMode.EveryN else
                                                           self._options.output_return_period)
            self._anchor_names[short] = grad_prefix + base
        return out

    def _sync_host_for_capture(self):
        if self._dirty_host_weights:
            self.copyWeightsToHost()

    def _annotate(self, c) -> None:
        """Attach what annotation ops ask for to the op that made their input."""
        for n in c.nodes:
            name = n.op_name
            if not name.startswith("poptorch::set_"):
                continue
            src = n.args[0]
            producer = src.node if isinstance(src, _capture.Value) else None
            if producer is None:
                continue
            if name == "poptorch::set_available_memory.default":
                producer.attrs["available_memory_proportion"] = float(n.args[1])
            elif name == "poptorch::set_matmul_serialization.default":
                producer.attrs["serialization"] = (n.args[1], int(n.args[2]), bool(n.args[3]))

    def _settings(self, c, state) -> Dict[str, Any]:
        o = self._options
        weights = {}
        for name in list(c.params) + list(c.buffers):
            weights[name] = host_array(state[name].detach(), f"parameter or buffer {name!r}")
        amp = dict(o.available_memory_proportion)
        return {"weights": weights, "available_memory": amp,
                "partials_half": o._Popart.options.get("partialsTypeMatMuls") == "half"}

    def _check_strategy(self, c) -> None:
        o = self._options
        stages = sorted({n.stage for n in c.nodes})
        if len(stages) <= 1 or not _pipelines(o._execution_strategy):
            return
        # pipeline stages must run in increasing order
        last = -1
        for n in c.nodes:
            if n.stage < last:
                raise createPoptorchError(
                    f"Pipeline stage {n.stage} ({n.op_name} {n.where()}) runs after stage {last}: stages must be in "
                    f"increasing order in a PipelinedExecution (with AutoStage.SameAsIpu a block back on an earlier "
                    f"IPU reuses that IPU's stage; use poptorch.PipelinedExecution(poptorch.AutoStage.AutoIncrement))")
            last = max(last, n.stage)
        n_stages = len(stages)
        if self._training:
            needed = 2 * n_stages - 1
            if o.Training.gradient_accumulation < needed:
                raise createPoptorchError(
                    f"poptorch.Options().Training.gradientAccumulation must be greater than or equal to the number of "
                    f"pipeline stages ({needed}) when using poptorch.PipelinedExecution. Please note that a model with "
                    f"{n_stages} pipeline stages in PopTorch will have an additional {n_stages - 1} stages when "
                    f"training.")
        elif o.device_iterations < n_stages:
            raise createPoptorchError(
                f"poptorch.Options().deviceIterations must be greater than or equal to the number of pipeline stages "
                f"({n_stages}) when using poptorch.PipelinedExecution.")

    def _check_ipu_count(self, c) -> None:
        o = self._options
        n = o.replication_factor * c.num_ipus
        if n & (n - 1) and not o.auto_round_num_ipus:
            raise createPoptorchError(
                f"The model needs {n} IPUs ({o.replication_factor} replica(s) x {c.num_ipus} IPU(s) per replica), "
                f"which is not a power of 2: IPUs are acquired in powers of 2. Use "
                f"poptorch.Options().autoRoundNumIPUs(True) to reserve {1 << (n - 1).bit_length()} IPUs")

    # -- running --------------------------------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        if self._options.connection_type == enums.ConnectionType.Never:
            raise createPoptorchError("Trying to run a model on an offline device (ConnectionType.Never): use "
                                      "model.compile(inputs) instead of model(inputs)")
        inputs = _Inputs(args, kwargs)
        if not self.isCompiled():
            self._compile(inputs)
        elif inputs.signature() != self._inputs_signature:
            raise createPoptorchError(
                "The inputs differ from the ones the model was compiled with: "
                f"{_describe(self._executable_inputs)} then {_describe(inputs)}. Their shapes, types and "
                f"structure must not change (destroy() the model and call it again to recompile)")
        if not self._is_attached:
            self.attachToDevice()
        if not self._training:
            self._follow_trainer()
        self._write_optimizer_if_needed()
        outputs = self._run(inputs)
        if self._training:
            self._dirty_host_weights = True
        return outputs

    def _follow_trainer(self) -> None:
        """The weights of a model another PopTorch model trains (the whole model or a part of it,
        as in `inferenceModel(net)` after `trainingModel(NetWithLoss(net))`)."""
        trainer_ref = self._user_model.__dict__.get("_poptorch_trainer")
        if trainer_ref is None:
            for _, p in raw_params(self._user_model):
                trainer_ref = p.__dict__.get("_poptorch_trainer")
                break
        trainer = trainer_ref() if trainer_ref is not None else None
        if trainer is None or trainer is self:
            return
        trainer.copyWeightsToHostIfNeeded()
        if trainer._host_weights_version != self._host_weights_version:
            logger.debug("Implicit copyWeightsToDevice()")
            self.copyWeightsToDevice()
            self._host_weights_version = trainer._host_weights_version

    def _run(self, inputs: _Inputs):
        o, prog, s = self._options, self._program, self._session
        bps, af, rf = o.device_iterations, o.Training.gradient_accumulation, o.replication_factor
        groups = self._input_groups()
        h2d = {}
        captured = self._captured
        for v, t in zip(captured.inputs, inputs.tensors):
            stream = prog.in_streams.get(v.name)
            if stream is None:
                continue
            arr = host_array(t.detach(), f"input {v.name}")
            shape = tuple(v.shape)
            per_group = np.moveaxis(arr.reshape((bps, af, -1) + shape), 2, 0)  # [input group, bps, af, ...]
            if len(groups) > per_group.shape[0]:  # replicas of a group read the same slice (inputReplicaGrouping)
                per_group = per_group[groups]
            eng = np.ascontiguousarray(per_group.reshape((rf, bps * af) + shape))
            h2d[stream] = eng if rf > 1 else eng[0]
        staging, d2h = {}, {}
        for name, stream in prog.anchor_streams.items():
            buf = np.zeros((rf, prog.counts[name]) + tuple(stream.shape), stream.dtype.as_numpy())
            staging[name] = buf
            d2h[stream] = buf if rf > 1 else buf[0]
        t0 = time.perf_counter()
        try:
            self._last_cycles = s.run_streams(h2d, d2h)
        except ipu.IpuError as e:
            raise RecoverableError(str(e), type="poplar_application_runtime_error") from e
        self._last_run = (t0, time.perf_counter())
        if o._Popart.options.get("instrumentWithHardwareCycleCounter"):
            logger.debug("Cycle count: %d", self._last_cycles)
        results = {name: _from_engine(buf) for name, buf in staging.items()}
        for short, long_name in getattr(self, "_anchor_names", {}).items():
            self._anchor_memory[short] = results[long_name]
        for short, name in getattr(self, "_updated_var_anchors", {}).items():
            self._anchor_memory[short] = torch.from_numpy(np.array(self._read(self._program.weights[name])))
        flat = []
        for name, v in zip(self._output_names, captured.outputs):
            if name is not None:
                flat.append(results[name])
            elif isinstance(v, _capture.Value):  # a constant output: every micro-batch gives the same
                flat.append(_repeat_const(v.const, self._returned_count()))
            else:
                flat.append(v)
        out = pytree.tree_unflatten(flat, captured.output_spec)
        _no_backward(out)
        return out

    def _returned_count(self) -> int:
        o = self._options
        mode = enums.OutputMode(o.output_mode)
        n = o.replication_factor
        if mode == enums.OutputMode.All:
            n *= o.device_iterations * o.Training.gradient_accumulation
        elif mode == enums.OutputMode.EveryN:
            n *= o.device_iterations // o.output_return_period * o.Training.gradient_accumulation
        return n

    # -- weights ------------------------------------------------------------------------------------------------------
    def _state_names(self) -> List[str]:
        return list(self._captured.params) + list(self._captured.buffers)

    def _read(self, var) -> np.ndarray:
        """A variable's value: from the device while attached (this process's replicas only: under
        PopDist no other instance takes part), else the last value read or written."""
        if self._is_attached:
            return self._session.read_variable_local(var)
        return self._session.get_tensor_data(var)

    def _write(self, var, value) -> None:
        self._session.write_variable_local(var, value)

    def _refresh_host_copies(self) -> None:
        """Before detaching: the session's host copies of the state that lives across runs
        (weights, optimizer state, seed) take the device's values, so attaching again restores it."""
        p = self._program
        variables = list(p.weights.values()) + (p.opt_state.variables() if p.opt_state is not None else []) + \
            ([p.seed] if p.seed is not None else [])
        for v in variables:
            self._session.write_variable_local(v, self._session.read_variable_local(v))

    def copyWeightsToHostIfNeeded(self) -> bool:  # noqa: N802
        if self._dirty_host_weights:
            logger.debug("Implicit copyWeightsToHost()")
            self.copyWeightsToHost()
            return True
        return False

    def copyWeightsToHost(self) -> None:  # noqa: N802
        """Update the model's parameters and buffers with the device's values."""
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        self._dirty_host_weights = False
        state = raw_state(self._model)
        for name in self._state_names():
            arr = self._read(self._program.weights[name])
            dst = state[name]
            with torch.no_grad():
                torch.Tensor.copy_(dst, torch.from_numpy(np.ascontiguousarray(arr)).to(dst.dtype).reshape(dst.shape))
        self._host_weights_version += 1

    def copyWeightsToDevice(self) -> None:  # noqa: N802
        """Write the model's parameters and buffers to the device."""
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        self._dirty_host_weights = False
        state = raw_state(self._model)
        for name in self._state_names():
            self._write(self._program.weights[name], host_array(torch.Tensor.detach(state[name]), name))

    def copyNamedBuffersToDevice(self) -> None:  # noqa: N802
        """Write the buffers named by Options.updatableNamedBuffers from the host model to the device."""
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        names = self._updatable_buffers()
        if not names:
            logger.warning("copyNamedBuffersToDevice() copies nothing: no buffer is updatable (list them with "
                           "poptorch.Options().updatableNamedBuffers([...]) before compiling)")
        state = raw_state(self._model)
        for name in names:
            self._write(self._program.weights[name], host_array(torch.Tensor.detach(state[name]), name))

    def _updatable_buffers(self) -> List[str]:
        """Options.updatableNamedBuffers, each checked against the captured model's buffers."""
        names = list(getattr(self._options, "updatable_named_buffers", []))
        unknown = [n for n in names if n not in self._captured.buffers]
        if unknown:
            known = ", ".join(self._captured.buffers) or "none"
            raise createPoptorchError(f"updatableNamedBuffers names {unknown}, which are not buffers of the model "
                                      f"(its buffers: {known})")
        return names

    def load_state_dict(self, state_dict, strict: bool = True):
        out = self._user_model.load_state_dict(state_dict, strict)
        if self.isAttachedToDevice():
            self.copyWeightsToDevice()
        return out

    # -- optimizer ------------------------------------------------------------------------------------------------------
    def _attach_optimizer(self, optimizer) -> None:
        if isinstance(optimizer, optim.Optimizer):
            optimizer.bind_executor(self)

    def setOptimizer(self, optimizer) -> None:  # noqa: N802
        """Use `optimizer` from the next run: its variable hyper-parameters are written to the
        device; constant ones (and the optimizer type) must be the ones compiled in."""
        if not self._training:
            raise createPoptorchError("setOptimizer is for training models")
        if self._optimizer is not None and optimizer is not self._optimizer and \
                isinstance(self._optimizer, optim.Optimizer):
            if self.isCompiled():
                self._read_optimizer_state()
            self._optimizer.bind_executor(None)
        self._optimizer = optimizer
        self._attach_optimizer(optimizer)
        self._optimizer_dirty = True
        if self.isAttachedToDevice():
            self._write_optimizer_if_needed()

    def _write_optimizer_if_needed(self) -> None:
        if not self._training or not getattr(self, "_optimizer_dirty", False) or not self.isCompiled():
            return
        named = dict(raw_params(self._model))
        new, trained, clip = _optimizer_convert.convert(self._optimizer, named)
        old = self._compiled_optimizer
        if new.structure() != old.structure():
            raise createPoptorchError(
                "setOptimizer: the new optimizer differs from the compiled one in its type, its modes or a constant "
                "attribute. Only variable attributes (the learning rate, and those given explicitly to a "
                "poptorch.optim optimizer; see optimizer.variable_attrs) can change without recompiling: "
                "destroy() the model and call it again to recompile with the new optimizer")
        opt_state = self._program.opt_state
        for var, value in opt_state.host_values(new).items():
            self._write(var, value)
        opt_state.optimizer = new
        self._compiled_optimizer = new
        self._optimizer_dirty = False
        if isinstance(self._optimizer, optim.Optimizer) and self._optimizer.ipu_state_is_dirty:
            self._write_optimizer_state(self._optimizer._state_dict)

    def _read_optimizer_state(self) -> None:
        if not isinstance(self._optimizer, optim.Optimizer) or not self.isCompiled():
            return
        st = self._program.opt_state
        ipu_state = {f"{slot}:{w}": torch.from_numpy(np.array(self._read(var)))
                     for (w, slot), var in st.state.items()}
        self._optimizer.set_ipu_state(ipu_state, {n: float(self._compiled_optimizer.value(n).val())
                                                  for n in self._compiled_optimizer.PARAMS})

    def _write_optimizer_state(self, state) -> None:
        st = self._program.opt_state
        saved = state.get("ipu_state") or {}
        for (w, slot), var in st.state.items():
            key = f"{slot}:{w}"
            if key in saved:
                self._write(var, np.asarray(saved[key]).astype(var.dtype.as_numpy()))
        self._optimizer.ipu_state_is_dirty = False

    # -- device --------------------------------------------------------------------------------------------------------
    def attachToDevice(self) -> None:  # noqa: N802
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        if self._options.connection_type == enums.ConnectionType.Never:
            raise createPoptorchError("Trying to attach to an offline device (ConnectionType.Never)")
        if self._is_attached:
            raise createPoptorchError("Device is already attached")
        self._session.__enter__()
        self._is_attached = True
        self.copyWeightsToDevice()
        if self._training:
            self._optimizer_dirty = True
            self._write_optimizer_if_needed()
        if self._cached_rng_state is not None:
            self._write_seed(self._cached_rng_state[0])

    def detachFromDevice(self) -> None:  # noqa: N802
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        if not self._is_attached:
            raise createPoptorchError("Device is not attached")
        if self._training:
            self.copyWeightsToHostIfNeeded()
            self._read_optimizer_state()
        self._cached_rng_state = self.rng_state
        self._refresh_host_copies()
        self._session.__exit__(None, None, None)
        self._is_attached = False

    def destroy(self) -> None:
        """Release the device and the executable; the model keeps the trained weights."""
        if not self.isCompiled():
            return
        if self._training:
            self.copyWeightsToHostIfNeeded()
            self._read_optimizer_state()
        if self._is_attached:
            self._session.__exit__(None, None, None)
            self._is_attached = False
        self._session = None
        self._program = None
        if self._training:
            unwrap(self)

    # -- random numbers -------------------------------------------------------------------------------------------------
    def _write_seed(self, seed: int) -> None:
        var = self._program.seed if self._program is not None else None
        if var is not None and self._session is not None:
            v = int(seed)
            self._write(var, np.array([v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF], np.uint32))

    @property
    def rng_state(self) -> List[int]:
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        var = self._program.seed
        if var is None:
            return list(self._cached_rng_state or [0])
        lo, hi = (int(x) for x in self._read(var))
        return [lo | (hi << 32)]

    @rng_state.setter
    def rng_state(self, state: List[int]):
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        self._cached_rng_state = list(state)
        self._write_seed(state[0])

    # -- reports --------------------------------------------------------------------------------------------------------
    def cycleCount(self) -> int:  # noqa: N802
        """Cycles of the last run (needs Options.logCycleCount(True), as in PopTorch)."""
        if not self._options._Popart.options.get("instrumentWithHardwareCycleCounter"):
            raise createPoptorchError("Cycle count logging is disabled. Please set option logCycleCount to True to "
                                      "enable.")
        if not self.isCompiled():
            raise createPoptorchError("Please run the model at least once before obtaining cycle count.")
        return int(self._last_cycles)

    def getPerfCounters(self):  # noqa: N802
        """Host timestamps of the last run (one per output mode transfer; the simulator moves every
        input at the start of a run and every output at its end)."""
        if not self.isCompiled() or self._last_run == (0.0, 0.0):
            return {"input": [[]], "input_complete": [[]], "output": [[]], "output_complete": [[]]}
        t0, t1 = self._last_run
        n = self._options.device_iterations
        ins = [[t0] * n for _ in self._captured.inputs] or [[]]
        outs = [[t1] * n for _ in self._program.anchor_streams] or [[]]
        return {"input": ins, "input_complete": ins, "output": outs, "output_complete": outs}

    def getHostIpuLatency(self):  # noqa: N802
        return (0.0, 0.0, 0.0)

    def getComputeLatency(self):  # noqa: N802
        d = self._last_run[1] - self._last_run[0]
        return (d, d, d)

    def getIpuHostLatency(self):  # noqa: N802
        return (0.0, 0.0, 0.0)

    def getLatency(self):  # noqa: N802
        return self.getComputeLatency()

    def getTensorNames(self) -> List[str]:  # noqa: N802
        if not self.isCompiled():
            raise createPoptorchError("Model must be compiled before calling getTensorNames")
        names = {t.name for g in self._program.ir._graphs.values() for t in g.tensors} \
            if hasattr(self._program.ir, "_graphs") else set()
        names.update(self._program.weights)  # parameters and buffers by their names in the model
        if self._training:  # the names anchorTensor accepts
            names.update(p + n for p in (_program.GRAD_PREFIX, UPDATED_VAR_PREFIX) for n in self._captured.trainable)
        return sorted(names)

    def getAnchoredTensor(self, short_name: str) -> torch.Tensor:  # noqa: N802
        if short_name not in self._anchor_memory:
            raise createPoptorchError(f"No tensor with name {short_name} found.")
        return self._anchor_memory[short_name]

    # -- saving and loading -----------------------------------------------------------------------------------------------
    def compileAndExport(self, filename: str, *args, export_model: bool = True, **kwargs) -> None:  # noqa: N802
        """Compile, then save to `filename` what poptorch.load() needs to recreate the model (the
        simulator recompiles from it: there is no Poplar executable to store)."""
        self.compile(*args, **kwargs)
        self.save(filename, export_model)

    def save(self, filename: str, export_model: bool = True, save_rng_state: bool = True) -> None:
        if not self.isCompiled():
            raise createPoptorchError(NO_EXECUTABLE_ERR)
        d = os.path.dirname(filename)
        if d:
            os.makedirs(d, exist_ok=True)
        if os.path.isdir(filename):
            filename = os.path.join(filename, "model.poptorch")
        if self._training:
            self.copyWeightsToHostIfNeeded()
        ex = self._executable_inputs
        data = {"version": self._poptorch_version, "training": self._training,
                "example": ex.unflatten([_TensorSpec(t) for t in ex.tensors]),
                "options": self._options, "rng_state": self.rng_state if save_rng_state else None}
        with unwrapped(self):
            if export_model:
                data["model"] = self._user_model
                data["optimizer"] = self._optimizer if self._training else None
            blob = pickle.dumps(data, protocol=4)
        with open(filename, "wb") as f:
            f.write(_FILE_MAGIC)
            f.write(blob)

    def loadExecutable(self, filename: str) -> None:  # noqa: N802
        """Compile for the inputs recorded in a file written by compileAndExport / save."""
        data = read_export(filename)
        inputs = _example_inputs(data)
        if self.isCompiled():
            self.destroy()
        self._compile(inputs)
        if data.get("rng_state"):
            self.rng_state = data["rng_state"]


# -- helpers --------------------------------------------------------------------------------------------------------

def _pipelines(strategy) -> bool:
    """A PipelinedExecution proper (ShardedExecution derives from it and runs its stages one by one)."""
    return isinstance(strategy, PipelinedExecution) and not isinstance(strategy, ShardedExecution)


def _describe(inputs: _Inputs) -> str:
    return "[" + ", ".join(f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}" for t in inputs.tensors) + "]"


def _from_engine(buf: np.ndarray) -> torch.Tensor:
    """(replicas, transfers, *shape) -> PopTorch's layout: the returned micro-batches (in run
    order, replicas fastest) concatenated along the batch axis; scalars stacked (or one scalar)."""
    rf, count = buf.shape[:2]
    shape = buf.shape[2:]
    full = np.moveaxis(buf, 0, 1).reshape((count * rf,) + tuple(shape))
    n = count * rf
    if not shape:
        arr = full.reshape(()) if n == 1 else full
    else:
        arr = full.reshape((n * shape[0],) + tuple(shape[1:]))
    return torch.from_numpy(np.array(arr, order="C"))


def _repeat_const(t: torch.Tensor, n: int) -> torch.Tensor:
    t = t.detach()
    if t.dim() == 0:
        return t.clone() if n == 1 else t.reshape(1).repeat(n)
    return t.repeat((n,) + (1,) * (t.dim() - 1))


def _no_backward(out) -> None:
    def error_on_backward(*a, **k):
        raise createPoptorchError("backward() cannot be called explicitly on outputs of a PopTorch model. If you're "
                                  "using a trainingModel, the backwards pass is performed automatically when invoking "
                                  "the model. If you're using an inferenceModel, you should use a trainingModel "
                                  "instead.")
    for t in pytree.tree_leaves(out):
        if isinstance(t, torch.Tensor):
            t.backward = error_on_backward


def read_export(filename: str) -> dict:
    with open(filename, "rb") as f:
        head = f.read(len(_FILE_MAGIC))
        if head != _FILE_MAGIC:
            raise createPoptorchError(f"Invalid file {filename}: not written by poptorch compileAndExport / save on "
                                      f"the simulator")
        data = pickle.loads(f.read())
    opts = data.get("options")
    if opts is not None:
        # as PopTorch's load does: a model compiled for an offline IPU (useOfflineIpuTarget) runs when loaded
        opts._unfreeze()
        opts.deleteIfExists("ipu_version")
        if opts.connection_type == enums.ConnectionType.Never.value:
            opts.connectionType(enums.ConnectionType.Always)
    return data


class _TensorSpec:
    """An input tensor's shape and type, saved in place of its data."""

    def __init__(self, t: torch.Tensor):
        self.shape, self.dtype = tuple(t.shape), t.dtype


def _example_inputs(data: dict) -> _Inputs:
    args, kwargs = pytree.tree_map(lambda x: torch.zeros(x.shape, dtype=x.dtype) if isinstance(x, _TensorSpec) else x,
                                   data["example"])
    return _Inputs(args, kwargs)
