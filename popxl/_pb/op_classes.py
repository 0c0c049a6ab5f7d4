"""The op classes of `popart._internal.ir.op` (`_ir.op.AddOp`, `_ir.op.collectives.ReplicatedAllGatherOp`,
`_ir.op.exchange.HostLoadOp`, ...): for every popxl op type, the class and op type name PopART gives
the op PopXL creates for it, out of place and in place (`ops.add` makes an `AddOp` of type "Add",
`ops.add_` an `AddLhsInplaceOp` of type "AddLhsInplace").

The names come from PopXL's op functions (`createConnectedOp_<Class>` and the OperatorIdentifier
each one builds) and PopART's op headers. An op type PopXL builds from several PopART ops, or
that PopART has no op for (our own `rts_shard`), gets the CamelCase of its popxl name.
Scripts count and inspect the ops of a graph by class: `isinstance(op, _ir.op.GatherOp)` and
`op.opType() == "Gather"` hold for the view of every op `ops.gather` records.
"""
from __future__ import annotations

from typing import Dict, NamedTuple, Optional, Tuple

from . import ops as _special
from .views import Op


class Names(NamedTuple):
    op_type: str                    # PopART's op type ("Add")
    inplace: Optional[str] = None   # the op type of the in-place form ("AddLhsInplace"), if popxl has one
    cls: Optional[str] = None       # the class when it is not op_type + "Op" ("SubtractOp" for "Sub")
    module: str = ""                # "", "exchange", "collectives" or "dynamic": where `_ir.op` holds the class


def _unary(name: str, inplace: bool = False) -> Names:
    return Names(name, f"{name}Inplace" if inplace else None)


# popxl op type -> PopART's names. The in-place forms of view changes (reshape_, slice_, ...) and
# of the element-wise ops follow PopART's <Type>Inplace / <Type>LhsInplace classes.
NAMES: Dict[str, Names] = {
    # element-wise
    "abs": _unary("Abs"), "ceil": _unary("Ceil", True), "floor": _unary("Floor", True), "cos": _unary("Cos"),
    "sin": _unary("Sin"), "exp": _unary("Exp", True), "log": _unary("Log"), "sqrt": _unary("Sqrt"),
    "negate": Names("Neg", cls="NegateOp"), "relu": _unary("Relu", True), "gelu": _unary("Gelu", True),
    "geluerf": _unary("GeluErf", True), "swish": _unary("Swish", True), "sigmoid": _unary("Sigmoid", True),
    "tanh": _unary("Tanh"), "sign": _unary("Sign"), "reciprocal": _unary("Reciprocal"), "erf": _unary("Erf"),
    "isnan": Names("IsNaN", cls="IsNaN"), "isinf": Names("IsInf", cls="IsInf"), "isfinite": Names("IsFinite"),
    "not_equal": Names("NotEqual"), "logical_not": Names("Not"),
    "add": Names("Add", "AddLhsInplace"), "sub": Names("Sub", cls="SubtractOp"), "mul": Names("Mul", "MulLhsInplace"),
    "div": Names("Div"), "fmod": Names("Fmod"), "pow": Names("Pow", "PowLhsInplace"), "equal": Names("Equal"),
    "greater": Names("Greater"), "less": Names("Less"), "logical_and": Names("And"), "logical_or": Names("Or"),
    "minimum": Names("Min"), "maximum": Names("Max"), "where": Names("Where"), "clip": _unary("Clip", True),
    "increment_mod": _unary("IncrementMod", True), "scaled_add": Names("ScaledAdd", "ScaledAddLhsInplace"),
    "cast": Names("Cast"), "identity": _unary("Identity", True), "detach": _unary("Detach", True),
    # reductions
    "sum": Names("ReduceSum"), "mean": Names("ReduceMean"), "max": Names("ReduceMax"), "min": Names("ReduceMin"),
    "prod": Names("ReduceProd"), "logsum": Names("ReduceLogSum"), "logsumexp": Names("ReduceLogSumExp"),
    "l1": Names("ReduceL1"), "l2": Names("ReduceL2"), "sumsquare": Names("ReduceSumSquare"),
    "median": Names("ReduceMedian"), "argmax": Names("ArgMax"), "argmin": Names("ArgMin"),
    "cumsum": Names("CumSum"), "topk": Names("TopK"),
    # shapes and views
    "reshape": _unary("Reshape", True), "transpose": _unary("Transpose", True), "slice": _unary("Slice", True),
    "concat": _unary("Concat", True), "split": Names("Split"), "subsample": Names("Subsample"),
    # indexing
    "gather": Names("Gather"), "tied_gather": Names("PopartTiedGather", cls="TiedGatherOp"),
    "grouped_gather": Names("GroupedGather"),
    "scatter": Names("Scatter"), "scatter_reduce": Names("ScatterReduce"),
    "grouped_scatter_reduce": Names("GroupedScatterReduce"),
    "dynamic_slice": Names("DynamicSlice", module="dynamic"),
    "dynamic_update": Names("DynamicUpdate", "DynamicUpdateInplace", module="dynamic"),
    "onehot": Names("OneHot", cls="OnehotOp"),
    # matmul, conv, pools, resize (the pow2-scaled forms are PopART's MatMul / Conv / ConvTranspose
    # with a log2-scale input)
    "matmul": Names("MatMul"), "matmul_pow2scaled": Names("MatMul"), "conv": Names("Conv"),
    "conv_pow2scaled": Names("Conv"), "conv_transpose": Names("ConvTranspose"),
    "conv_transpose_pow2scaled": Names("ConvTranspose"), "max_pool": Names("MaxPool"),
    "average_pool": Names("AveragePool"), "interpolate": Names("Resize"), "roi_align": Names("RoiAlign"),
    "roi_align_grad": Names("RoiAlignGrad"), "pow2scale_then_cast": Names("Pow2ScaleThenCast"),
    "cast_then_pow2scale": Names("CastThenPow2Scale"),
    # nn
    "softmax": _unary("Softmax", True), "group_norm": Names("GroupNormalization", cls="GroupNormOp"),
    "batch_norm_inference": Names("BatchNormalization", cls="BatchNormOp"), "nll_loss": Names("Nll"),
    "nll_loss_with_softmax_grad": Names("NlllWithSoftmaxGradDirect"), "lamb_square": Names("LambSquare"),
    # random
    "random_uniform": Names("RandomUniform"), "random_normal": Names("RandomNormal"), "dropout": Names("Dropout"),
    "shaped_dropout": Names("ShapedDropout"), "create_random_seed": Names("ModifyRandomSeed"),
    # misc
    "init": Names("Init"), "print_tensor": Names("PrintTensor"), "histogram": Names("Histogram"),
    "io_tile_copy": Names("IoTileCopy"), "ipu_copy": Names("IpuCopy"),
    # exchange
    "host_load": Names("HostLoad", module="exchange"), "host_store": Names("HostStore", module="exchange"),
    "remote_load": Names("RemoteLoad", "RemoteLoadInplace", module="exchange"),
    "remote_store": Names("RemoteStore", module="exchange"),
    "remote_code_load": Names("RemoteCodeLoad", module="exchange"),
    # control
    "call": Names("Call"), "repeat": Names("Loop"), "conditional": Names("If"),
    # collectives
    "replicated_all_reduce": Names("ReplicatedAllReduce", "ReplicatedAllReduceInplace", module="collectives"),
    "replicated_all_gather": Names("ReplicatedAllGather", module="collectives"),
    "replicated_reduce_scatter": Names("ReplicatedReduceScatter", module="collectives"),
    "all_reduce": Names("AllReduce", module="collectives"),
    # variable updates (in place by nature: their class is the one name)
    "accumulate": Names("Accumulate"), "accumulator_scale": Names("AccumulatorScale"),
    "sparse_accumulate": Names("SparseAccumulate"), "adam_updater": Names("AdamUpdater"),
    "adam_var_update": Names("AdamVarUpdate"), "copy_var_update": Names("CopyVarUpdate"),
}
# ops that update a variable are in place by nature: the in-place flag does not change their class
_ALWAYS_INPLACE = {"accumulate", "accumulator_scale", "sparse_accumulate", "adam_var_update", "copy_var_update",
                   "remote_store", "print_tensor"}

# the classes with methods of their own (call, loop, exchange, ...) live in ops.py
_SPECIAL = {c.__name__: c for c in (_special.CallOp, _special.LoopOp, _special.IfOp, _special.IpuCopyOp,
                                    _special.InitOp, _special.HostLoadOp, _special.HostStoreOp,
                                    _special.RemoteLoadOp, _special.RemoteStoreOp, _special.MatMulOp)}


def _camel(op_type: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in op_type.split("_"))


def names_of(op_type: str, inplace: bool) -> Tuple[str, str, str]:
    """(PopART op type, class name, `_ir.op` submodule) of a popxl op of type `op_type`."""
    entry = NAMES.get(op_type)
    if entry is None:
        name = _camel(op_type)
        return name, name + "Op", ""
    if inplace and entry.inplace and op_type not in _ALWAYS_INPLACE:
        return entry.inplace, entry.inplace + "Op", entry.module
    return entry.op_type, entry.cls or entry.op_type + "Op", entry.module


_classes: Dict[str, type] = {}


def _base_for(op_type: str) -> type:
    from popxl.op_table import OP_TYPES
    entry = OP_TYPES.get(op_type)
    return _special.AvailableMemoryOp if entry is not None and "available_memory_proportion" in entry.attrs else Op


def class_named(cls_name: str, op_type: str, module: str = "") -> type:
    """The `_ir.op` class called `cls_name` (made once; ops.py's own classes where they exist)."""
    cls = _classes.get(cls_name)
    if cls is None:
        cls = _SPECIAL.get(cls_name)
        if cls is None:
            cls = type(cls_name, (_base_for(op_type),), {"__doc__": f"PopART's {cls_name} (a view of a popxl op)."})
            cls.__module__ = "popart._internal.ir.op" + (f".{module}" if module else "")
        _classes[cls_name] = cls
    return cls


def class_for(op) -> type:
    """The view class of popxl op `op`: its type and whether it is the in-place form."""
    _, cls_name, module = names_of(op.type, bool(op.inplace))
    return class_named(cls_name, op.type, module)


def all_classes() -> Dict[str, Dict[str, type]]:
    """Every class of the table, by `_ir.op` submodule ("" for `_ir.op` itself) and name."""
    out: Dict[str, Dict[str, type]] = {"": {}, "exchange": {}, "collectives": {}, "dynamic": {}}
    for op_type, entry in NAMES.items():
        for inplace in (False, True):
            _, cls_name, module = names_of(op_type, inplace)
            out[module][cls_name] = class_named(cls_name, op_type, module)
    return out


def find_class(module: str, cls_name: str) -> type:
    """The class `cls_name` of `_ir.op.<module>` for any op type registered now (a custom op type
    registered after import included); AttributeError when no op type has that class there."""
    from popxl.op_table import OP_TYPES
    for op_type in OP_TYPES:
        for inplace in (False, True):
            _, name, mod = names_of(op_type, inplace)
            if name == cls_name and mod == module:
                return class_named(name, op_type, mod)
    where = "_ir.op" + (f".{module}" if module else "")
    raise AttributeError(f"module {where!r} has no attribute {cls_name!r} (no popxl op type has that PopART class)")

