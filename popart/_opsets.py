"""The op methods of `builder.aiOnnx` / `builder.aiGraphcore`: their signatures and node creation.

ONNX ops get their signature from the `onnx` package's schemas, the way PopART generates its
builder: `op(args, [num_outputs,] required attributes..., optional attributes..., debugContext="")`
with the attributes in alphabetical order inside each group; `num_outputs` is there when the op
has optional or variadic outputs. The ops return one tensor id, or a list when the op can have
more than one output. Graphcore's ops (domain ai.graphcore) are listed in `GRAPHCORE_OPS`.
"""
from __future__ import annotations

import enum
from functools import lru_cache
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np
import onnx
from onnx import numpy_helper

from .errors import popart_exception

# PopART's method names that are not the lower-cased ONNX op type
_SPECIAL_NAMES = {"logical_and": "And", "logical_or": "Or", "logical_not": "Not", "logical_xor": "Xor",
                  "logical_if": "If"}
# attributes PopART leaves out of the positional signature (deprecated), still accepted by keyword
_NOT_POSITIONAL = {"auto_pad"}
_DEBUG_KWARGS = ("debugContext", "debugPrefix", "debug_context", "debugName", "name")


@lru_cache(maxsize=None)
def _onnx_op_types() -> Dict[str, str]:
    """lower-case name -> ONNX op type, over every op of the default domain."""
    names = {}
    for s in onnx.defs.get_all_schemas_with_history():
        if s.domain in ("", "ai.onnx"):
            names[s.name.lower()] = s.name
    for k, v in _SPECIAL_NAMES.items():
        names[k] = v
    return names


class Param:
    """One parameter of an op method: an attribute (with the ONNX attribute type) or num_outputs."""

    def __init__(self, name: str, attr_type=None, default: Any = None, required: bool = False):
        self.name, self.attr_type, self.default, self.required = name, attr_type, default, required


class OpSignature:
    def __init__(self, op_type: str, domain: str, version: int, params: List[Param], min_outputs: int,
                 max_outputs: int, returns_list: bool, has_num_outputs: bool, extra_attrs: Dict[str, Param],
                 input_range: Tuple[int, int]):
        self.op_type, self.domain, self.version = op_type, domain, version
        self.params, self.min_outputs, self.max_outputs = params, min_outputs, max_outputs
        self.returns_list, self.has_num_outputs = returns_list, has_num_outputs
        self.extra_attrs = extra_attrs
        self.input_range = input_range

    def describe(self) -> str:
        ps = ["args"] + [p.name if p.required else f"{p.name}={p.default!r}" for p in self.params]
        return f"{self.op_type.lower()}({', '.join(ps)}, debugContext='')"


def _schema_default(attr) -> Any:
    if attr.default_value is not None and attr.default_value.name:
        v = onnx.helper.get_attribute_value(attr.default_value)
        return v.decode() if isinstance(v, bytes) else v
    return None


@lru_cache(maxsize=None)
def onnx_signature(op_type: str, version: int) -> OpSignature:
    try:
        schema = onnx.defs.get_schema(op_type, version, "")
    except Exception:
        raise popart_exception(f"ONNX has no op {op_type!r} in opset {version}") from None
    attrs = schema.attributes
    req = sorted(a for a in attrs if attrs[a].required)
    opt = sorted(a for a in attrs if not attrs[a].required and a not in _NOT_POSITIONAL)
    params = []
    variadic_out = any(o.option == onnx.defs.OpSchema.FormalParameterOption.Variadic for o in schema.outputs)
    has_num_outputs = variadic_out or schema.max_output > schema.min_output
    if has_num_outputs:
        params.append(Param("num_outputs", None, None, True))
    params += [Param(a, attrs[a].type, None, True) for a in req]
    params += [Param(a, attrs[a].type, _schema_default(attrs[a])) for a in opt]
    extra = {a: Param(a, attrs[a].type, _schema_default(attrs[a])) for a in attrs if a in _NOT_POSITIONAL}
    returns_list = schema.max_output > 1
    return OpSignature(schema.name, "", version, params, schema.min_output, schema.max_output, returns_list,
                       has_num_outputs, extra, (schema.min_input, schema.max_input))


def find_onnx_op(method: str, version: int) -> Optional[str]:
    op_type = _onnx_op_types().get(method.lower())
    if op_type is None:
        return None
    try:
        onnx.defs.get_schema(op_type, version, "")
    except Exception:
        return None
    return op_type


A = onnx.AttributeProto
INT, INTS, FLOAT, FLOATS, STRING, STRINGS = A.INT, A.INTS, A.FLOAT, A.FLOATS, A.STRING, A.STRINGS


def _gc(op_type, params, outputs=1, returns_list=False, num_outputs=False, inputs=(1, 64)):
    ps = [Param(n, t, d, r) for (n, t, d, r) in params]
    if num_outputs:
        ps.insert(0, Param("num_outputs", None, None, True))
    return OpSignature(op_type, "ai.graphcore", 1, ps, 1, outputs, returns_list, num_outputs, {}, inputs)


_REQ = object()
# ai.graphcore opset 1: method -> signature (PopART's names, attribute names and defaults)
GRAPHCORE_OPS: Dict[str, OpSignature] = {
    "nllloss": _gc("Nll", [("reduction", INT, 1, False), ("ignoreIndex", INT, None, False),
                           ("inputIsLogProbability", INT, 0, False)], inputs=(2, 2)),
    "l1loss": _gc("L1", [("lambda", FLOAT, None, True), ("reduction", INT, 1, False)], inputs=(1, 1)),
    "identityloss": _gc("IdentityLoss", [("reduction", INT, 1, False)], inputs=(1, 1)),
    "gelu": _gc("Gelu", [], inputs=(1, 1)),
    "geluerf": _gc("GeluErf", [], inputs=(1, 1)),
    "swish": _gc("Swish", [], inputs=(1, 1)),
    "scale": _gc("Scale", [("scale", FLOAT, None, True)], inputs=(1, 1)),
    "scaledadd": _gc("ScaledAdd", [("scale0", FLOAT, 1.0, False), ("scale1", FLOAT, 1.0, False)], inputs=(2, 4)),
    "subsample": _gc("Subsample", [("strides", INTS, None, True)], inputs=(1, 1)),
    "detach": _gc("Detach", [], inputs=(1, 1)),
    "nop": _gc("Nop", [], inputs=(1, 1)),
    "atan2": _gc("Atan2", [], inputs=(2, 2)),
    "expm1": _gc("Expm1", [], inputs=(1, 1)),
    "log1p": _gc("Log1p", [], inputs=(1, 1)),
    "fmod": _gc("Fmod", [], inputs=(2, 2)),
    "remainder": _gc("Remainder", [], inputs=(2, 2)),
    "round": _gc("Round", [], inputs=(1, 1)),
    "reshape": _gc("Reshape", [("shape", INTS, None, True)], inputs=(1, 1)),
    "slice": _gc("Slice", [("ends", INTS, None, True), ("starts", INTS, None, True), ("axes", INTS, None, True)],
                 inputs=(1, 1)),
    "dynamicslice": _gc("DynamicSlice", [("axes", INTS, None, True), ("sizes", INTS, None, True),
                                         ("noOverlap", INT, 0, False)], inputs=(2, 2)),
    "dynamicupdate": _gc("DynamicUpdate", [("axes", INTS, None, True), ("sizes", INTS, None, True),
                                           ("noOverlap", INT, 0, False)], inputs=(3, 3)),
    "groupnormalization": _gc("GroupNormalization", [("num_groups", INT, None, True),
                                                     ("epsilon", FLOAT, 1e-5, False)], outputs=3, returns_list=True,
                              inputs=(3, 3)),
    "batchnormalization": _gc("BatchNormalization", [("epsilon", FLOAT, 1e-5, False),
                                                     ("momentum", FLOAT, 0.9, False)], outputs=5, returns_list=True,
                              num_outputs=True, inputs=(5, 5)),
    "printtensor": _gc("PrintTensor", [("print_gradient", INT, 1, False), ("title", STRING, "", False)],
                       inputs=(1, 1)),
    "incrementmod": _gc("IncrementMod", [("increment", FLOAT, None, True), ("modulus", FLOAT, None, True)],
                        inputs=(1, 1)),
    "reducemedian": _gc("ReduceMedian", [("axes", INTS, None, False), ("keepdims", INT, 1, False)], outputs=2,
                        returns_list=True, inputs=(1, 1)),
    "shapeddropout": _gc("ShapedDropout", [("shape", INTS, None, True), ("ratio", FLOAT, 0.5, False)],
                         inputs=(1, 1)),
}
# init(shape, data_type, init_type, [batch_axis], debugContext) has no tensor inputs
INIT_SIGNATURE = _gc("Init", [("shape", INTS, None, True), ("data_type", INT, None, True),
                              ("tensor_type", INT, None, True), ("batch_axis", INT, -1, False)], inputs=(0, 0))


def _enum_value(v):
    if isinstance(v, enum.Enum):
        return v.value
    return v


def make_attribute(name: str, value: Any, attr_type=None) -> onnx.AttributeProto:
    """An AttributeProto of the schema's type (ints given for a float list become floats, ...)."""
    value = _enum_value(value)
    if name == "to" and isinstance(value, str):  # Cast(to="FLOAT")
        from .tensorinfo import onnx_type
        value = onnx_type(value)
    if attr_type == INT:
        return onnx.helper.make_attribute(name, int(value))
    if attr_type == FLOAT:
        return onnx.helper.make_attribute(name, float(value))
    if attr_type == INTS:
        return onnx.helper.make_attribute(name, [int(x) for x in value], attr_type=INTS)
    if attr_type == FLOATS:
        return onnx.helper.make_attribute(name, [float(x) for x in value], attr_type=FLOATS)
    if attr_type == STRING:
        return onnx.helper.make_attribute(name, str(value))
    if attr_type == STRINGS:
        return onnx.helper.make_attribute(name, [str(x) for x in value], attr_type=STRINGS)
    if attr_type == A.TENSOR:
        arr = np.asarray(value)
        return onnx.helper.make_attribute(name, numpy_helper.from_array(arr))
    return onnx.helper.make_attribute(name, value)


def bind_arguments(sig: OpSignature, args: Sequence, kwargs: dict) -> Tuple[Dict[str, Any], int, str]:
    """Match a call's arguments to the signature: ({attribute: value}, number of outputs, debug name)."""
    kwargs = dict(kwargs)
    debug = ""
    for k in _DEBUG_KWARGS:
        if k in kwargs:
            debug = kwargs.pop(k)
    values: Dict[str, Any] = {}
    args = list(args)
    params = sig.params
    # a trailing string positional argument beyond the parameters is the debug name
    if len(args) == len(params) + 1 and isinstance(args[-1], str):
        debug = args.pop()
    if len(args) > len(params):
        raise popart_exception(f"{sig.op_type}: too many arguments ({len(args)}); the signature is {sig.describe()}")
    for p, v in zip(params, args):
        values[p.name] = v
    known = {p.name: p for p in params}
    known.update(sig.extra_attrs)
    for k, v in kwargs.items():
        if k not in known:
            raise popart_exception(f"{sig.op_type}: unknown argument {k!r}; the signature is {sig.describe()}")
        if k in values:
            raise popart_exception(f"{sig.op_type}: argument {k!r} given twice")
        values[k] = v
    for p in params:
        if p.required and p.name not in values:
            raise popart_exception(f"{sig.op_type}: missing argument {p.name!r}; the signature is {sig.describe()}")
    num_outputs = int(values.pop("num_outputs", sig.max_outputs if sig.returns_list else 1))
    if sig.has_num_outputs and not sig.min_outputs <= num_outputs <= sig.max_outputs:
        raise popart_exception(f"{sig.op_type}: num_outputs={num_outputs} is outside [{sig.min_outputs}, "
                               f"{sig.max_outputs}]")
    if isinstance(debug, (list, tuple)):
        debug = "/".join(map(str, debug))
    return values, num_outputs, str(debug or "")


def attributes(sig: OpSignature, values: Dict[str, Any]) -> List[onnx.AttributeProto]:
    """The attributes to store: values given and not 'unset' (None, [] ), defaults of the schema left out."""
    out = []
    types = {p.name: p.attr_type for p in sig.params}
    types.update({p.name: p.attr_type for p in sig.extra_attrs.values()})
    for name, v in values.items():
        if v is None or (isinstance(v, (list, tuple)) and len(v) == 0 and types.get(name) in (INTS, FLOATS, STRINGS)):
            continue
        out.append(make_attribute(name, v, types.get(name)))
    return out
