"""popart.Builder: build an ONNX model op by op (`builder.aiOnnx.add([a, b])`).

The model is an `onnx.ModelProto` held by the builder; `getModelProto()` serialises it. Op methods
come from `_opsets` (ONNX schemas for aiOnnx, a table for aiGraphcore). The first versioned
`aiOnnxOpsetN` a script touches (or `aiOnnx`, opset 10 unless `opsets` says otherwise) fixes the
model's ONNX opset; asking for another one afterwards is an error, as in PopART. Node attributes
that place or schedule ops (virtual graph, pipeline stage, recomputation, ...) use PopART's
attribute names, so models saved by real PopART read the same way.
"""
from __future__ import annotations

import contextlib
from typing import Dict, Iterable, List, Optional, Sequence, Union

import numpy as np
import onnx
from onnx import numpy_helper

from . import _opsets
from .errors import popart_exception
from .tensorinfo import TensorInfo, onnx_type

DEFAULT_ONNX_OPSET = 10
MAX_ONNX_OPSET = 11
MIN_ONNX_OPSET = 6
GRAPHCORE_DOMAIN = "ai.graphcore"
GRAPHCORE_OPSET = 1

# PopART's node attribute names
VIRTUAL_GRAPH_ATTRIBUTE = "__ipu_number"
PIPELINE_STAGE_ATTRIBUTE = "__pipeline_stage"
EXECUTION_PHASE_ATTRIBUTE = "__execution_phase"
RECOMPUTE_ATTRIBUTE = "__recompute_output_in_backward_pass"
SCHEDULE_PRIORITY_ATTRIBUTE = "__schedule_priority"
INPLACE_PREFERENCES_ATTRIBUTE = "__inplace_op_priority"
AVAILABLE_MEMORY_ATTRIBUTE = "availableMemoryProportion"
PARTIALS_TYPE_ATTRIBUTE = "partialsType"


class Opset:
    """An op domain at one version: op methods are looked up by name."""

    domain = ""

    def __init__(self, builder: "Builder", version: int):
        self._builder = builder
        self.version = version

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        sig = self._signature(name)
        if sig is None:
            raise AttributeError(f"{type(self).__name__} (opset {self.version}) has no op {name!r}")

        def op(args=(), *posargs, **kwargs):
            return self._builder._add_op(sig, args, posargs, kwargs)

        op.__name__ = name
        op.__doc__ = sig.describe()
        return op

    def _signature(self, name: str):
        raise NotImplementedError


class AiOnnx(Opset):
    """ai.onnx ops at one opset version (6 to 11)."""

    def _signature(self, name):
        op_type = _opsets.find_onnx_op(name, self.version)
        if op_type is None:
            return None
        return _opsets.onnx_signature(op_type, self.version)

    def constant(self, value, is_value_sparse: bool = False, debugContext: str = "", **kw) -> str:  # noqa: N803
        """A Constant node holding `value` (a NumPy array, or a scalar)."""
        debugContext = kw.pop("debugPrefix", kw.pop("debug_context", debugContext))  # noqa: N806
        if isinstance(is_value_sparse, str):  # constant(value, "name")
            debugContext, is_value_sparse = is_value_sparse, False  # noqa: N806
        if is_value_sparse:
            raise popart_exception("aiOnnx.constant: sparse values are not supported; pass a dense NumPy array")
        arr = np.asarray(value)
        if arr.dtype == np.float64:
            arr = arr.astype(np.float32)
        elif arr.dtype == np.int64 and not isinstance(value, np.ndarray):
            arr = arr.astype(np.int32)
        attr = onnx.helper.make_attribute("value", numpy_helper.from_array(arr))
        return self._builder._add_node("Constant", "", [], [attr], 1, debugContext)[0]

    def logical_if(self, args, num_outputs, else_branch, then_branch, name=""):
        raise popart_exception("aiOnnx.logical_if (ONNX If with subgraph builders) is not supported by the "
                               "simulator's PopART frontend yet; compute both branches and use aiOnnx.where")

    def loop(self, args, num_outputs, body, debugContext=""):  # noqa: N803
        raise popart_exception("aiOnnx.loop (ONNX Loop with a subgraph builder) is not supported by the simulator's "
                               "PopART frontend yet; unroll the loop in the builder")

    def scan(self, *args, **kwargs):
        raise popart_exception("aiOnnx.scan is not supported by the simulator's PopART frontend yet")


class AiOnnx6(AiOnnx):
    pass


class AiOnnx7(AiOnnx):
    pass


class AiOnnx8(AiOnnx):
    pass


class AiOnnx9(AiOnnx):
    pass


class AiOnnx10(AiOnnx):
    pass


class AiOnnx11(AiOnnx):
    pass


class AiOnnxMl(Opset):
    domain = "ai.onnx.ml"

    def _signature(self, name):
        return None


class AiGraphcore(Opset):
    """ai.graphcore opset 1: Graphcore's own ops (losses, gelu, scale, subsample, ...)."""

    domain = GRAPHCORE_DOMAIN

    def __init__(self, builder, version):
        if version != GRAPHCORE_OPSET:
            raise ValueError(f"ai.graphcore opset {version} does not exist; the only version is {GRAPHCORE_OPSET}")
        super().__init__(builder, version)

    def _signature(self, name):
        return _opsets.GRAPHCORE_OPS.get(name)

    def init(self, shape, data_type, init_type, batch_axis=-1, debugContext="", **kw):  # noqa: N803
        """A tensor of `shape` and `data_type` filled with zeros (InitType.Zero) or left undefined."""
        debugContext = kw.pop("debugPrefix", debugContext)  # noqa: N806
        if isinstance(batch_axis, str):
            debugContext, batch_axis = batch_axis, -1  # noqa: N806
        attrs = [onnx.helper.make_attribute("shape", [int(d) for d in shape]),
                 onnx.helper.make_attribute("data_type", int(onnx_type(data_type))),
                 onnx.helper.make_attribute("tensor_type", int(getattr(init_type, "value", init_type))),
                 onnx.helper.make_attribute("batch_axis", int(batch_axis))]
        return self._builder._add_node("Init", GRAPHCORE_DOMAIN, [], attrs, 1, debugContext)[0]

    def call(self, args, num_outputs, callee, debugContext=""):  # noqa: N803
        raise popart_exception("aiGraphcore.call (subgraph builders) is not supported by the simulator's PopART "
                               "frontend yet; build the ops inline")


class AiGraphcoreOpset1(AiGraphcore):
    pass


_ONNX_OPSET_CLASSES = {6: AiOnnx6, 7: AiOnnx7, 8: AiOnnx8, 9: AiOnnx9, 10: AiOnnx10, 11: AiOnnx11}


class Builder:
    """Build an ONNX model: `Builder()` for a new one, `Builder(model_bytes_or_path)` to extend one."""

    def __init__(self, modelProtoOrFilename: Union[str, bytes, None] = None,  # noqa: N803
                 opsets: Optional[Dict[str, int]] = None, builderCore=None):  # noqa: N803
        if builderCore is not None:
            raise popart_exception("Builder(builderCore=...): subgraph builders are not supported by the "
                                   "simulator's PopART frontend yet")
        self._opsets = dict(opsets or {})
        self._onnx_version: Optional[int] = None
        self._graphcore_used = False
        self._ids: Dict[str, int] = {}
        self._attr_stack: List[Dict[str, object]] = []
        self._scopes: List[str] = []
        self._shape_cache = None
        if modelProtoOrFilename is None:
            graph = onnx.helper.make_graph([], "BuilderGraph", [], [])
            self._model = onnx.helper.make_model(graph, producer_name="popart (ipu-sim)",
                                                 opset_imports=[], ir_version=6)
        else:
            from ._model import load_model
            self._model = load_model(modelProtoOrFilename)
            for imp in self._model.opset_import:
                if imp.domain in ("", "ai.onnx"):
                    self._onnx_version = imp.version
                elif imp.domain == GRAPHCORE_DOMAIN:
                    self._graphcore_used = True
            for name in self._all_names():
                self._ids[name] = self._ids.get(name, 0) + 1

    # -- opsets ------------------------------------------------------------------------------------
    def _fix_onnx_version(self, version: int) -> None:
        if not MIN_ONNX_OPSET <= version <= MAX_ONNX_OPSET:
            raise ValueError(f"ai.onnx opset {version} is not supported; use {MIN_ONNX_OPSET} to {MAX_ONNX_OPSET}")
        if self._onnx_version is not None and self._onnx_version != version:
            raise popart_exception(
                f"The ai.onnx opset of this model is already {self._onnx_version}; it cannot also use opset "
                f"{version}. Use builder.aiOnnxOpset{self._onnx_version} (or builder.aiOnnx) for every op.")
        self._onnx_version = version
        self._sync_opset_imports()

    def _sync_opset_imports(self) -> None:
        imports = {imp.domain: imp.version for imp in self._model.opset_import}
        if self._onnx_version is not None:
            imports[""] = self._onnx_version
        if self._graphcore_used:
            imports[GRAPHCORE_DOMAIN] = GRAPHCORE_OPSET
        del self._model.opset_import[:]
        for d, v in imports.items():
            self._model.opset_import.append(onnx.helper.make_opsetid(d, v))

    @property
    def aiOnnx(self) -> AiOnnx:  # noqa: N802
        version = self._onnx_version or self._opsets.get("ai.onnx", DEFAULT_ONNX_OPSET)
        return self._onnx_opset(version)

    def _onnx_opset(self, version: int) -> AiOnnx:
        self._fix_onnx_version(version)
        return _ONNX_OPSET_CLASSES[version](self, version)

    aiOnnxOpset6 = property(lambda self: self._onnx_opset(6))
    aiOnnxOpset7 = property(lambda self: self._onnx_opset(7))
    aiOnnxOpset8 = property(lambda self: self._onnx_opset(8))
    aiOnnxOpset9 = property(lambda self: self._onnx_opset(9))
    aiOnnxOpset10 = property(lambda self: self._onnx_opset(10))
    aiOnnxOpset11 = property(lambda self: self._onnx_opset(11))

    @property
    def aiGraphcore(self) -> AiGraphcore:  # noqa: N802
        return AiGraphcore(self, self._opsets.get(GRAPHCORE_DOMAIN, GRAPHCORE_OPSET))

    @property
    def aiGraphcoreOpset1(self) -> AiGraphcoreOpset1:  # noqa: N802
        return AiGraphcoreOpset1(self, 1)

    @property
    def aiOnnxMl(self) -> AiOnnxMl:  # noqa: N802
        return AiOnnxMl(self, 1)

    # -- ids -------------------------------------------------------------------------------------------
    def _all_names(self) -> Iterable[str]:
        g = self._model.graph
        yield from (v.name for v in g.input)
        yield from (t.name for t in g.initializer)
        for n in g.node:
            yield from n.output

    def _unique(self, base: str) -> str:
        """PopART's id scheme: the first use of a name keeps it, the next ones get '/1', '/2', ..."""
        n = self._ids.get(base, 0)
        self._ids[base] = n + 1
        uid = base if n == 0 else f"{base}/{n}"
        while uid in self._ids and n:
            n += 1
            uid = f"{base}/{n}"
        self._ids[uid] = max(self._ids.get(uid, 0), 1)
        self._shape_cache = None
        return uid

    def _scoped(self, name: str) -> str:
        return "/".join(self._scopes + [name]) if self._scopes else name

    def _known(self, tid: str) -> bool:
        return tid in set(self._all_names())

    def _check_ids(self, ids: Sequence[str], what: str) -> None:
        names = set(self._all_names())
        for t in ids:
            if t != "" and t not in names:
                raise popart_exception(f"{what}: tensor {t!r} is not in the model (known inputs: "
                                       f"{self.getInputTensorIds()})")

    # -- inputs and outputs -----------------------------------------------------------------------------
    def addInputTensor(self, tensorInfo, shape_or_debug=None, debugContext: str = "", **kw) -> str:  # noqa: N802,N803
        """addInputTensor(TensorInfo[, settings][, debugContext]) or addInputTensor(dtype, shape[, debugContext])."""
        debugContext = kw.pop("debugPrefix", debugContext)  # noqa: N806
        if isinstance(tensorInfo, TensorInfo):
            info = tensorInfo
            if isinstance(shape_or_debug, str):
                debugContext = shape_or_debug  # noqa: N806
        else:
            if shape_or_debug is None:
                raise popart_exception("addInputTensor(dataType, shape): the shape is missing")
            info = TensorInfo(tensorInfo, shape_or_debug)
        tid = self._unique(self._scoped(debugContext or "input"))
        vi = onnx.helper.make_tensor_value_info(tid, onnx_type(info.data_type()), info.shape())
        self._model.graph.input.append(vi)
        return tid

    def addUntypedInputTensor(self, debugContext: str = "") -> str:  # noqa: N802,N803
        raise popart_exception("addUntypedInputTensor: the simulator needs the type and shape of every input; "
                               "use addInputTensor(TensorInfo(dtype, shape))")

    def addInitializedInputTensor(self, initVal, variableSettings=None, debugContext: str = "") -> str:  # noqa: N802,N803
        """A weight initialised with `initVal` (a NumPy array): an ONNX initializer."""
        if isinstance(variableSettings, str):
            debugContext, variableSettings = variableSettings, None  # noqa: N806
        from .options import VARIABLE_SETTINGS_KEY, VariableSettings
        if variableSettings is not None and not isinstance(variableSettings, VariableSettings):
            raise popart_exception(f"addInitializedInputTensor: variableSettings must be a popart.VariableSettings, "
                                   f"not {type(variableSettings).__name__}")
        arr = np.asarray(initVal)
        if arr.dtype == np.float64:
            raise popart_exception("addInitializedInputTensor: float64 weights are not supported on the IPU; "
                                   "convert with .astype(np.float32)")
        tid = self._unique(self._scoped(debugContext or "init_input"))
        self._model.graph.initializer.append(numpy_helper.from_array(np.asarray(arr, order="C"), tid))
        self._model.graph.input.append(onnx.helper.make_tensor_value_info(tid, onnx_type(arr.dtype), arr.shape))
        if variableSettings is not None and not variableSettings._is_default():
            # the session reads them from the model (the initializer holds one value per group)
            onnx.helper.set_model_props(self._model, {**{p.key: p.value for p in self._model.metadata_props},
                                                      VARIABLE_SETTINGS_KEY + tid: variableSettings._encode()})
        return tid

    def addOutputTensor(self, outputName: str) -> None:  # noqa: N802,N803
        self._check_ids([outputName], "addOutputTensor")
        if outputName in [o.name for o in self._model.graph.output]:
            return
        vi = onnx.helper.make_empty_tensor_value_info(outputName)
        try:
            info = self._tensor_info(outputName)
            vi = onnx.helper.make_tensor_value_info(outputName, onnx_type(info.data_type()), info.shape())
        except Exception:
            pass  # the shape is filled in when the model is read
        self._model.graph.output.append(vi)

    # -- ops ----------------------------------------------------------------------------------------------
    def _node_attributes(self) -> List[onnx.AttributeProto]:
        merged: Dict[str, object] = {}
        for d in self._attr_stack:
            merged.update(d)
        return [_opsets.make_attribute(k, v) for k, v in merged.items()]

    def _add_node(self, op_type: str, domain: str, inputs: Sequence[str], attrs, num_outputs: int,
                  debug: str) -> List[str]:
        if domain == GRAPHCORE_DOMAIN and not self._graphcore_used:
            self._graphcore_used = True
            self._sync_opset_imports()
        base = self._scoped(debug or op_type)
        outputs = [self._unique(f"{base}:{k}") for k in range(num_outputs)]
        node_name = self._unique(f"{base}") if debug else ""
        node = onnx.helper.make_node(op_type, list(inputs), outputs, name=node_name or outputs[0], domain=domain)
        node.attribute.extend(list(attrs) + self._node_attributes())
        self._model.graph.node.append(node)
        return outputs

    def _add_op(self, sig: _opsets.OpSignature, args, posargs, kwargs):
        if isinstance(args, str):
            args = [args]
        args = list(args)
        self._check_ids(args, f"{sig.op_type}")
        lo, hi = sig.input_range
        if not lo <= len(args) <= hi:
            raise popart_exception(f"{sig.op_type} takes {lo}" + (f" to {hi}" if hi != lo else "") +
                                   f" inputs, {len(args)} given")
        values, num_outputs, debug = _opsets.bind_arguments(sig, posargs, kwargs)
        attrs = _opsets.attributes(sig, values)
        outs = self._add_node(sig.op_type, sig.domain, args, attrs, num_outputs, debug)
        return outs if sig.returns_list else outs[0]

    def reshape_const(self, aiOnnx, args, shape, debugContext: str = "") -> List[str]:  # noqa: N803
        """Reshape with a constant shape: a Constant node then Reshape."""
        shape_id = aiOnnx.constant(np.asarray(shape, np.int64))
        return aiOnnx.reshape([args[0] if isinstance(args, (list, tuple)) else args, shape_id], debugContext)

    def customOp(self, opName, opVersion, domain, inputs, attributes, numOutputs=1, name=""):  # noqa: N802,N803
        attrs = [_opsets.make_attribute(k, v) for k, v in attributes.items()]
        self._check_ids(inputs, opName)
        return self._add_node(opName, domain, inputs, attrs, numOutputs, name)

    def createSubgraphBuilder(self):  # noqa: N802
        raise popart_exception("createSubgraphBuilder: subgraph builders (call, if, loop) are not supported by the "
                               "simulator's PopART frontend yet")

    # -- attribute contexts ---------------------------------------------------------------------------------
    @contextlib.contextmanager
    def _attribute_context(self, name: str, value):
        self._attr_stack.append({name: value})
        try:
            yield
        finally:
            self._attr_stack.pop()

    @contextlib.contextmanager
    def nameScope(self, name: str):  # noqa: N802
        self._scopes.append(name)
        try:
            yield
        finally:
            self._scopes.pop()

    def getNameScope(self, name: str = "") -> str:  # noqa: N802
        return self._scoped(name) if name else ("/".join(self._scopes) + "/" if self._scopes else "")

    def _set_on_nodes(self, ids, name: str, value) -> None:
        ids = [ids] if isinstance(ids, str) else list(ids)
        for tid in ids:
            node = self._node_of(tid)
            for a in list(node.attribute):
                if a.name == name:
                    node.attribute.remove(a)
            node.attribute.append(_opsets.make_attribute(name, value))

    def _get_context_value(self, name: str):
        for d in reversed(self._attr_stack):
            if name in d:
                return d[name]
        return None

    def virtualGraph(self, *args):  # noqa: N802
        """virtualGraph(value) as a context manager, or virtualGraph(ids, value) on existing nodes."""
        if len(args) == 1 and isinstance(args[0], (int, np.integer)):
            return self._attribute_context(VIRTUAL_GRAPH_ATTRIBUTE, int(args[0]))
        ids, value = args[0], (args[1] if len(args) > 1 else 0)
        self._set_on_nodes(ids, VIRTUAL_GRAPH_ATTRIBUTE, int(value))

    def pipelineStage(self, *args):  # noqa: N802
        if len(args) == 1 and isinstance(args[0], (int, np.integer)):
            return self._attribute_context(PIPELINE_STAGE_ATTRIBUTE, int(args[0]))
        ids, value = args[0], (args[1] if len(args) > 1 else 0)
        self._set_on_nodes(ids, PIPELINE_STAGE_ATTRIBUTE, int(value))

    def executionPhase(self, *args):  # noqa: N802
        if len(args) <= 1 and (not args or isinstance(args[0], (int, np.integer))):
            return self._attribute_context(EXECUTION_PHASE_ATTRIBUTE, int(args[0]) if args else 0)
        ids, value = args[0], (args[1] if len(args) > 1 else 0)
        self._set_on_nodes(ids, EXECUTION_PHASE_ATTRIBUTE, int(value))

    def schedulePriority(self, value: float):  # noqa: N802
        return self._attribute_context(SCHEDULE_PRIORITY_ATTRIBUTE, float(value))

    def outlineAttributes(self, attrs: dict):  # noqa: N802
        return contextlib.nullcontext()

    def recomputeOutput(self, *args):  # noqa: N802
        if len(args) <= 1 and not (args and isinstance(args[0], (str, list, set, tuple))):
            value = args[0] if args else 0
            return self._attribute_context(RECOMPUTE_ATTRIBUTE, int(getattr(value, "value", value)))
        value = args[1] if len(args) > 1 else 0
        self._set_on_nodes(args[0], RECOMPUTE_ATTRIBUTE, int(getattr(value, "value", value)))

    def recomputeOutputInBackwardPass(self, nodeOutputNames, value=None) -> None:  # noqa: N802,N803
        from .options import RecomputeType
        value = RecomputeType.Recompute if value is None else value
        self._set_on_nodes(nodeOutputNames, RECOMPUTE_ATTRIBUTE, int(getattr(value, "value", value)))

    def getRecomputeOutputInBackwardPass(self, nodeOutputNames) -> bool:  # noqa: N802,N803
        ids = [nodeOutputNames] if isinstance(nodeOutputNames, str) else list(nodeOutputNames)
        node = self._node_of(ids[0])
        for a in node.attribute:
            if a.name == RECOMPUTE_ATTRIBUTE:
                return a.i == 2
        return False

    def checkpointOutput(self, nodeOutputNames: List[str]) -> List[str]:  # noqa: N802,N803
        """An Identity of each tensor, annotated RecomputeType.Checkpoint (as PopART's builder
        makes it): kept for the backward pass whatever the automatic recomputation picks."""
        from .options import RecomputeType
        outs = [self.aiOnnx.identity([t], debugContext="Checkpoint") for t in nodeOutputNames]
        self._set_on_nodes(outs, RECOMPUTE_ATTRIBUTE, RecomputeType.Checkpoint.value)
        return outs

    def outputTensorLocation(self, *args):  # noqa: N802
        if len(args) <= 1:
            return contextlib.nullcontext()

    def setInplacePreferences(self, nodeOutputName: str, prefs: Dict[str, float]) -> None:  # noqa: N802,N803
        node = self._node_of(nodeOutputName)
        node.attribute.append(onnx.helper.make_attribute(INPLACE_PREFERENCES_ATTRIBUTE,
                                                         [f"{k}:{v}" for k, v in prefs.items()]))

    def setAvailableMemoryProportion(self, nodeOutputNames, availableMemoryProportion: float) -> None:  # noqa: N802,N803
        if not 0 < availableMemoryProportion <= 1:
            raise popart_exception(f"availableMemoryProportion must be in (0, 1], not {availableMemoryProportion}")
        self._set_on_nodes(nodeOutputNames, AVAILABLE_MEMORY_ATTRIBUTE, float(availableMemoryProportion))

    def setPartialsType(self, nodeOutputName: str, partialsType: str) -> None:  # noqa: N802,N803
        if partialsType.upper() not in ("FLOAT", "HALF"):
            raise popart_exception(f"partialsType must be 'FLOAT' or 'HALF', not {partialsType!r}")
        self._set_on_nodes(nodeOutputName, PARTIALS_TYPE_ATTRIBUTE, partialsType.upper())

    def getPartialsType(self, nodeOutputName: str) -> str:  # noqa: N802,N803
        for a in self._node_of(nodeOutputName).attribute:
            if a.name == PARTIALS_TYPE_ATTRIBUTE:
                return a.s.decode()
        return "FLOAT"

    def setSerializeMatMul(self, nodeOutputName, mode, factor=0, keep_precision=False) -> None:  # noqa: N802,N803
        self._set_on_nodes(list(nodeOutputName), "serialize_matmul_mode", str(mode))

    def setEnableConvDithering(self, nodeOutputName, enableConvDithering) -> None:  # noqa: N802,N803
        self._set_on_nodes(nodeOutputName, "enableConvDithering", int(enableConvDithering))

    def excludePatterns(self, nodeOutputName, patternNames) -> None:  # noqa: N802,N803
        self._set_on_nodes(nodeOutputName, "__exclude_patterns", list(patternNames))

    def embedReplicationFactor(self, replicationFactor: int) -> None:  # noqa: N802,N803
        self._set_metadata("replicationFactor", str(int(replicationFactor)))

    def setGraphName(self, name: str) -> None:  # noqa: N802
        self._model.graph.name = name

    def _set_metadata(self, key, value):
        for p in self._model.metadata_props:
            if p.key == key:
                p.value = value
                return
        self._model.metadata_props.append(onnx.StringStringEntryProto(key=key, value=value))

    def getVirtualGraph(self, nodeOutputNames=None) -> int:  # noqa: N802,N803
        if nodeOutputNames is None:
            v = self._get_context_value(VIRTUAL_GRAPH_ATTRIBUTE)
            if v is None:
                raise popart_exception("getVirtualGraph: no virtual graph is set in this context")
            return int(v)
        ids = [nodeOutputNames] if isinstance(nodeOutputNames, str) else list(nodeOutputNames)
        return self.getInt64NodeAttribute(VIRTUAL_GRAPH_ATTRIBUTE, ids)

    def hasVirtualGraph(self) -> bool:  # noqa: N802
        return self._get_context_value(VIRTUAL_GRAPH_ATTRIBUTE) is not None

    def getPipelineStage(self) -> int:  # noqa: N802
        v = self._get_context_value(PIPELINE_STAGE_ATTRIBUTE)
        if v is None:
            raise popart_exception("getPipelineStage: no pipeline stage is set in this context")
        return int(v)

    def hasPipelineStage(self) -> bool:  # noqa: N802
        return self._get_context_value(PIPELINE_STAGE_ATTRIBUTE) is not None

    def getExecutionPhase(self) -> int:  # noqa: N802
        v = self._get_context_value(EXECUTION_PHASE_ATTRIBUTE)
        if v is None:
            raise popart_exception("getExecutionPhase: no execution phase is set in this context")
        return int(v)

    def hasExecutionPhase(self) -> bool:  # noqa: N802
        return self._get_context_value(EXECUTION_PHASE_ATTRIBUTE) is not None

    # -- node attributes ------------------------------------------------------------------------------------
    def _node_of(self, ids) -> onnx.NodeProto:
        ids = [ids] if isinstance(ids, str) else list(ids)
        found = [n for n in self._model.graph.node if set(ids) <= set(n.output)]
        if len(found) != 1:
            raise popart_exception(f"Could not find a unique node with outputs {sorted(ids)} in the model")
        return found[0]

    def addNodeAttribute(self, attributeName: str, attributeValue, nodeOutputNames) -> None:  # noqa: N802,N803
        node = self._node_of(nodeOutputNames)
        if any(a.name == attributeName for a in node.attribute):
            raise popart_exception(f"Node already has attribute {attributeName!r}")
        node.attribute.append(_opsets.make_attribute(attributeName, attributeValue))

    def _attribute(self, name, ids):
        node = self._node_of(ids)
        for a in node.attribute:
            if a.name == name:
                return onnx.helper.get_attribute_value(a)
        raise popart_exception(f"Node with outputs {sorted(ids) if not isinstance(ids, str) else ids} has no "
                               f"attribute {name!r}")

    def nodeHasAttribute(self, attributeName: str, nodeOutputNames) -> bool:  # noqa: N802,N803
        return any(a.name == attributeName for a in self._node_of(nodeOutputNames).attribute)

    def getInt64NodeAttribute(self, attributeName, nodeOutputNames) -> int:  # noqa: N802,N803
        return int(self._attribute(attributeName, nodeOutputNames))

    def getInt64VectorNodeAttribute(self, attributeName, nodeOutputNames) -> List[int]:  # noqa: N802,N803
        return [int(x) for x in self._attribute(attributeName, nodeOutputNames)]

    def getFloatNodeAttribute(self, attributeName, nodeOutputNames) -> float:  # noqa: N802,N803
        return float(self._attribute(attributeName, nodeOutputNames))

    def getFloatVectorNodeAttribute(self, attributeName, nodeOutputNames) -> List[float]:  # noqa: N802,N803
        return [float(x) for x in self._attribute(attributeName, nodeOutputNames)]

    def getStringNodeAttribute(self, attributeName, nodeOutputNames) -> str:  # noqa: N802,N803
        v = self._attribute(attributeName, nodeOutputNames)
        return v.decode() if isinstance(v, bytes) else str(v)

    def getStringVectorNodeAttribute(self, attributeName, nodeOutputNames) -> List[str]:  # noqa: N802,N803
        return [x.decode() if isinstance(x, bytes) else str(x) for x in self._attribute(attributeName, nodeOutputNames)]

    def getAllNodeAttributeNames(self, nodeOutputNames) -> List[str]:  # noqa: N802,N803
        return [a.name for a in self._node_of(nodeOutputNames).attribute]

    def removeNodeAttribute(self, attributeName, nodeOutputNames) -> None:  # noqa: N802,N803
        node = self._node_of(nodeOutputNames)
        for a in list(node.attribute):
            if a.name == attributeName:
                node.attribute.remove(a)
                return
        raise popart_exception(f"Node has no attribute {attributeName!r}")

    # -- queries ------------------------------------------------------------------------------------------------
    def getInputTensorIds(self) -> List[str]:  # noqa: N802
        return [v.name for v in self._model.graph.input]

    def getOutputTensorIds(self) -> List[str]:  # noqa: N802
        return [v.name for v in self._model.graph.output]

    def getValueTensorIds(self) -> List[str]:  # noqa: N802
        return [t for n in self._model.graph.node for t in n.output]

    def getTrainableTensorIds(self) -> List[str]:  # noqa: N802
        return [t.name for t in self._model.graph.initializer
                if numpy_helper.to_array(t).dtype.kind == "f"]

    def isInitializer(self, id: str) -> bool:  # noqa: N802,A002
        return any(t.name == id for t in self._model.graph.initializer)

    def _tensor_info(self, tid: str) -> TensorInfo:
        self._check_ids([tid], "getTensorShape")
        if self._shape_cache is None:
            from ._model import infer_tensor_infos
            self._shape_cache = infer_tensor_infos(self._model)
        if tid not in self._shape_cache:
            raise popart_exception(f"The shape of tensor {tid!r} could not be inferred")
        return self._shape_cache[tid]

    def getTensorShape(self, id: str) -> List[int]:  # noqa: N802,A002
        return self._tensor_info(id).shape()

    def getTensorDtypeString(self, id: str) -> str:  # noqa: N802,A002
        return self._tensor_info(id).data_type_lcase()

    def getModelProto(self, humanReadable: bool = False) -> bytes:  # noqa: N802,N803
        """The model, serialised (bytes); PopART's sessions and `onnx.load_from_string` read it."""
        self._fill_output_types()
        return self._model.SerializeToString()

    def saveModelProto(self, filename: str) -> None:  # noqa: N802
        self._fill_output_types()
        onnx.save(self._model, filename)

    def saveInitializersExternally(self, ids, filename) -> None:  # noqa: N802
        raise popart_exception("saveInitializersExternally is not supported by the simulator's PopART frontend")

    def _fill_output_types(self) -> None:
        for vi in self._model.graph.output:
            if not vi.type.tensor_type.elem_type:
                try:
                    info = self._tensor_info(vi.name)
                except Exception:
                    continue
                vi.CopyFrom(onnx.helper.make_tensor_value_info(vi.name, onnx_type(info.data_type()), info.shape()))

    def __repr__(self) -> str:
        return f"<popart.Builder: {len(self._model.graph.node)} nodes, opset {self._onnx_version}>"
