"""Element-wise ops: unary maths, binary arithmetic / comparison / logic with NumPy broadcasting,
where, clip, maximum, minimum, scaled_add and increment_mod.

The unary ops are made from their popxl.op_table entries (input and output dtypes, in-place
form); in-place ``_`` forms record the same op type with ``inplace=True``, input 0 modified and
output 0 aliasing input 0. The binary ops take their dtype rule from the table as well.
"""

import math
import sys
from typing import Callable, Dict, Union

from popxl import dtypes, op_table
from popxl.context import op_debug_context
from popxl.tensor import Tensor, TensorLike, constant

from ._op_builder import single, not_a_tensor
from ._shapes import broadcast_shapes, check_float, check_numeric, check_same_dtype, coerce_operands
from .utils import cast_if_needed

__all__ = [
    "log2", "add", "add_", "sub", "mul", "div", "fmod", "pow", "equal", "greater", "less", "not_equal",
    "logical_and", "logical_or", "maximum", "minimum", "where", "clip", "increment_mod", "increment_mod_",
    "scaled_add", "scaled_add_",
    # the unary ops of the op table
    "abs", "ceil", "cos", "exp", "exp_", "floor", "gelu", "gelu_", "geluerf", "geluerf_", "log", "negate", "relu",
    "relu_", "sign", "sin", "sqrt", "swish", "swish_", "tanh", "isnan", "isinf", "isfinite", "logical_not",
    "sigmoid", "sigmoid_", "reciprocal", "erf", "asin",
]  # + the unary ops registered later (UNARY_FUNCTIONS, below)


def _check_input(op_type: str, t: Tensor, rule: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, op_type)
    if rule == "float":
        check_float(op_type, t)
    elif rule == "numeric":
        check_numeric(op_type, t)
    elif rule == "bool":
        t = cast_if_needed(t, dtypes.bool)
    return t


def _unary(op_type: str, t: Tensor, inplace: bool) -> Tensor:
    entry = op_table.unary_op_type(op_type)
    t = _check_input(op_type, t, entry.inputs)
    out_dtype = dtypes.bool if entry.output == "bool" else t.dtype
    if inplace:
        return single(op_type, [t], t.shape, out_dtype, modified=(0,), aliases={0: 0},
                      out_names=[f"{op_type}_inplace_out"])
    return single(op_type, [t], t.shape, out_dtype)


# ------------------------------------------------------------------------------------------------
# the built-in unary ops: one def per function, each recording its op table entry's op type
# (tests/frontend/test_op_table.py checks this list against the table)

@op_debug_context
def abs(t: Tensor) -> Tensor:
    """The absolute value |t|, element by element."""
    return _unary("abs", t, False)


@op_debug_context
def ceil(t: Tensor) -> Tensor:
    """The smallest integer not below t, element by element."""
    return _unary("ceil", t, False)


@op_debug_context
def cos(t: Tensor) -> Tensor:
    """The cosine, element by element."""
    return _unary("cos", t, False)


@op_debug_context
def exp(t: Tensor) -> Tensor:
    """The exponential e^t, element by element."""
    return _unary("exp", t, False)


@op_debug_context
def exp_(t: Tensor) -> Tensor:
    """The exponential e^t, in place (returns an alias of ``t``)."""
    return _unary("exp", t, True)


@op_debug_context
def floor(t: Tensor) -> Tensor:
    """The largest integer not above t, element by element."""
    return _unary("floor", t, False)


@op_debug_context
def gelu(t: Tensor) -> Tensor:
    """GELU, the tanh approximation (popnn GELU), element by element."""
    return _unary("gelu", t, False)


@op_debug_context
def gelu_(t: Tensor) -> Tensor:
    """GELU, the tanh approximation (popnn GELU), in place (returns an alias of ``t``)."""
    return _unary("gelu", t, True)


@op_debug_context
def geluerf(t: Tensor) -> Tensor:
    """GELU, the exact form 0.5 t (1 + erf(t / sqrt 2)), element by element."""
    return _unary("geluerf", t, False)


@op_debug_context
def geluerf_(t: Tensor) -> Tensor:
    """GELU, the exact form 0.5 t (1 + erf(t / sqrt 2)), in place (returns an alias of ``t``)."""
    return _unary("geluerf", t, True)


@op_debug_context
def log(t: Tensor) -> Tensor:
    """The natural logarithm, element by element."""
    return _unary("log", t, False)


@op_debug_context
def negate(t: Tensor) -> Tensor:
    """-t, element by element."""
    return _unary("negate", t, False)


@op_debug_context
def relu(t: Tensor) -> Tensor:
    """Max(t, 0), element by element."""
    return _unary("relu", t, False)


@op_debug_context
def relu_(t: Tensor) -> Tensor:
    """Max(t, 0), in place (returns an alias of ``t``)."""
    return _unary("relu", t, True)


@op_debug_context
def sign(t: Tensor) -> Tensor:
    """-1, 0 or 1 by the sign of t, element by element."""
    return _unary("sign", t, False)


@op_debug_context
def sin(t: Tensor) -> Tensor:
    """The sine, element by element."""
    return _unary("sin", t, False)


@op_debug_context
def sqrt(t: Tensor) -> Tensor:
    """The square root, element by element."""
    return _unary("sqrt", t, False)


@op_debug_context
def swish(t: Tensor) -> Tensor:
    """T * sigmoid(t), element by element."""
    return _unary("swish", t, False)


@op_debug_context
def swish_(t: Tensor) -> Tensor:
    """T * sigmoid(t), in place (returns an alias of ``t``)."""
    return _unary("swish", t, True)


@op_debug_context
def tanh(t: Tensor) -> Tensor:
    """The hyperbolic tangent, element by element."""
    return _unary("tanh", t, False)


@op_debug_context
def isnan(t: Tensor) -> Tensor:
    """Whether t is NaN (bool), element by element."""
    return _unary("isnan", t, False)


@op_debug_context
def isinf(t: Tensor) -> Tensor:
    """Whether t is infinite (bool), element by element."""
    return _unary("isinf", t, False)


@op_debug_context
def isfinite(t: Tensor) -> Tensor:
    """Whether t is finite (bool), element by element."""
    return _unary("isfinite", t, False)


@op_debug_context
def logical_not(t: Tensor) -> Tensor:
    """Not t, with t cast to bool (bool), element by element."""
    return _unary("logical_not", t, False)


@op_debug_context
def sigmoid(t: Tensor) -> Tensor:
    """1 / (1 + exp(-t)) (ONNX Sigmoid), element by element."""
    return _unary("sigmoid", t, False)


@op_debug_context
def sigmoid_(t: Tensor) -> Tensor:
    """1 / (1 + exp(-t)) (ONNX Sigmoid), in place (returns an alias of ``t``)."""
    return _unary("sigmoid", t, True)


@op_debug_context
def reciprocal(t: Tensor) -> Tensor:
    """1 / t (ONNX Reciprocal), element by element."""
    return _unary("reciprocal", t, False)


@op_debug_context
def erf(t: Tensor) -> Tensor:
    """The error function (ONNX Erf), element by element."""
    return _unary("erf", t, False)


@op_debug_context
def asin(t: Tensor) -> Tensor:
    """The inverse sine (ONNX Asin), element by element."""
    return _unary("asin", t, False)


def _unary_op(op_type: str, inplace: bool = False, doc: str = ""):
    """The function of a unary op registered outside popxl (a user's own entry)."""
    fn_name = op_type + ("_" if inplace else "")

    def fn(t: Tensor) -> Tensor:
        return _unary(op_type, t, inplace)

    fn.__name__ = fn.__qualname__ = fn_name
    what = f"``{op_type}`` ({doc})" if doc else f"``{op_type}``"
    fn.__doc__ = f"Element-wise {what} of ``t``" + (" in place (returns an alias of ``t``)." if inplace else ".")
    fn.__module__ = __name__
    return op_debug_context(fn)


# The functions of the unary ops by name: the defs above for the built-in entries; an entry
# registered later (a user's own op) gets a function made here, in this module and in popxl.ops.
UNARY_FUNCTIONS: Dict[str, Callable[..., Tensor]] = {}


def _add_unary_functions(entry: op_table.UnaryOpType) -> None:
    names = [entry.name] + ([entry.name + "_"] if entry.inplace else [])
    defined = {n: globals()[n] for n in names if n in globals()}
    if defined:
        if len(defined) != len(names):
            raise ValueError(f"unary op {entry.name!r}: popxl.ops.elementwise defines {sorted(defined)}, "
                             f"the op table entry asks for {names}")
        UNARY_FUNCTIONS.update(defined)
        return
    made = {entry.name: _unary_op(entry.name, doc=entry.doc)}
    if entry.inplace:
        made[entry.name + "_"] = _unary_op(entry.name, inplace=True, doc=entry.doc)
    UNARY_FUNCTIONS.update(made)
    for module in (sys.modules[__name__], sys.modules.get("popxl.ops")):
        if module is not None:
            for name, fn in made.items():
                setattr(module, name, fn)
                if hasattr(module, "__all__") and name not in module.__all__:
                    module.__all__.append(name)


op_table.on_register(op_table.UnaryOpType, _add_unary_functions)


@op_debug_context
def log2(t: Tensor) -> Tensor:
    """Element-wise base-2 logarithm (recorded as ``log(t) / ln 2``)."""
    out = log(t)
    return div(out, constant(math.log(2.0), out.dtype, "ln2"))


def _binary(op_type: str, lhs: TensorLike, rhs: TensorLike, inplace: bool = False) -> Tensor:
    rule = op_table.binary_op_type(op_type).kind
    lhs, rhs = coerce_operands(lhs, rhs, what=f"{op_type} operands")
    if rule == "logical":
        lhs, rhs = cast_if_needed(lhs, dtypes.bool), cast_if_needed(rhs, dtypes.bool)
    dt = check_same_dtype(op_type, lhs, rhs)
    if rule == "arith":
        check_numeric(op_type, lhs)
    shape = broadcast_shapes(lhs.shape, rhs.shape, what=f"{op_type} operands")
    out_dtype = dt if rule == "arith" else dtypes.bool
    if inplace:
        if shape != lhs.shape:
            raise ValueError(f"{op_type}_: the result shape {shape} must equal the shape {lhs.shape} of the "
                             "tensor updated in place (only rhs may be broadcast).")
        return single(op_type, [lhs, rhs], shape, out_dtype, modified=(0,), aliases={0: 0},
                      input_names=["lhs", "rhs"], out_names=[f"{op_type}_lhs_inplace_out"])
    return single(op_type, [lhs, rhs], shape, out_dtype, input_names=["lhs", "rhs"])


@op_debug_context
def add(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs + rhs`` element-wise (NumPy broadcasting, same dtypes)."""
    return _binary("add", lhs, rhs)


@op_debug_context
def add_(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs += rhs`` in place; returns an alias of ``lhs``."""
    return _binary("add", lhs, rhs, inplace=True)


@op_debug_context
def sub(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs - rhs`` element-wise."""
    return _binary("sub", lhs, rhs)


@op_debug_context
def mul(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs * rhs`` element-wise."""
    return _binary("mul", lhs, rhs)


@op_debug_context
def div(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs / rhs`` element-wise (integer inputs divide as integers)."""
    return _binary("div", lhs, rhs)


@op_debug_context
def fmod(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Remainder of ``lhs / rhs`` with the sign of ``lhs`` (C ``fmod``)."""
    return _binary("fmod", lhs, rhs)


@op_debug_context
def pow(t: Tensor, e: Union[float, int, TensorLike]) -> Tensor:
    """``t ** e`` element-wise; a scalar ``e`` becomes a constant of ``t``'s dtype."""
    return _binary("pow", t, e)


@op_debug_context
def equal(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs == rhs`` element-wise, as a bool tensor."""
    return _binary("equal", lhs, rhs)


@op_debug_context
def greater(input: Tensor, other: Tensor) -> Tensor:
    """``input > other`` element-wise, as a bool tensor."""
    return _binary("greater", input, other)


@op_debug_context
def less(input: Tensor, other: Tensor) -> Tensor:
    """``input < other`` element-wise, as a bool tensor (ONNX Less; PopXL's ``a < b`` records
    ``greater(b, a)``)."""
    return _binary("less", input, other)


@op_debug_context
def not_equal(lhs: Tensor, rhs: Tensor) -> Tensor:
    """``lhs != rhs`` element-wise, as a bool tensor (ONNX Not of Equal)."""
    return _binary("not_equal", lhs, rhs)


@op_debug_context
def minimum(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Element-wise minimum of two tensors (broadcast, same dtypes; ONNX Min of two inputs)."""
    return _binary("minimum", lhs, rhs)


@op_debug_context
def logical_and(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Element-wise AND (non-bool inputs are cast to bool)."""
    return _binary("logical_and", lhs, rhs)


@op_debug_context
def logical_or(lhs: Tensor, rhs: Tensor) -> Tensor:
    """Element-wise OR (non-bool inputs are cast to bool)."""
    return _binary("logical_or", lhs, rhs)


@op_debug_context
def maximum(*ts: Tensor) -> Tensor:
    """Element-wise maximum of any number of tensors (broadcast, same dtypes)."""
    if not ts:
        raise ValueError("maximum needs at least one tensor.")
    ts = coerce_operands(*ts, what="maximum operands")
    dt = check_same_dtype("maximum", *ts)
    check_numeric("maximum", ts[0])
    shape = broadcast_shapes(*(t.shape for t in ts), what="maximum operands")
    return single("maximum", ts, shape, dt)


@op_debug_context
def where(condition: Tensor, lhs: TensorLike, rhs: TensorLike) -> Tensor:
    """Elements of ``lhs`` where ``condition`` is true, else of ``rhs`` (all three broadcast)."""
    if not isinstance(condition, Tensor):
        raise not_a_tensor("condition", condition, "where")
    lhs, rhs = coerce_operands(lhs, rhs, what="where operands")
    condition = cast_if_needed(condition, dtypes.bool)
    dt = check_same_dtype("where", lhs, rhs)
    shape = broadcast_shapes(condition.shape, lhs.shape, rhs.shape, what="where operands")
    return single("where", [condition, lhs, rhs], shape, dt, input_names=["condition", "lhs", "rhs"])


@op_debug_context
def clip(t: Tensor, min: float = float("-inf"), max: float = float("inf")) -> Tensor:
    """Clamp every element of ``t`` to ``[min, max]``."""
    t = _check_input("clip", t, "numeric")
    if float(min) > float(max):
        raise ValueError(f"clip: min ({min}) must not be greater than max ({max}).")
    return single("clip", [t], t.shape, t.dtype, {"min": float(min), "max": float(max)})


def _increment_mod(t: Tensor, increment: float, modulus: float, inplace: bool) -> Tensor:
    t = _check_input("increment_mod", t, "numeric")
    if float(modulus) == 0.0:
        raise ValueError("increment_mod: the modulus must not be 0.")
    attrs = {"increment": float(increment), "modulus": float(modulus)}
    if inplace:
        return single("increment_mod", [t], t.shape, t.dtype, attrs, modified=(0,), aliases={0: 0},
                      out_names=["increment_mod_inplace_out"])
    return single("increment_mod", [t], t.shape, t.dtype, attrs)


@op_debug_context
def increment_mod(t: Tensor, increment: float, modulus: float) -> Tensor:
    """``(t + increment) % modulus`` element-wise."""
    return _increment_mod(t, increment, modulus, False)


@op_debug_context
def increment_mod_(t: Tensor, increment: float, modulus: float) -> Tensor:
    """``t = (t + increment) % modulus`` in place."""
    return _increment_mod(t, increment, modulus, True)


_SCALED_ADD_MIXED = (dtypes.float16, dtypes.float32)


def _scaled_add(X: Tensor, Y: Tensor, a: Union[float, Tensor], b: Union[float, Tensor], inplace: bool) -> Tensor:
    X, Y = coerce_operands(X, Y, what="scaled_add operands")
    # PopART's ScaledAddOp::setup gives the output X's type; poplibs' scaledAddTo mixes float32 and
    # float16 (either way round), other pairs must agree
    if not (X.dtype in _SCALED_ADD_MIXED and Y.dtype in _SCALED_ADD_MIXED):
        check_same_dtype("scaled_add", X, Y)
    dt = X.dtype
    check_numeric("scaled_add", X)
    shape = broadcast_shapes(X.shape, Y.shape, what="scaled_add operands")
    if inplace and shape != X.shape:
        raise ValueError(f"scaled_add_: the result shape {shape} must equal the shape {X.shape} of X.")
    inputs, names = [X, Y], ["X", "Y"]
    attrs: Dict[str, object] = {}  # a / b: the float scale, or None for a tensor input
    for key, value in (("a", a), ("b", b)):
        if isinstance(value, Tensor):
            if value.nelms != 1:
                raise ValueError(f"scaled_add: the scale `{key}` must be a scalar tensor, got shape {value.shape}.")
            inputs.append(value)
            names.append(key)
            attrs[key] = None
        else:
            attrs[key] = float(value)
    attrs["input_names"] = tuple(names)
    if inplace:
        return single("scaled_add", inputs, shape, dt, attrs, input_names=names, modified=(0,),
                      aliases={0: 0}, out_names=["scaled_add_inplace_out"])
    return single("scaled_add", inputs, shape, dt, attrs, input_names=names)


@op_debug_context
def scaled_add(X: Tensor, Y: Tensor, a: Union[float, Tensor] = 1.0, b: Union[float, Tensor] = 1.0) -> Tensor:
    """``a * X + b * Y``; ``a`` and ``b`` are Python floats or scalar tensors."""
    return _scaled_add(X, Y, a, b, False)


@op_debug_context
def scaled_add_(X: Tensor, Y: Tensor, a: Union[float, Tensor] = 1.0, b: Union[float, Tensor] = 1.0) -> Tensor:
    """``X = a * X + b * Y`` in place."""
    return _scaled_add(X, Y, a, b, True)
