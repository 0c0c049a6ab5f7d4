"""The popxl program of a PopTorch model: popart/_program.py's loops, anchors, gradients,
accumulation, replication and optimizer, with the forward graph translated from the captured
ATen nodes (poptorch/_capture.py, _translate/) instead of an ONNX graph.

    captured model ──> TorchBuilder._forward: graph inputs for the data, parameters, buffers and
                       the random seed; the nodes translated by _translate; outputs: the model's
                       outputs, the loss and the new values of buffers (running statistics);
                       its gradient graph, rerunning the ops recomputation picks (popart/_recompute.py)
                   ──> popart._program._Builder: repeat deviceIterations x (repeat
                       gradientAccumulation x micro-batch), all-reduce over replicas, optimizer
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, Optional

import numpy as np

import popxl
import popxl.ops as ops
from popart import _program as popart_program
from popart._program import GRAD_PREFIX, ProgramSpec, _Builder, _safe
from popart._recompute import Marked, recompute_ops
from popart.dataflow import AnchorReturnType
from popart.options import RecomputationType, RecomputeType

from . import enums
from ._capture import RANDOM_OPS, Captured, Value
from ._translate import Translation, device_dtype, host_array
from .errors import Error


@dataclass
class TorchProgramSpec(ProgramSpec):
    captured: Optional[Captured] = None
    loss: Optional[Value] = None              # the final loss (training)
    anchor_values: Dict[str, Value] = field(default_factory=dict)  # output name -> captured Value
    settings: Dict = field(default_factory=dict)  # weights, and options the translation reads


class _Info:
    """Shape and type of a tensor known before the Ir is built (inference builds inline)."""

    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


class TorchBuilder(_Builder):
    def __init__(self, spec: TorchProgramSpec, ir: popxl.Ir):
        self.spec, self.ir = spec, ir
        self.captured: Captured = spec.captured
        self.state_updates = {}
        c = self.captured
        self.uses_random = any(n.packet.split("::")[-1] in RANDOM_OPS or
                               (spec.training and "attention" in n.packet) for n in c.nodes)
        self.weight_names = list(c.params) + list(c.buffers)
        self._weight_values = {**c.params, **c.buffers}

    # -- what the model is made of -------------------------------------------------------------------------------
    def _inference_shapes(self):
        c = self.captured
        self.data_inputs = {v.name: _Info(v.shape, device_dtype(v.dtype, v.name)) for v in c.inputs}
        self.weight_inputs = {n: _Info(v.shape, device_dtype(v.dtype, n)) for n, v in self._weight_values.items()}
        self.seed_input = True if self.uses_random else None  # the base class then makes the seed variable
        self.fwd_outputs = list(self.spec.anchor_values)
        self.fwd = None

    def _initial_weight(self, name) -> np.ndarray:
        return self.spec.settings["weights"][name]

    def _ipu_of_weight(self, name):
        if not self.spec.placement:
            return None
        vid = self._weight_values[name].id
        for n in self.captured.nodes:
            if any(v.id == vid for v in n.inputs()):
                return n.ipu
        return 0

    def _anchor_info(self, tid):
        if tid.startswith(GRAD_PREFIX):
            v = self.captured.params[tid[len(GRAD_PREFIX):]]
            return tuple(v.shape), device_dtype(v.dtype, tid)
        v = self.spec.anchor_values[tid]
        return tuple(v.shape), device_dtype(v.dtype, tid)

    def _tensor_infos(self):
        return {tid: self._anchor_info(tid) for tid in self.spec.anchor_values}

    def _grad_source(self, name):
        return self.weight_inputs[name]

    def grouping(self, name):
        """PopTorch's weights are the same on every replica (replicaGrouping is not supported)."""
        return None, None

    # -- the forward graph -------------------------------------------------------------------------------------------
    def _translation(self, seed) -> Translation:
        return Translation(self.captured, self.spec.training, seed=seed, placement=self.spec.placement,
                           options=self.spec.settings)

    def _bind(self, tr: Translation, data: Dict[str, popxl.Tensor], weights: Dict[str, popxl.Tensor]) -> None:
        for v in self.captured.inputs:
            tr.bind(v, data[v.name])
        for name, v in self._weight_values.items():
            tr.bind(v, weights[name])

    def _outputs(self, tr: Translation) -> Dict[str, popxl.Tensor]:
        outs = {}
        for name, v in self.spec.anchor_values.items():
            outs[name] = tr.tensor(v)
        return outs

    def _forward(self, ir: popxl.Ir):
        """Training: the captured forward pass as a subgraph, and its gradient graph."""
        spec, c = self.spec, self.captured
        fwd = ir.create_empty_graph("torch_forward")
        with fwd:
            self.data_inputs = {v.name: popxl.graph_input(v.shape, device_dtype(v.dtype, v.name), name=v.name)
                                for v in c.inputs}
            self.weight_inputs = {n: popxl.graph_input(v.shape, device_dtype(v.dtype, n), name=_safe(n))
                                  for n, v in self._weight_values.items()}
            self.seed_input = popxl.graph_input((2,), popxl.uint32, name="random_seed") if self.uses_random else None
            tr = self._translation(self.seed_input)
            self._bind(tr, self.data_inputs, self.weight_inputs)
            marked = []  # each node with the ops it became (what recomputation reads)
            for node in c.nodes:
                n0 = len(fwd._ops)
                tr.run([node])
                marked.append(_marked(node, fwd._ops[n0:]))
            named = self._outputs(tr)
            loss_name = "__loss__"
            named[loss_name] = tr.tensor(spec.loss)
            for w, v in c.state_updates.items():
                named[f"__state__{w}"] = tr.tensor(v)
            self.fwd_outputs = []
            seen = set(id(t) for t in list(self.data_inputs.values()) + list(self.weight_inputs.values()))
            for name, t in named.items():  # a graph input or a tensor output twice goes out through a copy
                popxl.graph_output(ops.identity(t) if id(t) in seen else t)
                seen.add(id(t))
                self.fwd_outputs.append(name)
        self.fwd = fwd
        self.tr = tr
        loss_t = fwd.outputs[self.fwd_outputs.index(loss_name)]
        if not loss_t.dtype.is_floating_point:
            raise Error(f"The loss must be a floating point tensor, not {loss_t.dtype.name}")
        self.trainable = [w for w in c.trainable if self.weight_inputs[w].dtype.is_floating_point]
        if not self.trainable:
            raise Error("The model has no parameters that require gradients: nothing to train (use "
                        "poptorch.inferenceModel, or set requires_grad=True on the parameters to train)")
        self.grad_of = list(self.trainable)
        required = [self.weight_inputs[w] for w in self.trainable]
        # the loss as the nodes made it (loss_t may be an output copy of it)
        recompute = recompute_ops(spec.recomputation, marked, tr.tensor(spec.loss))
        self.grad_request = (fwd, loss_t, required, recompute)  # differentiated once the variables exist
        self.loss_tensor = loss_t
        self.state_updates = {w: f"__state__{w}" for w in c.state_updates}

    def _translate_inline(self, data, get, seed=None) -> Dict[str, popxl.Tensor]:
        """Inference: the nodes go straight into the micro-batch graph."""
        tr = self._translation(seed)
        self._bind(tr, data, {n: get(self.weights[n]) for n in self._weight_values})
        tr.run(self.captured.nodes)
        outs = self._outputs(tr)
        # buffers the forward pass writes (`self.register_buffer("i", ...); self.i += 1`) keep their new
        # values on the device in inference too, as in PopTorch; eval-mode batch norm writes none
        for w, v in self.captured.state_updates.items():
            outs[f"__state__{w}"] = tr.tensor(v)
        self.state_updates = {w: f"__state__{w}" for w in self.captured.state_updates}
        return outs


# what PopART's Op::isNorm calls the ops these lower to (NormOnly recomputes them)
_NORM_PACKETS = frozenset({"native_batch_norm", "native_layer_norm", "native_group_norm"})


def _marked(node, ops_) -> Marked:
    """A captured node as recomputation sees it: poptorch.recomputationCheckpoint's identity is a
    checkpoint (PopTorch builds it with PopART's Builder.checkpointOutput)."""
    kind = node.packet.split("::")[-1]
    annotation = RecomputeType.Checkpoint if kind == "recomputation_checkpoint" else RecomputeType.Undefined
    return Marked(annotation.value, kind in _NORM_PACKETS, ops_)


def recomputation(popart_options: Dict, pipelined: bool, num_ipus: int) -> RecomputationType:
    """SessionOptions.autoRecomputation as PopTorch sets it: the user's
    ``Options._Popart.set("autoRecomputation", n)``, else Pipeline when a PipelinedExecution spans
    several IPUs (PopTorch's Compiler::initSession turns it on by default there), else none."""
    value = popart_options.get("autoRecomputation")
    if value is None:
        return RecomputationType.Pipeline if pipelined and num_ipus > 1 else RecomputationType.NoRecompute
    try:
        return RecomputationType(int(value))
    except (TypeError, ValueError):
        raise Error(f"Value for RecomputationType out of range: autoRecomputation={value!r}; use one of "
                    f"{', '.join(f'{int(t)} ({t.name})' for t in RecomputationType)}") from None


def build(spec: TorchProgramSpec):
    return popart_program.build(spec, TorchBuilder)


# -- output modes -> PopART anchor return types ---------------------------------------------------------------------

def anchor_type(mode: enums.OutputMode, period: int) -> AnchorReturnType:
    if mode == enums.OutputMode.All:
        return AnchorReturnType("All")
    if mode == enums.OutputMode.Final:
        return AnchorReturnType("Final")
    if mode == enums.OutputMode.Sum:
        return AnchorReturnType("Sum")
    if mode == enums.OutputMode.EveryN:
        return AnchorReturnType("EveryN", int(period))
    raise Error(f"Unknown output mode {mode}")


def weights_of(captured: Captured, model_state: Dict[str, "object"]) -> Dict[str, np.ndarray]:
    """The device arrays of the parameters and buffers (from the model's current host values)."""
    out = {}
    for name in list(captured.params) + list(captured.buffers):
        out[name] = host_array(model_state[name], f"parameter or buffer {name!r}")
    return out
