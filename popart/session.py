"""InferenceSession and TrainingSession: build the popxl program of an ONNX model (_program.py),
compile and run it with `popxl.Session` on the device's simulated target.

A session's host side follows PopART: `prepareDevice()` compiles (and raises
OutOfMemoryException when the program does not fit), `weightsFromHost()` writes the weights,
`run(stepio)` moves one step's inputs and anchors, `weightsToHost()` / `readWeights()` /
`modelToHost()` bring the weights back. Everything on the device is the popxl Session's engine.
"""
from __future__ import annotations

import copy
import warnings
from typing import Dict, Optional

import numpy as np
import onnx
from onnx import numpy_helper

import ipu
import popxl

from . import _program
from ._auto_shard import auto_virtual_graphs, execution_phase_virtual_graphs
from ._model import ModelIO, load_model, prepare_model
from .dataflow import (AnchorReturnTypeId, DataFlow, InputShapeInfo, PyStepIO, PyStepIOCallback, PyWeightsIO,
                       anchor_leading_dims, input_leading_dims)
from .devices import DeviceInfo
from .errors import OutOfMemoryException, popart_exception
from .optimizers import Optimizer
from .options import SessionOptions, SyntheticDataMode, VirtualGraphMode
from .tensorinfo import TensorInfo, type_name

GRAD_PREFIX = _program.GRAD_PREFIX


def reservedGradientPrefix() -> str:  # noqa: N802 - PopART's name
    return GRAD_PREFIX


def reservedAccumPrefix() -> str:  # noqa: N802
    return "Accum___"


class _Session:
    _training = False

    def __init__(self, fnModel, dataFlow: DataFlow, deviceInfo: DeviceInfo, inputShapeInfo=None, patterns=None,  # noqa: N803
                 userOptions: Optional[SessionOptions] = None, name: str = "session", loss=None, optimizer=None):  # noqa: N803
        if not isinstance(dataFlow, DataFlow):
            raise popart_exception(f"dataFlow must be a popart.DataFlow, not {type(dataFlow).__name__}")
        if not isinstance(deviceInfo, DeviceInfo):
            raise popart_exception("deviceInfo must be a popart.DeviceInfo (from popart.DeviceManager()); got "
                                   f"{type(deviceInfo).__name__}")
        self.name = name
        self.dataFlow = dataFlow
        self.deviceInfo = deviceInfo
        self.options = userOptions if userOptions is not None else SessionOptions()
        self.options.warn_unsupported()
        self._model = prepare_model(load_model(fnModel))
        self._io = ModelIO(self._model, inputShapeInfo if isinstance(inputShapeInfo, InputShapeInfo) else None)
        self._loss = loss
        self._optimizer = optimizer
        o = self.options
        self._rf = int(o.replicatedGraphCount) if o.enableReplicatedGraphs else 1
        if self._rf < 1:
            raise popart_exception(f"replicatedGraphCount must be >= 1, not {self._rf}")
        self._distributed, self._global_rf = self._check_distributed()
        self._af = int(o.accumulationFactor) if o.enableGradientAccumulation else 1
        if o.enableGradientAccumulation and not self._training:
            raise popart_exception("enableGradientAccumulation is for TrainingSession; an InferenceSession has no "
                                   "gradients to accumulate")
        if not o.enableGradientAccumulation and int(o.accumulationFactor) > 1:
            raise popart_exception(f"accumulationFactor={o.accumulationFactor} needs enableGradientAccumulation = True")
        if self._af < 1:
            raise popart_exception(f"accumulationFactor must be >= 1, not {self._af}")
        self._placement = o.virtualGraphMode == VirtualGraphMode.Manual
        if o.virtualGraphMode == VirtualGraphMode.Auto:
            self._placement = auto_virtual_graphs(self._model, self._io, deviceInfo.numIpus // self._rf)
        elif o.virtualGraphMode == VirtualGraphMode.ExecutionPhases and int(o.executionPhaseSettings.phases) > 1:
            self._placement = execution_phase_virtual_graphs(self._model, o.executionPhaseSettings.stages)
        elif int(o.executionPhaseSettings.phases) > 1:
            raise popart_exception("> 1 execution phases requires VirtualGraphMode::ExecutionPhases")
        elif o.virtualGraphMode == VirtualGraphMode.ExecutionPhases:
            warnings.warn(f"Phased execution was enabled but only {o.executionPhaseSettings.phases} phases were "
                          f"defined. Phased execution only works with >=2 phases. Disabling.", stacklevel=3)
            self._placement = False
        self._check_pipelining()
        bps = dataFlow.batchesPerStep()
        spec = _program.ProgramSpec(self._model, self._io, {a: dataFlow.art(a) for a in dataFlow.anchors()}, bps,
                                    self._af, self._rf, training=self._training, loss=loss, optimizer=optimizer,
                                    placement=self._placement, reduction=o.accumulationAndReplicationReductionType,
                                    synthetic=o.syntheticDataMode, distributed=self._distributed,
                                    global_rf=self._global_rf, recomputation=o.autoRecomputation)
        self._program = _program.build(spec)
        ir = self._program.ir
        # engine options (autoReport.* switch the profiler on) travel on the Ir's session options,
        # where the profiler looks for them
        ir._pb_ir.getSessionOptions().engineOptions = dict(o.engineOptions)
        ir._pb_ir.getSessionOptions().instrumentWithHardwareCycleCounter = bool(o.instrumentWithHardwareCycleCounter)
        # engine caching (enableEngineCaching + cachePath, or POPART_CACHE_DIR): popxl's executable cache
        ir._pb_ir.getSessionOptions().enableEngineCaching = bool(o.enableEngineCaching)
        ir._pb_ir.getSessionOptions().cachePath = str(o.cachePath)
        self._session: Optional[popxl.Session] = None
        self._host_weights: Dict[str, np.ndarray] = {w: _as_retrieved(var, self._io.initializers[w])
                                                     for w, var in self._program.weights.items()}
        self._device_weights_newer = False
        self._last_cycles = 0

    def _check_distributed(self):
        """(distributed, global replication factor): replicas over several PopRun instances run as
        popxl's Ir(replication='popdist'), reaching the other instances' replicas over MPI."""
        o = self.options
        if not o.enableDistributedReplicatedGraphs:
            if int(o.globalReplicationFactor) not in (1, self._rf):
                raise popart_exception("globalReplicationFactor is set but enableDistributedReplicatedGraphs is not")
            return False, self._rf
        import popdist
        if not popdist.isPopdistEnvSet():
            raise popart_exception("enableDistributedReplicatedGraphs needs the program to be started by poprun "
                                   "(the PopDist environment is not set)")
        total, local = popdist.getNumTotalReplicas(), popdist.getNumLocalReplicas()
        if int(o.globalReplicationFactor) != total or self._rf != local or \
                int(o.globalReplicaOffset) != popdist.getReplicaIndexOffset():
            raise popart_exception(
                f"Distributed replication options (globalReplicationFactor={o.globalReplicationFactor}, "
                f"replicatedGraphCount={self._rf}, globalReplicaOffset={o.globalReplicaOffset}) differ from poprun's "
                f"({total} replicas, {local} in this instance from {popdist.getReplicaIndexOffset()}); set them with "
                f"popdist.popart.configureSessionOptions(opts)")
        return True, total

    def _check_pipelining(self):
        o = self.options
        if not o.enablePipelining:
            return
        if not self._placement:
            raise popart_exception("enablePipelining needs virtualGraphMode = popart.VirtualGraphMode.Manual with a "
                                   "virtual graph (builder.virtualGraph) on every op")
        stages = set()
        for n in self._model.graph.node:
            for a in n.attribute:
                if a.name == "__pipeline_stage":
                    stages.add(int(a.i))
        n_stages = max(len(stages), len({int(a.i) for n in self._model.graph.node for a in n.attribute
                                         if a.name == "__ipu_number"}))
        self._pipeline_stages = n_stages

    # -- properties ---------------------------------------------------------------------------------------
    @property
    def replicationFactor(self) -> int:  # noqa: N802
        return self._rf

    @property
    def accumulationFactor(self) -> int:  # noqa: N802
        return self._af

    # -- device ---------------------------------------------------------------------------------------------
    def prepareDevice(self, loadEngine: bool = True, err=None) -> None:  # noqa: N802,N803
        """Compile the program for the device's simulated target."""
        if self._session is not None:
            return
        from popxl._frontends import ipus_per_replica
        ipus = ipus_per_replica(self._program.ir)
        target = self.deviceInfo.target_for(self._rf, ipus)
        if not self.deviceInfo.isAttached:
            self.deviceInfo.attach()
        try:
            self._session = popxl.Session(self._program.ir, target)
        except ipu.OutOfMemoryError as e:
            raise OutOfMemoryException(e) from e
        # what the profile records of the device and the frontend
        self._session.device_desc = f"popart {self.deviceInfo.type.name} ({target.name})"
        self._session.frontend = "popart"
        self._session.__enter__()  # attached for the session's life; weights are written below
        self._write_host_weights()

    def loadEngineAndConnectStreams(self) -> None:  # noqa: N802
        self._require_prepared("loadEngineAndConnectStreams")

    def _require_prepared(self, what: str) -> popxl.Session:
        if self._session is None:
            raise popart_exception(f"{what}: call session.prepareDevice() first")
        return self._session

    def _write_host_weights(self) -> None:
        s = self._session
        for w, var in self._program.weights.items():
            arr = self._host_weights[w]
            s._write_variable_data_any(var, np.asarray(arr.astype(var.dtype.as_numpy(), copy=False), order="C"))
        self._device_weights_newer = False

    def weightsFromHost(self) -> None:  # noqa: N802
        self._require_prepared("weightsFromHost")
        self._write_host_weights()

    def weightsToHost(self) -> None:  # noqa: N802
        s = self._require_prepared("weightsToHost")
        s.weights_to_host()
        for w, var in self._program.weights.items():
            self._host_weights[w] = s.get_tensor_data(var)
        self._device_weights_newer = False

    def writeWeights(self, weightsIo: PyWeightsIO) -> None:  # noqa: N802,N803
        """Set host weights from `weightsIo` (weightsFromHost then moves them to the device)."""
        for w, arr in weightsIo.weights.items():
            if w not in self._host_weights:
                raise popart_exception(f"writeWeights: {w!r} is not a weight of this model (weights: "
                                       f"{sorted(self._host_weights)})")
            arr = np.asarray(arr)
            want = self._host_weights[w]
            if arr.shape != want.shape:
                raise popart_exception(f"writeWeights: weight {w!r} has shape {list(want.shape)}, the data has "
                                       f"{list(arr.shape)}")
            self._host_weights[w] = np.array(arr, dtype=want.dtype)

    def readWeights(self, weightsIo: PyWeightsIO) -> None:  # noqa: N802,N803
        """Copy the host weights (as of the last weightsToHost) into `weightsIo`'s arrays."""
        for w, out in weightsIo.weights.items():
            if w not in self._host_weights:
                raise popart_exception(f"readWeights: {w!r} is not a weight of this model (weights: "
                                       f"{sorted(self._host_weights)})")
            src = self._host_weights[w]
            if out.size != src.size:
                raise popart_exception(f"readWeights: the array for {w!r} has shape {list(out.shape)}, the weight "
                                       f"{list(src.shape)}")
            out.reshape(src.shape)[...] = src

    def resetHostWeights(self, modelProtoOrFilename, ignoreWeightsInModelWithoutCorrespondingHostWeight=False):  # noqa: N802,N803
        m = load_model(modelProtoOrFilename)
        for t in m.graph.initializer:
            if t.name in self._host_weights:
                self._host_weights[t.name] = numpy_helper.to_array(t).copy()
            elif not ignoreWeightsInModelWithoutCorrespondingHostWeight:
                raise popart_exception(f"resetHostWeights: {t.name!r} is not a weight of this session's model")

    def modelToHost(self, fn: str) -> None:  # noqa: N802
        """Write the model with the device's current weights to the ONNX file `fn`."""
        if self._session is not None:
            self.weightsToHost()
        m = onnx.ModelProto()
        m.CopyFrom(self._model)
        for t in m.graph.initializer:
            if t.name in self._host_weights:
                orig = numpy_helper.to_array(t)
                t.CopyFrom(numpy_helper.from_array(self._host_weights[t.name].astype(orig.dtype), t.name))
        onnx.save(m, fn)

    # -- tensors ----------------------------------------------------------------------------------------------
    def getInfo(self, tid: str) -> TensorInfo:  # noqa: N802
        infos = self._program.tensor_infos
        if tid not in infos:
            raise popart_exception(f"No tensor {tid!r} in this session's model (inputs: "
                                   f"{[n for n, _ in self._io.inputs]}; anchors: {self.dataFlow.anchors()})")
        shape, dt = infos[tid]
        return TensorInfo(type_name(np.dtype(dt.as_numpy())), list(shape))

    def getTensorIds(self) -> set:  # noqa: N802
        return set(self._program.tensor_infos)

    getAllTensorIds = getTensorIds

    def initAnchorArrays(self) -> Dict[str, np.ndarray]:  # noqa: N802
        """Zeroed arrays of each anchor's shape for one run (see dataflow.anchor_leading_dims)."""
        out = {}
        bps = self.dataFlow.batchesPerStep()
        for tid in self.dataFlow.anchors():
            info = self.getInfo(tid)
            lead = anchor_leading_dims(self.dataFlow.art(tid), bps, self._af, self._rf)
            out[tid] = np.zeros(lead + info.shape(), info.numpy_dtype())
        return out

    # -- running -------------------------------------------------------------------------------------------------
    def run(self, stepio, debugName: str = "") -> None:  # noqa: N803
        s = self._require_prepared("run")
        if isinstance(stepio, PyStepIOCallback):
            stepio = self._stepio_from_callbacks(stepio)
        if not isinstance(stepio, PyStepIO):
            raise popart_exception(f"run takes a popart.PyStepIO or PyStepIOCallback, not {type(stepio).__name__}")
        stepio._check_outputs(self.dataFlow.anchors())
        rf = self._rf
        prog = self._program
        expected = [n for n, _ in self._io.inputs]
        h2d = {}
        if self.options.syntheticDataMode == SyntheticDataMode.Off:
            unknown = [k for k in stepio.inputs if k not in prog.in_streams]
            if unknown:
                raise popart_exception(f"PyStepIO has input(s) {unknown} that are not inputs of the model; its inputs "
                                       f"are {expected}")
            missing = [k for k in expected if k not in stepio.inputs]
            if missing:
                raise popart_exception(f"PyStepIO has no data for input(s) {missing}; every model input needs an "
                                       f"array of shape [batchesPerStep, accumulationFactor, replicationFactor, "
                                       f"*shape] (size-1 dimensions dropped)")
            h2d = {stream: self._input_to_engine(name, stepio.inputs[name]) for name, stream in prog.in_streams.items()}
        staging, d2h = {}, {}
        for tid, stream in prog.anchor_streams.items():
            buf = np.zeros((rf, prog.counts[tid]) + tuple(stream.shape), stream.dtype.as_numpy())
            staging[tid] = buf
            d2h[stream] = buf if rf > 1 else buf[0]
        try:
            self._last_cycles = s.run_streams(h2d, d2h)
        except ipu.IpuError as e:
            from .errors import poplar_application_runtime_error
            raise poplar_application_runtime_error(str(e)) from e
        self._device_weights_newer = True
        for tid, buf in staging.items():
            stepio._write_output(tid, self._anchor_from_engine(tid, buf))

    def _input_to_engine(self, name: str, data) -> np.ndarray:
        bps, af, rf = self.dataFlow.batchesPerStep(), self._af, self._rf
        info = dict(self._io.inputs)[name]
        stream = self._program.in_streams[name]
        arr = np.asarray(data)
        want_np = stream.dtype.as_numpy()
        onnx_np = info.numpy_dtype()
        if arr.dtype != want_np and arr.dtype != onnx_np:
            raise popart_exception(f"Input {name!r} is {arr.dtype}; the model's input is {info.data_type_lcase()} "
                                   f"(convert it with .astype(np.{np.dtype(onnx_np).name}))")
        shape = tuple(info.shape())
        lead = input_leading_dims(bps, af, rf)
        want = tuple(lead) + shape
        if arr.shape != want:
            raise popart_exception(
                f"Input {name!r} has shape {list(arr.shape)}; expected {list(want)} ([batchesPerStep={bps}, "
                f"accumulationFactor={af}, replicationFactor={rf}] with size-1 dimensions dropped, then the tensor "
                f"shape {list(shape)})")
        if arr.dtype != want_np and arr.dtype.kind in "iu" and arr.size:
            info_t = np.iinfo(want_np)  # the IPU has no 64-bit integers: the values must fit 32 bits
            if arr.min() < info_t.min or arr.max() > info_t.max:
                raise popart_exception(f"Input {name!r} has values outside the {np.dtype(want_np).name} range the IPU "
                                       f"holds {info_t.min}..{info_t.max} (64-bit integers are narrowed to 32 bits)")
        full = arr.reshape((bps, af, rf) + shape)
        eng = np.moveaxis(full, 2, 0).reshape((rf, bps * af) + shape)
        eng = np.ascontiguousarray(eng.astype(want_np, copy=False))
        return eng if rf > 1 else eng[0]

    def _anchor_from_engine(self, tid: str, buf: np.ndarray) -> np.ndarray:
        bps, af, rf = self.dataFlow.batchesPerStep(), self._af, self._rf
        art = self.dataFlow.art(tid)
        shape = buf.shape[2:]
        if art.id() in (AnchorReturnTypeId.All, AnchorReturnTypeId.EveryN):
            steps = bps if art.id() == AnchorReturnTypeId.All else bps // art.rp()
            full = np.moveaxis(buf.reshape((rf, steps, af) + shape), 0, 2)  # (steps, af, rf, ...)
            lead = [steps, af, rf]
        else:
            full = buf.reshape((rf,) + shape)
            lead = [rf]
        return full.reshape(tuple(d for d in lead if d != 1) + shape)

    def _stepio_from_callbacks(self, cb: PyStepIOCallback) -> PyStepIO:
        """Gather one step's inputs from the callbacks (one call per batch, in order), and an
        output object that hands each anchor's batches to the output callbacks."""
        bps, af, rf = self.dataFlow.batchesPerStep(), self._af, self._rf
        n = bps * af * rf
        inputs = {}
        for name, info in self._io.inputs:
            batches = []
            for i in range(n):
                x = np.asarray(cb.input_callback(name, False))
                if x.size != info.nelms():
                    raise popart_exception(f"PyStepIOCallback: input_callback({name!r}) returned shape "
                                           f"{list(x.shape)} for batch {i}; the input is {info.shape()}")
                batches.append(x.reshape(info.shape()))
                cb.input_complete_callback(name)
            lead = input_leading_dims(bps, af, rf)
            inputs[name] = np.stack(batches).reshape(tuple(lead) + tuple(info.shape()))
        return _CallbackOutputs(inputs, cb, {t: tuple(self.getInfo(t).shape()) for t in self.dataFlow.anchors()})

    # -- reports -------------------------------------------------------------------------------------------------
    def getCycleCount(self, id: str = "") -> int:  # noqa: N802,A002
        """Cycles of the last run (needs instrumentWithHardwareCycleCounter, as in PopART)."""
        if not self.options.instrumentWithHardwareCycleCounter:
            raise popart_exception("getCycleCount needs SessionOptions.instrumentWithHardwareCycleCounter = True")
        self._require_prepared("getCycleCount")
        return int(self._last_cycles)

    def getSummaryReport(self, resetProfile: bool = True) -> str:  # noqa: N802,N803
        """The profiler's terminal report of this session (compilation and the runs so far)."""
        import io

        from profiler.report import make_console, render
        buf = io.StringIO()
        render(self._profile_document(), make_console(file=buf, width=120, color_system=None))
        return buf.getvalue()

    def getReport(self):  # noqa: N802
        """A libpva-shaped report (report.compilation..., report.execution...) of this session."""
        from profiler.api import Report
        return Report(self._profile_document())

    def getSerializedGraph(self) -> bytes:  # noqa: N802
        import json
        return json.dumps(self._profile_document()).encode()

    def _profile_document(self) -> dict:
        s = self._require_prepared("a report")
        from popxl._frontends import build_profile
        return build_profile(s)

    def getRandomSeed(self) -> int:  # noqa: N802
        seed = self._program.seed
        if seed is None or self._session is None:
            return 0
        return int(self._session.get_tensor_data(seed)[0])

    def setRandomSeed(self, seedValue: int) -> None:  # noqa: N802,N803
        seed = self._program.seed
        if seed is None:
            return
        s = self._require_prepared("setRandomSeed")
        v = int(seedValue)
        s.write_variable_data(seed, np.array([v & 0xFFFFFFFF, (v >> 32) & 0xFFFFFFFF], np.uint32))

    def getIr(self):  # noqa: N802
        return self._program.ir

    def compileAndExport(self, filename: str) -> None:  # noqa: N802
        raise popart_exception("compileAndExport: the simulator does not write PopEF executables")

    def __del__(self):
        try:
            if self._session is not None:
                self._session.__exit__(None, None, None)
        except Exception:
            pass


class _CallbackOutputs(PyStepIO):
    """The PyStepIO a PyStepIOCallback stands for: anchors go to the output callbacks one batch at
    a time, in order."""

    def __init__(self, inputs, cb: PyStepIOCallback, shapes: Dict[str, tuple]):
        super().__init__(inputs, {})
        self._cb, self._shapes = cb, shapes

    def _check_outputs(self, anchors) -> None:
        pass  # every anchor goes to the output callback

    def _write_output(self, tid, data):
        shape = self._shapes[tid]
        for i, item in enumerate(np.asarray(data).reshape((-1,) + tuple(shape))):
            out = self._cb.output_callback(tid)
            if not isinstance(out, np.ndarray) or out.size != item.size:
                got = list(out.shape) if isinstance(out, np.ndarray) else type(out).__name__
                raise popart_exception(f"PyStepIOCallback: output_callback({tid!r}) returned {got} for batch {i}; "
                                       f"the anchor is {list(shape)} (a NumPy array of that size to write into)")
            out.reshape(shape)[...] = item
            self._cb.output_complete_callback(tid)


class InferenceSession(_Session):
    """Run an ONNX model forward: InferenceSession(fnModel, dataFlow, deviceInfo, inputShapeInfo=...,
    patterns=..., userOptions=...)."""

    def __init__(self, fnModel, dataFlow, deviceInfo, inputShapeInfo=None, patterns=None, userOptions=None,  # noqa: N803
                 name: str = "inference"):
        super().__init__(fnModel, dataFlow, deviceInfo, inputShapeInfo, patterns, userOptions, name)

    @classmethod
    def fromIr(cls, ir, deviceInfo, name="fromIr"):  # noqa: N802,N803
        """A session running a popxl Ir (or its `_pb_ir`), as popart.ir programs were run: inputs
        keyed by the host-to-device streams' tensor ids, anchors by the device-to-host ones."""
        from ._ir_session import IrSession
        return IrSession(getattr(ir, "_ir", ir), deviceInfo, name)


class TrainingSession(_Session):
    """Train an ONNX model: TrainingSession(fnModel, dataFlow, loss, optimizer, deviceInfo, ...)."""

    _training = True

    def __init__(self, fnModel, dataFlow, loss, optimizer, deviceInfo, inputShapeInfo=None, patterns=None,  # noqa: N803
                 userOptions=None, name: str = "training"):
        if not isinstance(optimizer, Optimizer):
            raise popart_exception(f"optimizer must be a popart optimizer (SGD, ConstSGD, Adam, Adaptive), not "
                                   f"{type(optimizer).__name__}")
        if not isinstance(loss, str):
            raise popart_exception(f"loss must be the id of the loss tensor (a str), not {type(loss).__name__}")
        super().__init__(fnModel, dataFlow, deviceInfo, inputShapeInfo, patterns, userOptions, name, loss=loss,
                         optimizer=copy.deepcopy(optimizer))

    def updateOptimizerFromHost(self, optimizer: Optimizer) -> None:  # noqa: N802
        """New values for the optimizer's non-constant hyper-parameters (constants must not change)."""
        if optimizer.structure() != self._optimizer.structure():
            raise popart_exception(
                "updateOptimizerFromHost: the new optimizer must match the session's (the same type, modes, "
                "constant values and which values are non-constant); only non-constant values can change")
        s = self._require_prepared("updateOptimizerFromHost")
        for var, value in self._program.opt_state.host_values(optimizer).items():
            s._write_variable_data_any(var, value)
        self._optimizer = copy.deepcopy(optimizer)
        self._program.opt_state.optimizer = self._optimizer


def _as_retrieved(var: popxl.Variable, init: np.ndarray) -> np.ndarray:
    """A weight's initializer in the shape reading it back gives: one value per group as given, or,
    for VariableRetrievalMode.AllReplicas, one per replica (its group's)."""
    arr = np.array(init)
    if getattr(var, "retrieval_mode", "one_per_group") != "all_replicas":
        return arr
    rg = var.replica_grouping
    assignment = list(rg.assignment)
    return arr[assignment] if rg.num_groups > 1 else np.stack([arr] * len(assignment))
