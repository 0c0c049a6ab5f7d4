"""The op table: every op type the popxl IR can hold, in one place.

An entry (`OpType`) names the op type, its family (the popxl/ops module that records it, and the
module of its rules in popxl/lowering/rules, popxl/transforms/grad_rules and popxl/reference/rules),
the attributes it records, and which rules it has: a lowering rule, a gradient rule (or none:
no gradient flows through it), a reference rule (the NumPy definition in `popxl.reference`).
`create_op` refuses an op type or attribute the table does not list, and
tests/frontend/test_op_table.py checks the three rule registries against the table.

Unary element-wise ops are table-driven: from a `UnaryOpType` entry come the lowering (a UnaryOp
vertex per piece with the entry's codelet op), the reference rule (the codelet's NumPy reference)
and, when the entry gives a derivative, the gradient rule. The built-in ones have their `popxl.ops`
functions written out in popxl/ops/elementwise.py; a unary entry registered later gets its
function (and its in-place `_` form) made. An entry may name a codelet of its own instead of a
UnaryOp op. docs/recipes.md has the recipe ("A unary op").

`python -m popxl.op_table erf` prints where each rule of an op type lives (popxl/_op_sources.py).

Ops from outside the package (a user's own op) register an entry the same way with
`register_op_type`, then their rules with `lowering_rule`, `grad_rule` and `reference_rule`.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable, Dict, List, Optional, Type, TypeVar

__all__ = ["OpType", "UnaryOpType", "BinaryOpType", "OP_TYPES", "COMMON_ATTRS", "register_op_type", "op_type",
           "on_register", "op_types", "check_op"]

# Attributes any op may carry: the names of the inputs present (ops with optional inputs), and the
# annotations transforms add (merge_exchange groups, autodiff's gradient sums).
COMMON_ATTRS = frozenset({"input_names", "merge_exchange", "grad_sum"})

GRADIENT_KINDS = ("rule", "none", "missing")


@dataclass(frozen=True)
class OpType:
    """One op type of the IR.

    gradient: "rule" (a gradient rule is registered), "none" (not differentiable: no gradient flows
    through it) or "missing" (differentiable, but autodiff has no rule yet).
    lowering / reference: whether a lowering rule / a reference rule exists for it.
    onnx: the ONNX op PopART translates to this one op ("Erf"; "ai.graphcore::Gelu" in another
    domain), or "" (tests/popart/test_onnx_names.py translates each).
    """
    name: str
    family: str
    attrs: frozenset = frozenset()
    gradient: str = "rule"
    lowering: bool = True
    reference: bool = True
    doc: str = ""
    onnx: str = ""

    def __post_init__(self):
        if not self.name or not self.name.isidentifier():
            raise ValueError(f"op type names are identifiers, not {self.name!r}")
        if self.gradient not in GRADIENT_KINDS:
            raise ValueError(f"op type {self.name!r}: gradient must be one of {GRADIENT_KINDS}, "
                             f"not {self.gradient!r}")
        object.__setattr__(self, "attrs", frozenset(self.attrs.split() if isinstance(self.attrs, str)
                                                     else self.attrs))


@dataclass(frozen=True)
class UnaryOpType(OpType):
    """A unary element-wise op: out = f(t), one UnaryOp vertex per piece of the output.

    codelet_op: the UnaryOp op (a name of codelets.elementwise.UNARY_OPS).
    codelet: the vertex type: "UnaryOp" (with `codelet_op` as its op), or a registered codelet of
    its own with fields `in` and `out` (a function UnaryOp lacks: its kernel, cost model and NumPy
    reference, which is then the op's reference; docs/recipes.md "A unary op").
    inputs: "float" (float16 / float32 only), "numeric" (any non-bool), "bool" (cast to bool first).
    output: "same" (the input's dtype) or "bool".
    inplace: the frontend also has `<name>_`, which updates its input.
    derivative: (x, y) -> dy/dx built with popxl ops, for the table-made gradient rule (None when
    the op has a gradient rule of its own, or none).
    """
    family: str = "elementwise"
    codelet_op: str = ""
    codelet: str = "UnaryOp"
    inputs: str = "float"
    output: str = "same"
    inplace: bool = False
    derivative: Optional[Callable] = field(default=None, compare=False)

    def __post_init__(self):
        super().__post_init__()
        if self.codelet != "UnaryOp" and self.codelet_op:
            raise ValueError(f"unary op {self.name!r}: codelet_op names a UnaryOp op; codelet {self.codelet!r} "
                             "takes none")
        if not self.codelet_op and self.codelet == "UnaryOp":
            object.__setattr__(self, "codelet_op", self.name)
        if self.inputs not in ("float", "numeric", "bool") or self.output not in ("same", "bool"):
            raise ValueError(f"unary op {self.name!r}: inputs is float / numeric / bool and output same / bool")
        if self.derivative is not None and self.gradient != "rule":
            raise ValueError(f"unary op {self.name!r} has a derivative, so its gradient is 'rule'")


@dataclass(frozen=True)
class BinaryOpType(OpType):
    """A binary element-wise op with NumPy broadcasting: one BinaryOp vertex per piece.

    codelet_op: the BinaryOp op (a name of codelets.elementwise.BINARY_OPS).
    kind: "arith" (same numeric dtype in and out), "compare" (same dtype, bool out), "logical"
    (inputs cast to bool, bool out).
    """
    family: str = "elementwise"
    codelet_op: str = ""
    kind: str = "arith"

    def __post_init__(self):
        super().__post_init__()
        if not self.codelet_op:
            object.__setattr__(self, "codelet_op", self.name)
        if self.kind not in ("arith", "compare", "logical"):
            raise ValueError(f"binary op {self.name!r}: kind is arith / compare / logical")


OP_TYPES: Dict[str, OpType] = {}
_HOOKS: List[tuple] = []  # (class, fn): fn(entry) for every entry of that class, now and later


def register_op_type(entry: OpType) -> OpType:
    """Add an op type to the table. A second entry of the same name is refused."""
    if not isinstance(entry, OpType):
        raise TypeError(f"register_op_type takes an OpType, not {type(entry).__name__}")
    if entry.name in OP_TYPES:
        raise ValueError(f"op type {entry.name!r} is already in the op table ({OP_TYPES[entry.name]})")
    if not entry.onnx and entry.name in _ONNX_NAMES:
        entry = replace(entry, onnx=_ONNX_NAMES[entry.name])
    OP_TYPES[entry.name] = entry
    for cls, fn in list(_HOOKS):
        if isinstance(entry, cls):
            fn(entry)
    return entry


def on_register(cls, fn: Callable) -> None:
    """Call fn(entry) for every registered entry of class `cls`, and for every later one (how the
    registries make the rules of table-driven ops)."""
    _HOOKS.append((cls, fn))
    for entry in list(OP_TYPES.values()):
        if isinstance(entry, cls):
            fn(entry)


def op_type(name: str) -> OpType:
    try:
        return OP_TYPES[name]
    except KeyError:
        raise KeyError(f"op type {name!r} is not in the op table (popxl/op_table.py). Register it with "
                       "popxl.op_table.register_op_type(OpType(name, family, attrs)).") from None


def unary_op_type(name: str) -> UnaryOpType:
    """The entry of unary element-wise op `name` (TypeError: it is another kind of op)."""
    return _entry_of_kind(name, UnaryOpType)


def binary_op_type(name: str) -> BinaryOpType:
    """The entry of binary element-wise op `name` (TypeError: it is another kind of op)."""
    return _entry_of_kind(name, BinaryOpType)


_Entry = TypeVar("_Entry", bound=OpType)


def _entry_of_kind(name: str, cls: Type[_Entry]) -> _Entry:
    entry = op_type(name)
    if not isinstance(entry, cls):
        raise TypeError(f"op type {name!r} is a {type(entry).__name__}, not a {cls.__name__}")
    return entry


def op_types(cls=OpType) -> List[OpType]:
    return [e for e in OP_TYPES.values() if isinstance(e, cls)]


def check_op(name: str, attrs) -> OpType:
    """The entry of an op about to be recorded; raises when its type or an attribute is unknown."""
    entry = OP_TYPES.get(name)
    if entry is None:
        raise ValueError(f"Cannot record an op of type {name!r}: it is not in the op table (popxl/op_table.py). "
                         "Register it first with popxl.op_table.register_op_type(OpType(...)).")
    extra = [a for a in attrs if a not in entry.attrs and a not in COMMON_ATTRS]
    if extra:
        raise ValueError(f"Op type {name!r} does not record the attribute(s) {sorted(extra)}: its op table entry "
                         f"lists {sorted(entry.attrs)}. Add them to the entry in popxl/op_table.py.")
    return entry


# ------------------------------------------------------------------------------------------------
# the built-in op types, by family (the popxl/ops module that records them)

# The ONNX op each built-in entry is: PopART translates a node of that ONNX op (default
# attributes) to one op of the entry (its `onnx` field).
_ONNX_NAMES = {
    "abs": "Abs", "ceil": "Ceil", "cos": "Cos", "exp": "Exp", "floor": "Floor", "log": "Log", "negate": "Neg",
    "relu": "Relu", "sign": "Sign", "sin": "Sin", "sqrt": "Sqrt", "tanh": "Tanh", "isnan": "IsNaN", "isinf": "IsInf",
    "logical_not": "Not", "sigmoid": "Sigmoid", "reciprocal": "Reciprocal", "erf": "Erf", "asin": "Asin",
    "gelu": "ai.graphcore::Gelu", "geluerf": "ai.graphcore::GeluErf", "swish": "ai.graphcore::Swish",
    "add": "Add", "sub": "Sub", "mul": "Mul", "div": "Div", "pow": "Pow", "equal": "Equal", "greater": "Greater",
    "less": "Less", "logical_and": "And", "logical_or": "Or", "maximum": "Max", "minimum": "Min", "where": "Where",
    "matmul": "MatMul", "identity": "Identity", "detach": "ai.graphcore::Detach",
}


def _ops(family: str, names: str, attrs: str = "", **kw) -> None:
    for n in names.split():
        register_op_type(OpType(n, family, frozenset(attrs.split()), **kw))


def _d_reciprocal(x, y):
    return -(y * y)


def _d_erf(x, y):
    import math

    from popxl import ops

    return ops.exp(-(x * x)) * (2.0 / math.sqrt(math.pi))


def _d_asin(x, y):
    from popxl import ops

    return ops.reciprocal(ops.sqrt(1.0 - x * x))  # PopART's AsinGrad: 1 / sqrt(1 - x^2)


# unary element-wise: the frontend, lowering and reference come from these entries
for _name, _inputs, _output, _inplace in (
        ("abs", "numeric", "same", False), ("ceil", "float", "same", False), ("cos", "float", "same", False),
        ("exp", "float", "same", True), ("floor", "float", "same", False), ("gelu", "float", "same", True),
        ("geluerf", "float", "same", True), ("log", "float", "same", False), ("negate", "numeric", "same", False),
        ("relu", "numeric", "same", True), ("sign", "numeric", "same", False), ("sin", "float", "same", False),
        ("sqrt", "float", "same", False), ("swish", "float", "same", True), ("tanh", "float", "same", False)):
    register_op_type(UnaryOpType(_name, inputs=_inputs, output=_output, inplace=_inplace))
for _name in ("isnan", "isinf", "isfinite"):
    register_op_type(UnaryOpType(_name, inputs="numeric", output="bool", gradient="none"))
register_op_type(UnaryOpType("logical_not", inputs="bool", output="bool", gradient="none"))
# ONNX / PopART element-wise ops beyond PopXL's API (popops has them as UnaryOp ops)
register_op_type(UnaryOpType("sigmoid", inplace=True, doc="1 / (1 + exp(-t)) (ONNX Sigmoid)"))  # gradient:
# grad_rules/elementwise.py, one NonLinearityGrad
register_op_type(UnaryOpType("reciprocal", derivative=_d_reciprocal, doc="1 / t (ONNX Reciprocal)"))
register_op_type(UnaryOpType("erf", derivative=_d_erf, doc="the error function (ONNX Erf)"))
register_op_type(UnaryOpType("asin", derivative=_d_asin, doc="the inverse sine (ONNX Asin, popops ASIN)"))

for _name, _kind, _grad in (("add", "arith", "rule"), ("sub", "arith", "rule"), ("mul", "arith", "rule"),
                            ("div", "arith", "rule"), ("fmod", "arith", "rule"), ("pow", "arith", "rule"),
                            ("equal", "compare", "none"), ("greater", "compare", "none"),
                            ("less", "compare", "none"), ("not_equal", "compare", "none"),
                            ("logical_and", "logical", "none"), ("logical_or", "logical", "none")):
    register_op_type(BinaryOpType(_name, kind=_kind, gradient=_grad))
register_op_type(BinaryOpType("minimum", codelet_op="min", doc="element-wise minimum (ONNX Min of two)"))
_ops("elementwise", "maximum where")
_ops("elementwise", "clip", "min max")
_ops("elementwise", "increment_mod", "increment modulus", gradient="none")
_ops("elementwise", "scaled_add", "a b")

_ops("reduce", "sum mean max min prod logsum logsumexp l1 l2 sumsquare median", "axes keepdims")
_ops("reduce", "argmax argmin", "axis keepdims", gradient="none")
_ops("reduce", "cumsum", "axis exclusive reverse")
_ops("reduce", "topk", "k axis largest sorted available_memory_proportion")

_ops("shape", "reshape", "shape")
_ops("shape", "transpose", "permutation")
_ops("shape", "slice", "axes starts stops steps index")
_ops("shape", "subsample", "strides")
_ops("shape", "concat", "axis view")
_ops("shape", "split", "axis splits")

_GATHER = "axis zero_OOR available_memory_proportion"
_ops("indexing", "gather tied_gather", _GATHER)
_ops("indexing", "grouped_gather", _GATHER + " group_size")
_ops("indexing", "scatter", "axis available_memory_proportion")
_SCATTER_REDUCE = "reduction axis axis_size group_size enable_index_broadcast available_memory_proportion"
_ops("indexing", "scatter_reduce", _SCATTER_REDUCE)
_ops("indexing", "grouped_scatter_reduce", _SCATTER_REDUCE, gradient="missing")
_ops("indexing", "dynamic_slice", "axes sizes no_overlap")
_ops("indexing", "dynamic_update", "axes sizes no_overlap")
_ops("indexing", "onehot", "num_classes axis")

_ops("matmul", "matmul", "output_type partials_type available_memory_proportion")

# float8 (inference only: autodiff refuses them, as PopXL has no float8 gradients)
_ops("matmul", "matmul_pow2scaled", "output_type partials_type available_memory_proportion", gradient="missing")
_ops("misc", "pow2scale_then_cast cast_then_pow2scale", "dtype", gradient="missing")

_CONV = "strides pads dilations groups pad_type available_memory_proportions partials_types enable_conv_dithering"
_ops("conv", "conv", _CONV)
_ops("conv", "conv_transpose", _CONV + " output_padding output_shape")
_ops("conv", "conv_pow2scaled", _CONV, gradient="missing")
_ops("conv", "conv_transpose_pow2scaled", _CONV + " output_padding output_shape", gradient="missing")
_ops("conv", "max_pool", "kernel_size strides pads dilations auto_pad ceil_mode storage_order")
_ops("conv", "average_pool", "kernel_size strides pads dilations auto_pad ceil_mode")
_ops("conv", "interpolate", "scale_factor mode nearest_mode coordinate_transformation_mode")
_ops("conv", "roi_align", "output_size spatial_scale sampling_ratio")
_ops("conv", "roi_align_grad", "output_size spatial_scale sampling_ratio", gradient="missing")
_ops("conv", "conv_weights_grad", "strides pads dilations groups kernel_shape", gradient="missing")

_ops("nn", "softmax", "axis")
_ops("nn", "group_norm", "num_groups epsilon")
_ops("nn", "batch_norm_inference", "epsilon momentum")
_ops("nn", "nll_loss", "reduction ignore_index log_prob")
_ops("nn", "nll_loss_with_softmax_grad", "reduction ignore_index")
_ops("nn", "lamb_square")
# internal ops autodiff and the PopART translation record (PopART's BatchNormOp / BatchNormGradOp
# in training, the popnn NonLinearityGrad of an activation)
_ops("nn", "batch_norm_training", "epsilon")
_ops("nn", "batch_norm_training_grad", "epsilon", gradient="missing")
_ops("nn", "nonlinearity_grad", "kind p0 p1", gradient="missing")

_ops("random", "random_uniform", "low high", gradient="none")
_ops("random", "random_normal", "mean std", gradient="none")
_ops("random", "create_random_seed", gradient="none")
_ops("random", "dropout", "ratio")
_ops("random", "shaped_dropout", "ratio shape")

_ops("misc", "cast", "dtype")
_ops("misc", "identity")
_ops("misc", "detach", gradient="none")
_ops("misc", "init", "init_type", gradient="none")
_ops("misc", "print_tensor", "title print_self print_gradient digits float_format separator open_bracket "
     "close_bracket max_line_width edge_items summarise_threshold")
_ops("misc", "histogram", "levels absolute_of_input", gradient="none")
_ops("misc", "io_tile_copy", "destination")
_ops("misc", "ipu_copy", "source destination")

_ops("host_io", "host_load host_store", "stream", gradient="none")
_ops("host_io", "remote_load remote_store", "remote_buffer", gradient="none")
_ops("host_io", "remote_code_load", "graph destination", gradient="none")

_ops("control", "call", "graph input_map by_ref")
_ops("control", "repeat", "graph input_map by_ref repeat_count num_carried")
_ops("control", "conditional", "then_branch else_branch then_input_map else_input_map")

_ops("collectives", "replicated_all_reduce", "op group")
_ops("collectives", "replicated_all_gather", "group output_shape")
_ops("collectives", "replicated_reduce_scatter", "op group configure_output_for_replicated_tensor_sharding")
_ops("collectives", "all_reduce", "op ipus identical_inputs identical_grad_inputs")
_ops("collectives", "rts_shard", "variable shard_over", gradient="none")

_ops("var_updates", "accumulate", "accumulation_type factor", gradient="none")
_ops("var_updates", "accumulator_scale", "factor", gradient="none")
_ops("var_updates", "sparse_accumulate", "axis accumulation_type factor", gradient="none")
_ops("var_updates", "adam_updater", "mode weight_decay beta1 beta2 epsilon", gradient="none")
_ops("var_updates", "adam_var_update", "learning_rate max_weight_norm", gradient="none")
_ops("var_updates", "copy_var_update", gradient="none")

BUILTIN_OP_TYPES = frozenset(OP_TYPES)

if __name__ == "__main__":  # python -m popxl.op_table erf: where each rule of the op lives
    import sys

    from popxl._op_sources import main

    sys.exit(main())
