"""The popxl program of a PopART session: one `run` = batchesPerStep steps of accumulationFactor
micro-batches on every replica.

    main graph:   weights, optimizer state, accumulators (variables)
                  repeat batchesPerStep x  step graph           (inline when batchesPerStep == 1)
                  Final / Sum anchors -> host
    step graph:   repeat accumulationFactor x  micro graph      (inline when accumulationFactor == 1)
                  [training] gradients all-reduced over replicas, optimizer update, accumulators zeroed
    micro graph:  inputs <- host; call the ONNX forward graph;
                  [training] call its gradient graph (popxl autodiff; the ops recomputation picks,
                  _recompute.py, run again in it), accumulate the gradients;
                  All / EveryN anchors -> host, Final / Sum anchors kept in variables

The ONNX graph itself is translated once into a popxl subgraph ("onnx_forward", see _translate)
that every micro-batch calls. Subgraphs take every variable they touch by reference.
"""
from __future__ import annotations

import functools

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Optional, Tuple

import numpy as np
import onnx

import popxl
import popxl.ops as ops
import popxl.transforms as transforms
from popxl.ops import var_updates
from popxl.transforms.autodiff import OuterInputs, autodiff_recomputing

from ._model import ModelIO, onnx_opset
from ._optimizer_updates import OptimizerState, grouped_zeros
from ._translate import Translation
from ._translate.context import device_numpy_type, fuse_swish, to_device_array
from ._translate.nn import RANDOM_GENERATORS
from popxl.lowering.context import lower_inline
from .dataflow import AnchorReturnType, AnchorReturnTypeId
from .errors import popart_exception
from ._recompute import from_onnx, recompute_ops
from .options import RecomputationType, ReductionType, SyntheticDataMode, VariableRetrievalMode
from .tensorinfo import onnx_type

GRAD_PREFIX = "Gradient___"


def _safe(name: str) -> str:
    return name.replace(":", "_").replace("/", "_")


@dataclass
class ProgramSpec:
    model: onnx.ModelProto
    io: ModelIO
    anchors: Dict[str, AnchorReturnType]
    bps: int
    af: int
    rf: int
    training: bool = False
    loss: Optional[str] = None
    optimizer: object = None
    placement: bool = False
    reduction: ReductionType = ReductionType.Sum
    synthetic: SyntheticDataMode = SyntheticDataMode.Off
    distributed: bool = False  # replicas over several PopRun instances (rf is this instance's)
    global_rf: int = 1
    clip_norm: Optional[float] = None  # gradient clipping by global norm (PopTorch's max_grad_norm)
    recomputation: RecomputationType = RecomputationType.NoRecompute  # SessionOptions.autoRecomputation


@dataclass
class Program:
    ir: popxl.Ir
    in_streams: Dict[str, popxl.HostToDeviceStream]
    anchor_streams: Dict[str, popxl.DeviceToHostStream]
    weights: Dict[str, popxl.Variable]
    opt_state: Optional[OptimizerState]
    seed: Optional[popxl.Variable]
    tensor_infos: Dict[str, Tuple[Tuple[int, ...], popxl.dtype]] = field(default_factory=dict)
    counts: Dict[str, int] = field(default_factory=dict)  # anchor -> transfers per replica per run
    updated_in_backward: frozenset = frozenset()  # weights whose optimizer ops run in the backward pass


class _Scope:
    """Maps main-graph variables to the tensors standing for them in the graph being built."""

    def __init__(self, mapping: Optional[Dict] = None):
        self.mapping = mapping

    def __call__(self, v):
        if self.mapping is None:
            return v
        return self.mapping[v]


def build(spec: ProgramSpec, builder_class=None) -> Program:
    """The popxl program of `spec`. `builder_class` (a `_Builder` subclass) supplies the model's
    forward graph: PopART's translates the ONNX graph, PopTorch's (poptorch/_program.py) a
    captured PyTorch model; the loops, anchors, gradients and optimizer are shared."""
    ir = popxl.Ir(replication="popdist") if spec.distributed else popxl.Ir(replication=spec.rf)
    builder = (builder_class or _Builder)(spec, ir)
    if not spec.training:
        builder._inference_shapes()
    with ir.main_graph, popxl.in_sequence(True):
        builder.build()
    return builder.program


class _Builder:
    """Builds the Ir. The model-specific methods (`_forward`, `_translate_inline`,
    `_initial_weight`, `_ipu_of_weight`, `_grad_source`, `_tensor_infos`) read the ONNX model; a
    subclass replaces them for another source of forward graphs. What they set for the rest:
    data_inputs / weight_inputs (name -> graph input), fwd_outputs (names of the forward graph's
    outputs), trainable (the weights that get gradients), state_updates (weight -> name of the
    forward output that is its new value after each micro-batch, e.g. running statistics)."""

    def __init__(self, spec: ProgramSpec, ir: popxl.Ir):
        self.spec, self.ir = spec, ir
        self.io = spec.io
        self.opset = onnx_opset(spec.model)
        self.state_updates: Dict[str, str] = {}

    def _inference_shapes(self):
        """Shapes and checks from a scratch Ir before the real one is built (inference translates
        the model inline, into the micro-batch graph, so the anchors' shapes are needed first)."""
        scratch = popxl.Ir()
        with scratch.main_graph:
            self._forward(scratch)

    # -- 1. the forward graph (and its gradient graph) ---------------------------------------------------
    def _forward(self, ir: popxl.Ir):
        """Translate the ONNX graph into a subgraph of `ir` (called by every micro-batch when
        training; when not, a scratch Ir's, for shapes and checks: inference translates inline)."""
        spec, io = self.spec, self.io
        weight_ids = [t for t in io.initializers if io.is_weight(t)]
        has_random = any(n.op_type in RANDOM_GENERATORS or spec.training and n.op_type in ("Dropout", "ShapedDropout")
                         for n in spec.model.graph.node)
        fwd = ir.create_empty_graph("onnx_forward")
        tr = Translation(self.opset, placement=spec.placement, training=spec.training)
        with fwd:
            self.data_inputs = {}
            for name, info in io.inputs:
                dt = popxl.dtypes.dtype.as_dtype(device_numpy_type(onnx_type(info.data_type())))
                self.data_inputs[name] = popxl.graph_input(info.shape(), dt, name=_safe(name))
                tr.values[name] = self.data_inputs[name]
            for name in weight_ids:  # a weight's graph input is made at its first use on the device
                tr.initial_values[name] = io.initializers[name]
                tr.pending[name] = functools.partial(self._weight_input, name)
            for name, arr in io.initializers.items():
                if name not in tr.initial_values:
                    tr.consts[name] = arr
            self.initializer_consts = dict(tr.consts)
            self.seed_input = None
            if has_random:
                self.seed_input = popxl.graph_input((2,), popxl.uint32, name="random_seed")
                tr.seed_tensor = self.seed_input
            node_ops = []  # each node with the ops it became (what recomputation annotates)
            for node in self._nodes():
                n0 = len(fwd._ops)
                tr.run_node(node)
                node_ops.append((node, fwd._ops[n0:]))
            for name in weight_ids:  # unused weights stay weights; those only read when ops were built do not
                if name in tr.pending and (name not in tr.read_at_compile_time or name in spec.anchors
                                           or GRAD_PREFIX + name in spec.anchors):
                    tr.tensor(name)
            self.weight_inputs = {name: tr.values[name] for name in weight_ids if name in tr.values}
            # what the rest of the program reads of the forward graph
            self.fwd_outputs: List[str] = []
            wanted = list(spec.anchors)
            if spec.training:
                if spec.loss is None:
                    raise popart_exception("TrainingSession needs a loss tensor id")
                wanted = [spec.loss] + wanted
            for tid in wanted:
                if tid.startswith(GRAD_PREFIX) or tid in self.data_inputs or tid in self.weight_inputs:
                    continue
                if tid in self.fwd_outputs:
                    continue
                if tid not in tr.values and tid not in tr.consts:
                    raise popart_exception(f"Tensor {tid!r} (anchored{' loss' if tid == spec.loss else ''}) is not in "
                                           f"the model; tensors it has include {_some(tr)}")
                t = tr.tensor(tid) if tid in tr.values else popxl.constant(to_device_array(tr.consts[tid]), name=_safe(tid))
                popxl.graph_output(ops.identity(t) if t in self.data_inputs.values() else t)
                self.fwd_outputs.append(tid)
        self.tr, self.fwd = tr, fwd
        self.bwd = None
        if spec.training:
            loss_t = fwd.outputs[self.fwd_outputs.index(spec.loss)]
            if loss_t.nelms != 1:
                raise popart_exception(f"The loss {spec.loss!r} must be a scalar (shape {loss_t.shape}); reduce it "
                                       f"with a loss op's reduction (popart.ReductionType.Mean or Sum)")
            if not loss_t.dtype.is_floating_point:
                raise popart_exception(f"The loss {spec.loss!r} must be floating point, not {loss_t.dtype.name}")
            grad_ids = [t[len(GRAD_PREFIX):] for t in spec.anchors if t.startswith(GRAD_PREFIX)]
            for g in grad_ids:
                if g not in tr.values:
                    raise popart_exception(f"Gradient anchor {GRAD_PREFIX + g!r}: {g!r} is not a weight, an input or a "
                                           f"tensor computed on the device by the model")
                if not tr.values[g].dtype.is_floating_point:
                    raise popart_exception(f"Gradient anchor {GRAD_PREFIX + g!r}: {g!r} is {tr.values[g].dtype.name}; "
                                           f"only floating-point tensors have gradients")
            self.trainable = list(self.weight_inputs)
            self.grad_of = self.trainable + [g for g in grad_ids if g not in self.weight_inputs]
            required = [tr.values[w] for w in self.grad_of]
            recompute = recompute_ops(spec.recomputation, from_onnx(node_ops), loss_t)
            self.grad_request = (fwd, loss_t, required, recompute)  # differentiated once the variables exist
            self.loss_tensor = loss_t

    def _differentiate(self):
        """The gradient graph. When each weight's update can run as soon as its gradient is whole (one
        micro-batch per step, one replica on one IPU, no clipping over all gradients, no weight
        anchored: `_updates_in_backward`), the optimizer's ops go into the gradient graph right there,
        as PopART's scheduler places a VarUpdate next to the gradient it consumes, so a weight's
        gradient is not held through the rest of the backward pass; otherwise they follow it (`_step`)."""
        fwd, loss_t, required, recompute = self.grad_request
        self.bwd_outer = None
        if not self._updates_in_backward():
            if recompute:
                self.bwd = autodiff_recomputing(fwd, [loss_t], required, recompute)
            else:
                self.bwd = transforms.autodiff(fwd, grads_provided=[loss_t], grads_required=required)
            return
        outer = OuterInputs()
        weight_of = {self.weight_inputs[w]: w for w in self.trainable}
        scale = 1.0 / self.spec.optimizer.lossScaling().val()  # one micro-batch, one replica: Sum and Mean agree

        def update(t, g):
            w = weight_of.get(t)
            if w is not None:
                self.opt_state.apply(outer, w, g, scale)
                self.updated_early.add(w)

        self.bwd = autodiff_recomputing(fwd, [loss_t], required, recompute, on_gradient=update, outer=outer)
        self.bwd_outer = outer

    def _updates_in_backward(self) -> bool:
        spec = self.spec
        return (spec.af == 1 and self._replicas() == 1 and spec.clip_norm is None and not spec.placement
                and spec.optimizer.lossScaling().isConst() and not any(a in self.weights for a in spec.anchors)
                and all(self.weights[w]._ipu is None for w in self.trainable))

    def _weight_input(self, name: str) -> popxl.Tensor:
        arr = to_device_array(self.io.initializers[name])
        shape = arr.shape
        settings = self.io.variable_settings.get(name)
        if settings is not None:  # the initializer holds one value per group: a replica sees one
            shape = tuple(settings.shapeOnReplica(shape, self._replicas(), name))
        return popxl.graph_input(shape, popxl.dtypes.dtype.as_dtype(arr.dtype), name=_safe(name))

    def _replicas(self) -> int:
        return max(self.spec.rf, self.spec.global_rf)

    def grouping(self, name: str):
        """(popxl ReplicaGrouping, retrieval mode) of a weight made with VariableSettings, else (None, None)."""
        settings = self.io.variable_settings.get(name)
        if settings is None:
            return None, None
        stride, size = settings._stride_size(self._replicas())
        mode = "all_replicas" if settings.getRetrievalMode() == VariableRetrievalMode.AllReplicas else "one_per_group"
        return self.ir.replica_grouping(stride=stride, group_size=size), mode

    # -- 2. variables ------------------------------------------------------------------------------------------
    def _variables(self):
        spec = self.spec
        self.weights: Dict[str, popxl.Variable] = {}
        for name in self.weight_inputs:
            ipu = self._ipu_of_weight(name)
            rg, mode = self.grouping(name)
            with popxl.ipu(ipu) if ipu is not None else _null():
                self.weights[name] = popxl.variable(self._initial_weight(name), name=_safe(name),
                                                    replica_grouping=rg, retrieval_mode=mode)
        self.opt_state = None
        self.accums: Dict[str, popxl.Variable] = {}
        if spec.training:
            self.opt_state = OptimizerState(spec.optimizer, {w: self.weights[w] for w in self.trainable})
            if spec.af > 1:
                for w in self.trainable:
                    self.accums[w] = grouped_zeros(self.weights[w], f"Accum___{_safe(w)}")
        self.seed = None
        if self.seed_input is not None or self.spec.synthetic in (SyntheticDataMode.RandomNormal,
                                                                   SyntheticDataMode.RandomUniform):
            self.seed = popxl.variable(np.array([1, 2], np.uint32), popxl.uint32, name="randomSeed___")
        # anchors kept on the device between transfers
        self.anchor_vars: Dict[str, popxl.Variable] = {}
        self.counters: Dict[str, popxl.Variable] = {}
        for tid, art in spec.anchors.items():
            shape, dt = self._anchor_info(tid)
            if art.id() in (AnchorReturnTypeId.Final, AnchorReturnTypeId.Sum):
                self.anchor_vars[tid] = popxl.variable(np.zeros(shape, dt.as_numpy()), name=f"anchor_{_safe(tid)}")
            elif art.id() == AnchorReturnTypeId.EveryN and art.rp() > 1:
                if spec.bps % art.rp():
                    raise popart_exception(f"Anchor {tid!r}: EveryN period {art.rp()} does not divide batchesPerStep "
                                           f"{spec.bps}")
                self.counters[tid] = popxl.variable(np.zeros((), np.int32), popxl.int32, name=f"counter_{_safe(tid)}")

    def _initial_weight(self, name) -> np.ndarray:
        return to_device_array(self.io.initializers[name])

    def _ipu_of_weight(self, name):
        if not self.spec.placement:
            return None
        for node in self.spec.model.graph.node:
            if name in node.input:
                for a in node.attribute:
                    if a.name == "__ipu_number":
                        return int(a.i)
        return None

    def _anchor_info(self, tid):
        if tid.startswith(GRAD_PREFIX):
            base = tid[len(GRAD_PREFIX):]
            if not self.spec.training:
                raise popart_exception(f"Gradient anchor {tid!r} needs a TrainingSession")
            src = self._grad_source(base)
            return src.shape, src.dtype
        if tid in self.data_inputs:
            return self.data_inputs[tid].shape, self.data_inputs[tid].dtype
        if tid in self.weight_inputs:
            return self.weight_inputs[tid].shape, self.weight_inputs[tid].dtype
        t = self.fwd.outputs[self.fwd_outputs.index(tid)]
        return t.shape, t.dtype

    def _grad_source(self, name) -> popxl.Tensor:
        """The forward-graph tensor whose gradient the anchor Gradient___<name> holds."""
        return self.tr.values[name]

    def state_vars(self) -> List[popxl.Variable]:
        vs = list(self.weights.values()) + list(self.accums.values())
        if self.opt_state is not None:
            vs += self.opt_state.variables()
        if self.seed is not None:
            vs.append(self.seed)
        vs += list(self.anchor_vars.values()) + list(self.counters.values())
        return vs

    # -- 3. the loops ------------------------------------------------------------------------------------------
    def build(self):
        spec = self.spec
        self.updated_early: set = set()  # weights whose optimizer ops run in the backward pass (_differentiate)
        if spec.training:
            self._forward(self.ir)
        self._variables()
        if spec.training:
            self._differentiate()
        self.in_streams = {}
        if spec.synthetic == SyntheticDataMode.Off:
            for name, t in self.data_inputs.items():
                self.in_streams[name] = popxl.h2d_stream(t.shape, t.dtype, name=_safe(name))
        self.anchor_streams = {}
        for tid in spec.anchors:
            shape, dt = self._anchor_info(tid)
            self.anchor_streams[tid] = popxl.d2h_stream(shape, dt, name=f"anchor_{_safe(tid)}")
        for tid, var in self.anchor_vars.items():
            if spec.anchors[tid].id() == AnchorReturnTypeId.Sum:
                var_updates.accumulator_zero_(var)
        main = _Scope()
        if spec.bps == 1:
            self._step(main)
        else:
            g = self._subgraph("step", self._step)
            ops.repeat(g, spec.bps, *self.state_vars())
        for tid, var in self.anchor_vars.items():
            ops.host_store(self.anchor_streams[tid], var)
        self.ir.num_host_transfers = spec.bps * spec.af
        counts = {}
        for tid, art in spec.anchors.items():
            k = art.id()
            counts[tid] = (spec.bps * spec.af if k == AnchorReturnTypeId.All else
                           spec.bps // art.rp() * spec.af if k == AnchorReturnTypeId.EveryN else 1)
        self.program = Program(self.ir, self.in_streams, self.anchor_streams, self.weights, self.opt_state, self.seed,
                               counts=counts, updated_in_backward=frozenset(self.updated_early))
        self.program.tensor_infos = self._tensor_infos()

    def _subgraph(self, name: str, body: Callable[[_Scope], None]) -> popxl.Graph:
        g = self.ir.create_empty_graph(name)
        with g:
            mapping = {v: popxl.graph_input(v.shape, v.dtype, name=v.name, by_ref=True) for v in self.state_vars()}
            body(_Scope(mapping))
        return g

    def _step(self, get: _Scope):
        spec = self.spec
        if spec.af == 1:
            grads = self._micro(get)
        else:
            g = self._subgraph("micro_batch", self._micro)
            ops.repeat(g, spec.af, *[get(v) for v in self.state_vars()])
            grads = {w: get(self.accums[w]) for w in self.trainable}
        if not spec.training:
            return
        ls = spec.optimizer.lossScaling()
        if not ls.isConst():
            raise popart_exception("A non-constant loss scaling is not supported yet; give lossScaling as (value, True)")
        scale = 1.0 / ls.val()
        if spec.reduction == ReductionType.Mean:
            scale /= spec.af * max(spec.rf, spec.global_rf)
        elif spec.reduction != ReductionType.Sum:
            raise popart_exception(f"accumulationAndReplicationReductionType {spec.reduction} is not supported; use "
                                   f"ReductionType.Sum or Mean")
        grads = {w: g for w, g in grads.items() if w not in self.updated_early}  # updated in the backward pass
        w_scales = {}
        for w, g in list(grads.items()):
            with self._on_ipu_of(w):
                rg, _ = self.grouping(w)  # a grouped weight's gradient is reduced over its group only
                if max(spec.rf, spec.global_rf) > 1 and (rg is None or rg.group_size > 1):
                    grads[w] = ops.collectives.replicated_all_reduce(g, op="add", group=rg)
                w_scales[w] = scale
                if rg is not None and spec.reduction == ReductionType.Mean:
                    w_scales[w] = scale * self._replicas() / rg.group_size
        if spec.clip_norm is not None:
            factor = self._clip_factor(grads, w_scales, spec.clip_norm)
            w_scales = {w: ops.mul(factor, popxl.constant(np.float32(sc))) for w, sc in w_scales.items()}
        for w, g in grads.items():
            with self._on_ipu_of(w):
                self.opt_state.apply(get, w, g, w_scales[w])
                if spec.af > 1:
                    var_updates.accumulator_zero_(get(self.accums[w]))

    def _on_ipu_of(self, w: str):
        ipu = self.weights[w]._ipu
        return popxl.ipu(ipu) if ipu is not None else _null()

    @staticmethod
    def _clip_factor(grads: Dict[str, popxl.Tensor], scales: Dict[str, float], max_norm: float) -> popxl.Tensor:
        """Gradient clipping by global norm (PopART's clipNormSettings.clipAllWeights): the true
        gradients (g * scales[w]) are to be scaled by max_norm / max(norm, max_norm), norm the 2-norm
        of all of them together; returns that factor."""
        total = None
        for w, g in grads.items():
            gf = g if g.dtype == popxl.float32 else ops.cast(g, popxl.float32)
            sq = ops.sum(ops.mul(gf, gf)) if gf.rank else ops.mul(gf, gf)
            sq = ops.mul(sq, popxl.constant(np.float32(scales[w]) ** 2))
            total = sq if total is None else ops.add(total, sq)
        norm = ops.sqrt(total)
        limit = popxl.constant(np.float32(max_norm))
        return ops.div(limit, ops.maximum(norm, limit))

    def _micro(self, get: _Scope) -> Dict[str, popxl.Tensor]:
        spec = self.spec
        data = {}
        seed_use = None
        if self.seed is not None:  # one fresh seed per micro-batch for dropout and synthetic data
            seed = get(self.seed)
            seed_use, nxt = ops.split_random_seed(seed)
            var_updates.copy_var_update_(seed, nxt)
        for k, (name, t) in enumerate(self.data_inputs.items()):
            if spec.synthetic == SyntheticDataMode.Off:
                data[name] = ops.host_load(self.in_streams[name], name=_safe(name))
            elif spec.synthetic == SyntheticDataMode.Zeros or not t.dtype.is_floating_point:
                data[name] = ops.init(t.shape, t.dtype, _safe(name), "zero")
            else:  # device-side data, no host transfer: N(0, 1) or U[0, 1)
                s = ops.create_random_seed(seed_use, popxl.constant(np.uint32(1000 + k), popxl.uint32))
                fn = ops.random_normal if spec.synthetic == SyntheticDataMode.RandomNormal else ops.random_uniform
                data[name] = fn(s, t.shape, dtype=t.dtype)
        if not spec.training:
            outs = self._translate_inline(data, get, seed_use)
        else:
            args = {t: data[n] for n, t in self.data_inputs.items()}
            args.update({t: get(self.weights[w]) for w, t in self.weight_inputs.items()})
            if self.seed_input is not None:
                args[self.seed_input] = seed_use
            lower_inline(self.fwd)  # PopART's forward pass is ops of its main graph, not a called subgraph
            info = ops.call_with_info(self.fwd, inputs_dict=args)
            outs = dict(zip(self.fwd_outputs, info.outputs))
        for w, name in self.state_updates.items():  # weights the forward pass changes (not trained)
            var_updates.copy_var_update_(get(self.weights[w]), outs[name])
        grads: Dict[str, popxl.Tensor] = {}
        if spec.training:
            ls = float(spec.optimizer.getLossScalingVal())
            dloss = popxl.constant(np.full(self.loss_tensor.shape, ls, self.loss_tensor.dtype.as_numpy()),
                                   name="loss_scaling")
            lower_inline(self.bwd.graph)
            args = self.bwd.inputs_dict(info)
            if self.bwd_outer is not None:  # the weights and optimizer state the gradient graph updates
                args.update({t: get(v) for v, t in self.bwd_outer.inputs.items()})
            gouts = ops.call(self.bwd.graph, dloss, inputs_dict=args)
            grads = dict(zip(self.grad_of, gouts))
            if spec.af > 1:
                for w in self.trainable:
                    var_updates.accumulate_(get(self.accums[w]), grads[w])
        # anchors
        for tid, art in spec.anchors.items():
            if tid.startswith(GRAD_PREFIX):
                value = grads[tid[len(GRAD_PREFIX):]]
            elif tid in data:
                value = data[tid]
            elif tid in self.weights:
                value = get(self.weights[tid])
            else:
                value = outs[tid]
            self._anchor(get, tid, art, value)
        return {w: grads[w] for w in self.trainable} if spec.training else {}

    def _nodes(self):
        """The model's nodes to translate, x * Sigmoid(x) fused into Swish (unless the sigmoid is
        anchored or a graph output)."""
        keep = set(self.spec.anchors) | {o.name for o in self.spec.model.graph.output}
        if self.spec.loss:
            keep.add(self.spec.loss)
        return fuse_swish(self.spec.model.graph.node, keep)

    def _translate_inline(self, data, get, seed=None) -> Dict[str, popxl.Tensor]:
        """Inference: the ONNX graph's ops go straight into the graph being built (no subgraph
        call, so no copies of the inputs and weights into one). `seed`: this micro-batch's
        random seed, when the model has random ops."""
        tr = Translation(self.opset, placement=self.spec.placement, training=False, seed_tensor=seed)
        tr.values.update(data)
        for w in self.weight_inputs:
            tr.values[w] = get(self.weights[w])
        tr.initial_values.update({w: a for w, a in self.tr.initial_values.items() if w not in self.weight_inputs})
        tr.consts.update(self.initializer_consts)
        for node in self._nodes():
            tr.run_node(node)
        outs = {}
        for tid in self.fwd_outputs:
            outs[tid] = tr.tensor(tid) if tid in tr.values else popxl.constant(to_device_array(tr.consts[tid]),
                                                                                name=_safe(tid))
        return outs

    def _anchor(self, get, tid, art, value):
        k = art.id()
        stream = self.anchor_streams[tid]
        if k == AnchorReturnTypeId.All or (k == AnchorReturnTypeId.EveryN and art.rp() == 1):
            ops.host_store(stream, value)
        elif k == AnchorReturnTypeId.Final:
            var_updates.copy_var_update_(get(self.anchor_vars[tid]), value)
        elif k == AnchorReturnTypeId.Sum:
            var_updates.accumulate_(get(self.anchor_vars[tid]), value)
        else:  # EveryN: store during the last step of every N (all its micro-batches)
            n, af = art.rp(), self.spec.af
            counter = get(self.counters[tid])
            cond = ops.greater(counter, popxl.constant(np.int32((n - 1) * af - 1)))
            then_g = self.ir.create_empty_graph(f"store_{_safe(tid)}")
            with then_g:
                x = popxl.graph_input(value.shape, value.dtype, name="value")
                ops.host_store(stream, x)
            else_g = self.ir.create_empty_graph(f"skip_{_safe(tid)}")
            with else_g:
                popxl.graph_input(value.shape, value.dtype, name="value")
            ops.conditional(cond, then_g, else_g, [value], [value])
            ops.increment_mod_(counter, 1, n * af)

    def _tensor_infos(self):
        infos = {}
        for name, t in self.data_inputs.items():
            infos[name] = (t.shape, t.dtype)
        for name, t in self.weight_inputs.items():
            infos[name] = (t.shape, t.dtype)
        for tid, t in self.tr.values.items():
            infos.setdefault(tid, (t.shape, t.dtype))
        for tid, arr in self.tr.consts.items():
            a = to_device_array(arr)
            infos.setdefault(tid, (tuple(a.shape), popxl.dtypes.dtype.as_dtype(a.dtype)))
        if self.spec.training:
            for w in self.grad_of:
                infos[GRAD_PREFIX + w] = infos[w]
        return infos


def _some(tr) -> str:
    names = list(tr.values)[:8]
    return ", ".join(repr(n) for n in names) + (" ..." if len(tr.values) > 8 else "")


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False
