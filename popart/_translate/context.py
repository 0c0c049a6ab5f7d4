"""The translation of an ONNX graph into popxl ops: the registry of rules and the per-node view.

One rule per ONNX op type (`@onnx_op("Relu")`), found by (domain, op type). A rule gets a
`Node`: its inputs as popxl tensors (`node.input(i)`) or as host constants (`node.const(i)`, for
shapes, axes, ...), its attributes with the schema's defaults (`node.attr(name)`), and returns
its outputs: popxl tensors, or NumPy arrays for values known on the host (constant folding, as
PopART's const-expr pass does). An op or attribute the rules do not handle is a `popart_exception`
that names it and the node.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np
import onnx

import popxl
import popxl.ops as ops

from ..errors import popart_exception

Rule = Callable[["Node"], Union[Sequence, "popxl.Tensor", np.ndarray]]
# (domain, op type) -> (rule, the attributes it understands)
RULES: Dict[Tuple[str, str], Tuple[Rule, frozenset]] = {}
GRAPHCORE = "ai.graphcore"
# attributes PopART puts on nodes for placement and scheduling; every rule accepts them
PLACEMENT_ATTRIBUTES = {"__ipu_number", "__pipeline_stage", "__execution_phase",
                        "__recompute_output_in_backward_pass", "__schedule_priority", "__inplace_op_priority",
                        "availableMemoryProportion", "partialsType", "serialize_matmul_mode", "enableConvDithering",
                        "__exclude_patterns", "__tile_set", "__output_tensor_location"}


def onnx_op(*op_types: str, domain: str = "", attrs: Sequence[str] = ()):
    """Register a rule for ONNX op types; `attrs` lists the attributes it understands (others are
    refused with an error naming them)."""
    def deco(fn):
        for t in op_types:
            if (domain, t) in RULES:
                raise ValueError(f"two translation rules for {domain or 'ai.onnx'}::{t}")
            RULES[(domain, t)] = (fn, frozenset(attrs))
        return fn
    return deco


def supported_ops() -> List[str]:
    return sorted(f"{d + '::' if d else ''}{t}" for d, t in RULES)


def unsupported_op(domain: str, op_type: str, node_name: str) -> popart_exception:
    """The error for a node no rule translates: PopART's own when PopART has no such ai.onnx op,
    the reason when the frontend refuses an op PopART has, else the list of supported ops."""
    from .popart_registry import NOT_TRANSLATED, POPART_ONNX_OPS, no_class_message

    if domain == "" and op_type not in POPART_ONNX_OPS or domain not in ("", GRAPHCORE):
        return popart_exception(no_class_message(domain or "ai.onnx", op_type, node_name))
    if domain == "" and op_type in NOT_TRANSLATED:
        return popart_exception(f"ONNX op {op_type} (node {node_name!r}): {NOT_TRANSLATED[op_type]}")
    return popart_exception(f"ONNX op {domain + '::' if domain else ''}{op_type} (node {node_name!r}) is not "
                            f"supported by the simulator's PopART frontend. Supported ops: "
                            f"{', '.join(supported_ops())}")


_NP_OF_ONNX = {onnx.TensorProto.FLOAT: np.float32, onnx.TensorProto.FLOAT16: np.float16,
               onnx.TensorProto.DOUBLE: np.float32, onnx.TensorProto.INT32: np.int32,
               onnx.TensorProto.INT64: np.int32, onnx.TensorProto.INT8: np.int8, onnx.TensorProto.UINT8: np.uint8,
               onnx.TensorProto.INT16: np.int16, onnx.TensorProto.UINT16: np.uint16,
               onnx.TensorProto.UINT32: np.uint32, onnx.TensorProto.UINT64: np.uint32,
               onnx.TensorProto.BOOL: np.bool_}


def device_numpy_type(onnx_elem_type: int) -> np.dtype:
    """The NumPy type a tensor of this ONNX type has on the IPU (64-bit types are narrowed to 32)."""
    try:
        return np.dtype(_NP_OF_ONNX[onnx_elem_type])
    except KeyError:
        raise popart_exception(f"ONNX data type {onnx.TensorProto.DataType.Name(onnx_elem_type)} is not supported "
                               f"on the IPU") from None


def to_device_array(arr: np.ndarray) -> np.ndarray:
    arr = np.asarray(arr)
    if arr.dtype == np.int64:
        return arr.astype(np.int32)
    if arr.dtype == np.uint64:
        return arr.astype(np.uint32)
    if arr.dtype == np.float64:
        return arr.astype(np.float32)
    return arr


class Node:
    """One ONNX node as its rule sees it."""

    def __init__(self, tr: "Translation", proto: onnx.NodeProto, version: int):
        self.tr, self.proto, self.version = tr, proto, version
        self.op_type, self.domain = proto.op_type, proto.domain if proto.domain != "ai.onnx" else ""
        self.name = proto.name or (proto.output[0] if proto.output else proto.op_type)
        self._attrs = {a.name: onnx.helper.get_attribute_value(a) for a in proto.attribute}
        self._schema = None
        if self.domain == "":
            try:
                self._schema = onnx.defs.get_schema(self.op_type, version, "")
            except Exception:
                self._schema = None

    # -- description ----------------------------------------------------------------------------
    def where(self) -> str:
        return f"{self.domain + '::' if self.domain else ''}{self.op_type} node {self.name!r}"

    def error(self, msg: str) -> popart_exception:
        return popart_exception(f"{self.where()}: {msg}")

    @property
    def num_outputs(self) -> int:
        return len(self.proto.output)

    def output_used(self, i: int) -> bool:
        return i < len(self.proto.output) and self.proto.output[i] != ""

    # -- inputs -----------------------------------------------------------------------------------
    @property
    def num_inputs(self) -> int:
        return len(self.proto.input)

    def has_input(self, i: int) -> bool:
        return i < len(self.proto.input) and self.proto.input[i] != ""

    def is_const(self, i: int) -> bool:
        return self.has_input(i) and self.proto.input[i] in self.tr.consts

    def input(self, i: int) -> Optional[popxl.Tensor]:
        if not self.has_input(i):
            return None
        return self.tr.tensor(self.proto.input[i])

    def inputs(self) -> List[popxl.Tensor]:
        return [self.input(i) for i in range(self.num_inputs) if self.has_input(i)]

    def const(self, i: int, what: str = "") -> np.ndarray:
        """The host value of input i; an error if it is only known on the device."""
        if not self.has_input(i):
            raise self.error(f"input {i} ({what or 'a constant'}) is missing")
        tid = self.proto.input[i]
        if tid in self.tr.consts:
            return self.tr.consts[tid]
        if tid in self.tr.initial_values:
            # an initializer (a weight): PopART reads its value when it builds the op, as here;
            # a weight read only this way is not a weight of the session (nothing on the device uses it)
            self.tr.read_at_compile_time.add(tid)
            return self.tr.initial_values[tid]
        raise self.error(f"input {i} ({what or 'tensor ' + repr(tid)}) must be a constant (a Constant node, an "
                         f"initializer, or computed from them); tensor {tid!r} is only known on the device: a "
                         f"model input or computed from one")

    def value(self, i: int) -> Union[popxl.Tensor, np.ndarray]:
        """Input i as a host constant when known, else as a popxl tensor."""
        if self.is_const(i):
            return self.tr.consts[self.proto.input[i]]
        return self.input(i)

    def input_shape(self, i: int) -> Tuple[int, ...]:
        tid = self.proto.input[i]
        if tid in self.tr.consts:
            return tuple(self.tr.consts[tid].shape)
        if tid not in self.tr.values and tid in self.tr.initial_values:
            return tuple(self.tr.initial_values[tid].shape)
        return tuple(self.input(i).shape)

    # -- attributes ----------------------------------------------------------------------------------
    def has_attr(self, name: str) -> bool:
        return name in self._attrs

    def attr(self, name: str, default=None):
        if name in self._attrs:
            v = self._attrs[name]
            return v.decode() if isinstance(v, bytes) else v
        if self._schema is not None and name in self._schema.attributes:
            dv = self._schema.attributes[name].default_value
            if dv is not None and dv.name:
                v = onnx.helper.get_attribute_value(dv)
                return v.decode() if isinstance(v, bytes) else v
        return default

    def check_attrs(self, understood: set) -> None:
        for a in self._attrs:
            if a not in understood and a not in PLACEMENT_ATTRIBUTES:
                raise self.error(f"attribute {a!r} is not supported (supported: {sorted(understood) or 'none'})")


class Translation:
    """Translates the nodes of one ONNX graph into the current popxl graph.

    `values` maps ONNX tensor ids to popxl tensors, `consts` to host values. `placement` (virtual
    graph mode Manual) puts each node on the IPU its `__ipu_number` attribute names, copying its
    inputs over first when they live on another IPU.
    """

    def __init__(self, opset: int, placement: bool = False, training: bool = False, seed_tensor=None):
        self.opset = opset
        self.values: Dict[str, popxl.Tensor] = {}
        self.consts: Dict[str, np.ndarray] = {}
        self.placement = placement
        self.training = training
        self.seed_tensor = seed_tensor  # a (2,) uint32 tensor for random ops (dropout)
        self._copies: Dict[Tuple[str, int], popxl.Tensor] = {}
        self._const_tensors: Dict[Tuple[str, Optional[int]], popxl.Tensor] = {}
        self.current_ipu: Optional[int] = None
        self.node_ipu: Dict[str, int] = {}  # ONNX tensor id -> IPU of the node that made it
        self.recompute: set = set()
        self._seeds = 0
        self.unsupported: Dict[str, str] = {}  # output id -> the node that cannot compute it
        # weights (floating-point initializers): their initial values, for inputs that must be known
        # when the op is built (Dropout's ratio, Clip's bounds, Pad's value, Resize's scales, ...),
        # and, for weights not made yet, how to make their device tensor at their first device use
        self.initial_values: Dict[str, np.ndarray] = {}
        self.read_at_compile_time: set = set()
        self.pending: Dict[str, Callable[[], popxl.Tensor]] = {}

    def next_seed(self) -> popxl.Tensor:
        """A fresh (2,) uint32 seed for one random op, derived from the session's seed."""
        if self.seed_tensor is None:
            raise popart_exception("A random op (Dropout) needs the session's random seed, which this translation "
                                   "has none of")
        self._seeds += 1
        return ops.create_random_seed(self.seed_tensor, popxl.constant(np.uint32(self._seeds), popxl.uint32))

    # -- tensors -------------------------------------------------------------------------------------
    def tensor(self, tid: str) -> popxl.Tensor:
        if tid not in self.values and tid in self.pending:
            self.values[tid] = self.pending.pop(tid)()
        if tid in self.values:
            t = self.values[tid]
            if self.current_ipu is not None and t._ipu is not None and t._ipu != self.current_ipu:
                key = (tid, self.current_ipu)
                if key not in self._copies:
                    self._copies[key] = ops.ipu_copy(t, self.current_ipu)
                return self._copies[key]
            return t
        if tid in self.consts:
            key = (tid, self.current_ipu)
            if key not in self._const_tensors:
                self._const_tensors[key] = popxl.constant(to_device_array(self.consts[tid]), name=_safe(tid))
            return self._const_tensors[key]
        if tid in self.unsupported:
            raise popart_exception(f"Tensor {tid!r}, an output of {self.unsupported[tid]}, is not supported: that "
                                   f"output cannot be computed (use the op's other outputs)")
        raise popart_exception(f"Tensor {tid!r} is used before it is computed (the ONNX graph is not in "
                               f"topological order, or the tensor does not exist)")

    def set_output(self, tid: str, value) -> None:
        if isinstance(value, np.ndarray) or np.isscalar(value):
            self.consts[tid] = np.asarray(value)
        elif isinstance(value, popxl.Tensor):
            self.values[tid] = value
        else:
            raise popart_exception(f"internal: a rule returned {type(value).__name__} for {tid!r}")

    # -- nodes ---------------------------------------------------------------------------------------------
    def run_node(self, proto: onnx.NodeProto) -> None:
        domain = proto.domain if proto.domain != "ai.onnx" else ""
        rule, understood = RULES.get((domain, proto.op_type), (None, frozenset()))
        node = Node(self, proto, self.opset)
        if rule is None:
            raise unsupported_op(domain, proto.op_type, node.name)
        node.check_attrs(understood)
        ipu = None
        if self.placement:
            ipu = node.attr("__ipu_number", None)
            if ipu is None:
                raise node.error("has no virtual graph (builder.virtualGraph) while virtualGraphMode is Manual: "
                                 "Either all Ops must have their virtual graph ids set, or none must")
        if node.attr("__recompute_output_in_backward_pass", 0) == 2:
            self.recompute.update(o for o in proto.output if o)
        folded = self._try_fold(node, rule)
        if folded is not None:
            outs = folded
        else:
            prev = self.current_ipu
            self.current_ipu = ipu
            try:
                with popxl.ipu(ipu) if ipu is not None else _null():
                    with popxl.name_scope(_safe(node.name)):
                        outs = rule(node)
            except popart_exception:
                raise
            except (ValueError, TypeError, NotImplementedError) as e:
                raise node.error(f"{e}") from e
            finally:
                self.current_ipu = prev
        if not isinstance(outs, (list, tuple)):
            outs = [outs]
        for tid, v in zip(proto.output, outs):
            if tid and v is not None:
                self.set_output(tid, v)
                if ipu is not None:
                    self.node_ipu[tid] = ipu
        # outputs a rule does not produce (optional outputs such as a mask) are an error only when used
        for tid, v in zip(proto.output, list(outs) + [None] * len(proto.output)):
            if tid and v is None:
                self.unsupported[tid] = node.where()

    def _try_fold(self, node: Node, rule):
        """Run the node on the host when every input is a constant (PopART's const-expr folding)."""
        if node.domain != "" or node.num_inputs == 0 and node.op_type not in ("Constant", "ConstantOfShape",
                                                                                   "Range"):
            return None
        if node.op_type in ("Dropout", "RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike",
                            "If", "Loop", "Scan"):  # random, or with subgraphs (the rule folds what it can)
            return None
        if not all(node.is_const(i) or not node.has_input(i) for i in range(node.num_inputs)):
            return None
        if node.op_type == "Constant":
            return None  # the rule reads the attribute
        return fold_with_reference(node)


def fuse_swish(nodes: Sequence[onnx.NodeProto], keep=()) -> List[onnx.NodeProto]:
    """The nodes with every x * Sigmoid(x) (PyTorch's SiLU, as its exporter writes it at opsets
    below 14) made one ai.graphcore Swish node, when nothing else reads the sigmoid (and it is not
    an output the caller keeps: `keep`): popnn's SWISH non-linearity, one element-wise op whose
    gradient needs only x, instead of a sigmoid and a product whose gradient keeps both."""
    nodes = list(nodes)
    readers: Dict[str, int] = {}
    for n in nodes:
        for i in n.input:
            readers[i] = readers.get(i, 0) + 1
    made = {o: n for n in nodes for o in n.output}
    keep = set(keep)
    fused, dropped = {}, set()
    for n in nodes:
        if n.op_type != "Mul" or n.domain not in ("", "ai.onnx") or len(n.input) != 2:
            continue
        for x, s in (tuple(n.input), tuple(reversed(n.input))):
            p = made.get(s)
            if (p is not None and p.op_type == "Sigmoid" and p.domain in ("", "ai.onnx") and p.input[0] == x
                    and readers.get(s, 0) == 1 and s not in keep and id(p) not in dropped):
                swish = onnx.helper.make_node("Swish", [x], list(n.output), name=n.name, domain=GRAPHCORE)
                swish.attribute.extend(a for a in n.attribute if a.name.startswith("__"))  # placement
                fused[id(n)] = swish
                dropped.add(id(p))
                break
    return [fused.get(id(n), n) for n in nodes if id(n) not in dropped]


def fold_with_reference(node: Node) -> List[np.ndarray]:
    """Evaluate one ONNX node on the host with onnx.reference."""
    from onnx.reference import ReferenceEvaluator

    p = node.proto
    ins = [t for t in p.input if t]
    feeds = {t: node.tr.consts[t] for t in ins}
    graph_inputs = [onnx.helper.make_tensor_value_info(t, onnx.helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
                    for t, v in feeds.items()]
    outs = [onnx.helper.make_empty_tensor_value_info(t) for t in p.output if t]
    clean = onnx.NodeProto()
    clean.CopyFrom(p)
    for a in list(clean.attribute):
        if a.name in PLACEMENT_ATTRIBUTES:
            clean.attribute.remove(a)
    g = onnx.helper.make_graph([clean], "fold", graph_inputs, outs)
    m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", node.version)])
    try:
        res = ReferenceEvaluator(m).run(None, feeds)
    except Exception as e:
        raise node.error(f"could not be evaluated on constant inputs: {e}") from e
    return [np.asarray(r) for r in res]


class _null:
    def __enter__(self):
        return None

    def __exit__(self, *a):
        return False


def _safe(name: str) -> str:
    return str(name).replace(":", "_")
