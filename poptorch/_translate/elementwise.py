"""Element-wise ATen ops: arithmetic, comparisons, logic, activations, where / masked_fill, clamp.

PyTorch's type promotion is followed: arithmetic runs in the type PyTorch gave the result
(recorded at capture), comparisons in the promoted type of their operands.
"""
from __future__ import annotations

import math

import numpy as np
import torch

import popxl
import popxl.ops as ops

from .._capture import Value
from .context import Op, aten, device_dtype


# -- helpers -----------------------------------------------------------------------------------------------------

def promoted(op: Op, a: str, b: str) -> popxl.dtype:
    """The device type PyTorch promotes two arguments to (torch.result_type: 0-dim tensors and
    Python numbers change the type only across categories)."""
    def dummy(n):
        v = op.args.get(n)
        return torch.empty(() if len(v.shape) == 0 else (1,), dtype=v.dtype) if isinstance(v, Value) else v
    return device_dtype(torch.result_type(dummy(a), dummy(b)), op.node.op_name)


def scalar_like(value, t: popxl.Tensor) -> popxl.Tensor:
    return popxl.constant(np.asarray(value, t.dtype.as_numpy()), t.dtype)


def mul_scalar(t: popxl.Tensor, s) -> popxl.Tensor:
    if isinstance(s, popxl.Tensor):
        return ops.mul(t, s if s.dtype == t.dtype else ops.cast(s, t.dtype))
    if float(s) == 1.0:
        return t
    return ops.mul(t, scalar_like(s, t))


def add_scalar(t: popxl.Tensor, s) -> popxl.Tensor:
    if not isinstance(s, popxl.Tensor) and float(s) == 0.0:
        return t
    return ops.add(t, s if isinstance(s, popxl.Tensor) else scalar_like(s, t))


def _binary(op: Op, fn, a="self", b="other"):
    dt = op.out_dtype()
    return fn(op.t(a, dt), op.t(b, dt))


# -- arithmetic --------------------------------------------------------------------------------------------------

@aten("add.Tensor", "add.Scalar")
def add(op: Op):
    dt = op.out_dtype()
    x, y = op.t("self", dt), op.t("other", dt)
    alpha = op.arg("alpha", 1)
    if dt == popxl.bool:
        return ops.logical_or(x, y)
    return ops.add(x, mul_scalar(y, alpha))


@aten("sub.Tensor")
def sub(op: Op):
    dt = op.out_dtype()
    return ops.sub(op.t("self", dt), mul_scalar(op.t("other", dt), op.arg("alpha", 1)))


@aten("rsub.Tensor", "rsub.Scalar")
def rsub(op: Op):
    dt = op.out_dtype()
    return ops.sub(op.t("other", dt), mul_scalar(op.t("self", dt), op.arg("alpha", 1)))


@aten("mul.Tensor", "mul.Scalar")
def mul(op: Op):
    dt = op.out_dtype()
    if dt == popxl.bool:
        return ops.logical_and(op.t("self", dt), op.t("other", dt))
    return _binary(op, ops.mul)


@aten("div.Tensor", "div.Scalar")
def div(op: Op):
    return _binary(op, ops.div)


@aten("div.Tensor_mode")
def div_mode(op: Op):
    mode = op.arg("rounding_mode")
    dt = op.out_dtype()
    if mode is None:
        return _binary(op, ops.div)
    if dt.is_floating_point:
        q = ops.div(op.t("self", dt), op.t("other", dt))
    else:  # integer division: exact in float32 for |values| < 2^24, the range the IPU's int32 division covers
        q = ops.div(op.t("self", popxl.float32), op.t("other", popxl.float32))
    if mode == "floor":
        q = ops.floor(q)
    elif mode == "trunc":
        q = ops.mul(ops.sign(q), ops.floor(ops.abs(q)))
    else:
        raise op.error(f"rounding_mode {mode!r} is not one of None, 'trunc', 'floor'")
    return q if q.dtype == dt else ops.cast(q, dt)


@aten("floor_divide")
def floor_divide(op: Op):
    dt = op.out_dtype()
    q = ops.floor(ops.div(op.t("self", popxl.float32), op.t("other", popxl.float32)))
    return q if dt == popxl.float32 else ops.cast(q, dt)


@aten("remainder.Tensor", "remainder.Scalar")
def remainder(op: Op):
    """Python's modulo: the sign of the divisor (a - floor(a / b) * b)."""
    dt = op.out_dtype()
    a, b = op.t("self", dt), op.t("other", dt)
    if dt.is_floating_point:
        return ops.sub(a, ops.mul(ops.floor(ops.div(a, b)), b))
    af, bf = ops.cast(a, popxl.float32), ops.cast(b, popxl.float32)
    return ops.cast(ops.sub(af, ops.mul(ops.floor(ops.div(af, bf)), bf)), dt)


@aten("fmod.Tensor", "fmod.Scalar")
def fmod(op: Op):
    return _binary(op, ops.fmod)


@aten("pow.Tensor_Scalar")
def pow_tensor_scalar(op: Op):
    dt = op.out_dtype()
    x = op.t("self", dt)
    e = op.arg("exponent")
    if float(e) == 2.0:
        return ops.mul(x, x)
    if float(e) == 1.0:
        return ops.identity(x)
    if float(e) == 0.5:
        return ops.sqrt(x)
    if float(e) == -1.0:
        return ops.reciprocal(x)
    return ops.pow(x, scalar_like(e, x))


@aten("pow.Tensor_Tensor", "pow.Scalar")
def pow_tensor(op: Op):
    dt = op.out_dtype()
    return ops.pow(op.t("self", dt), op.t("exponent", dt))


@aten("maximum")
def maximum(op: Op):
    return _binary(op, lambda a, b: ops.maximum(a, b))


@aten("minimum")
def minimum(op: Op):
    return _binary(op, ops.minimum)


@aten("neg")
def neg(op: Op):
    return ops.negate(op.t("self"))


@aten("reciprocal")
def reciprocal(op: Op):
    return ops.reciprocal(op.t("self", op.out_dtype()))


@aten("rsqrt")
def rsqrt(op: Op):
    return ops.reciprocal(ops.sqrt(op.t("self", op.out_dtype())))


@aten("addcmul")
def addcmul(op: Op):
    dt = op.out_dtype()
    return ops.add(op.t("self", dt), mul_scalar(ops.mul(op.t("tensor1", dt), op.t("tensor2", dt)), op.arg("value", 1)))


@aten("addcdiv")
def addcdiv(op: Op):
    dt = op.out_dtype()
    return ops.add(op.t("self", dt), mul_scalar(ops.div(op.t("tensor1", dt), op.t("tensor2", dt)), op.arg("value", 1)))


@aten("lerp.Scalar", "lerp.Tensor")
def lerp(op: Op):
    dt = op.out_dtype()
    a, b = op.t("self", dt), op.t("end", dt)
    w = op.t("weight", dt)
    return ops.add(a, ops.mul(w, ops.sub(b, a)))


# -- unary maths -----------------------------------------------------------------------------------------------------

def _unary(name, fn):
    @aten(name)
    def rule(op: Op):
        return fn(op.t("self", op.out_dtype()))
    rule.__name__ = name
    return rule


for _name, _fn in {"relu": ops.relu, "sigmoid": ops.sigmoid, "tanh": ops.tanh, "exp": ops.exp, "log": ops.log,
                   "sqrt": ops.sqrt, "abs": ops.abs, "sign": ops.sign, "sgn": ops.sign, "floor": ops.floor,
                   "ceil": ops.ceil, "sin": ops.sin, "cos": ops.cos, "erf": ops.erf, "silu": ops.swish}.items():
    _unary(_name, _fn)


@aten("log2")
def log2(op: Op):
    return ops.log2(op.t("self", op.out_dtype()))


@aten("log10")
def log10(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.mul(ops.log(x), scalar_like(1 / math.log(10), x))


@aten("log1p")
def log1p(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.log(add_scalar(x, 1.0))


@aten("expm1")
def expm1(op: Op):
    x = op.t("self", op.out_dtype())
    return add_scalar(ops.exp(x), -1.0)


@aten("round.default")
def round_(op: Op):
    """Round half to even, as torch.round: floor(x + 0.5), less one where x + 0.5 is an odd integer."""
    x = op.t("self", op.out_dtype())
    if not x.dtype.is_floating_point:
        return ops.identity(x)
    f = ops.floor(add_scalar(x, 0.5))
    tie = ops.equal(ops.sub(f, x), scalar_like(0.5, x))
    odd = ops.equal(ops.fmod(f, scalar_like(2.0, x)), scalar_like(1.0, x))
    odd = ops.logical_or(odd, ops.equal(ops.fmod(f, scalar_like(2.0, x)), scalar_like(-1.0, x)))
    return ops.where(ops.logical_and(tie, odd), add_scalar(f, -1.0), f)


@aten("trunc")
def trunc(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.mul(ops.sign(x), ops.floor(ops.abs(x)))


@aten("frac")
def frac(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.sub(x, ops.mul(ops.sign(x), ops.floor(ops.abs(x))))


@aten("gelu")
def gelu(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.gelu(x) if op.arg("approximate", "none") == "tanh" else ops.geluerf(x)


@aten("softplus")
def softplus(op: Op):
    """log(1 + exp(beta x)) / beta, linear above the threshold as in PyTorch."""
    x = op.t("self", op.out_dtype())
    beta, threshold = float(op.arg("beta", 1.0)), float(op.arg("threshold", 20.0))
    bx = mul_scalar(x, beta)
    # log(1 + exp(z)) = max(z, 0) + log(1 + exp(-|z|)) stays finite for large z
    soft = ops.add(ops.relu(bx), ops.log(add_scalar(ops.exp(ops.negate(ops.abs(bx))), 1.0)))
    soft = mul_scalar(soft, 1.0 / beta)
    return ops.where(ops.greater(bx, scalar_like(threshold, x)), x, soft)


@aten("log_sigmoid_forward")
def log_sigmoid_forward(op: Op):
    x = op.t("self", op.out_dtype())
    out = ops.negate(ops.add(ops.relu(ops.negate(x)), ops.log(add_scalar(ops.exp(ops.negate(ops.abs(x))), 1.0))))
    return [out, None]


@aten("leaky_relu")
def leaky_relu(op: Op):
    x = op.t("self", op.out_dtype())
    slope = float(op.arg("negative_slope", 0.01))
    return ops.where(ops.greater(x, scalar_like(0.0, x)), x, mul_scalar(x, slope))


@aten("elu")
def elu(op: Op):
    x = op.t("self", op.out_dtype())
    alpha, scale, in_scale = float(op.arg("alpha", 1.0)), float(op.arg("scale", 1.0)), float(op.arg("input_scale", 1.0))
    neg_part = mul_scalar(add_scalar(ops.exp(mul_scalar(ops.minimum(x, scalar_like(0.0, x)), in_scale)), -1.0), alpha)
    return mul_scalar(ops.where(ops.greater(x, scalar_like(0.0, x)), x, neg_part), scale)


@aten("hardtanh")
def hardtanh(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.clip(x, float(op.arg("min_val", -1.0)), float(op.arg("max_val", 1.0)))


@aten("hardsigmoid")
def hardsigmoid(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.clip(add_scalar(mul_scalar(x, 1 / 6), 0.5), 0.0, 1.0)


@aten("hardswish")
def hardswish(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.mul(x, ops.clip(add_scalar(mul_scalar(x, 1 / 6), 0.5), 0.0, 1.0))


@aten("mish")
def mish(op: Op):
    x = op.t("self", op.out_dtype())
    sp = ops.add(ops.relu(x), ops.log(add_scalar(ops.exp(ops.negate(ops.abs(x))), 1.0)))
    return ops.mul(x, ops.tanh(sp))


@aten("threshold")
def threshold(op: Op):
    x = op.t("self", op.out_dtype())
    return ops.where(ops.greater(x, scalar_like(op.arg("threshold"), x)), x, scalar_like(op.arg("value"), x))


@aten("clamp.default")
def clamp(op: Op):
    x = op.t("self", op.out_dtype())
    lo, hi = op.arg("min"), op.arg("max")
    if x.dtype.is_floating_point:
        return ops.clip(x, -math.inf if lo is None else float(lo), math.inf if hi is None else float(hi))
    if lo is not None:
        x = ops.maximum(x, scalar_like(lo, x))
    if hi is not None:
        x = ops.minimum(x, scalar_like(hi, x))
    return x


@aten("clamp.Tensor")
def clamp_tensor(op: Op):
    dt = op.out_dtype()
    x = op.t("self", dt)
    if op.has("min"):
        x = ops.maximum(x, op.t("min", dt))
    if op.has("max"):
        x = ops.minimum(x, op.t("max", dt))
    return x


@aten("clamp_min")
def clamp_min(op: Op):
    dt = op.out_dtype()
    return ops.maximum(op.t("self", dt), op.t("min", dt))


@aten("clamp_max")
def clamp_max(op: Op):
    dt = op.out_dtype()
    return ops.minimum(op.t("self", dt), op.t("max", dt))


# -- comparisons and logic ---------------------------------------------------------------------------------------------

def _compare(op: Op, fn):
    dt = promoted(op, "self", "other")
    return fn(op.t("self", dt), op.t("other", dt))


@aten("eq.Tensor", "eq.Scalar")
def eq(op: Op):
    return _compare(op, ops.equal)


@aten("ne.Tensor", "ne.Scalar")
def ne(op: Op):
    return _compare(op, ops.not_equal)


@aten("gt.Tensor", "gt.Scalar")
def gt(op: Op):
    return _compare(op, ops.greater)


@aten("lt.Tensor", "lt.Scalar")
def lt(op: Op):
    return _compare(op, ops.less)


@aten("ge.Tensor", "ge.Scalar")
def ge(op: Op):
    return _compare(op, lambda a, b: ops.logical_not(ops.less(a, b)))


@aten("le.Tensor", "le.Scalar")
def le(op: Op):
    return _compare(op, lambda a, b: ops.logical_not(ops.greater(a, b)))


def _as_bool(op: Op, name: str) -> popxl.Tensor:
    v = op.args.get(name)
    if isinstance(v, Value) and v.dtype == torch.bool:
        return op.t(name)
    t = op.t(name)
    return ops.not_equal(t, scalar_like(0, t))


@aten("logical_and")
def logical_and(op: Op):
    return ops.logical_and(_as_bool(op, "self"), _as_bool(op, "other"))


@aten("logical_or")
def logical_or(op: Op):
    return ops.logical_or(_as_bool(op, "self"), _as_bool(op, "other"))


@aten("logical_xor")
def logical_xor(op: Op):
    return ops.not_equal(_as_bool(op, "self"), _as_bool(op, "other"))


@aten("logical_not")
def logical_not(op: Op):
    return ops.logical_not(_as_bool(op, "self"))


def _bool_only(op: Op, what: str):
    if op.out_dtype() != popxl.bool:
        raise op.error(f"{what} is supported on bool tensors only (the IPU has no integer bit operations here)")


@aten("bitwise_and.Tensor", "bitwise_and.Scalar")
def bitwise_and(op: Op):
    _bool_only(op, "bitwise_and")
    return ops.logical_and(op.t("self", popxl.bool), op.t("other", popxl.bool))


@aten("bitwise_or.Tensor", "bitwise_or.Scalar")
def bitwise_or(op: Op):
    _bool_only(op, "bitwise_or")
    return ops.logical_or(op.t("self", popxl.bool), op.t("other", popxl.bool))


@aten("bitwise_xor.Tensor", "bitwise_xor.Scalar")
def bitwise_xor(op: Op):
    _bool_only(op, "bitwise_xor")
    return ops.not_equal(op.t("self", popxl.bool), op.t("other", popxl.bool))


@aten("bitwise_not")
def bitwise_not(op: Op):
    _bool_only(op, "bitwise_not")
    return ops.logical_not(op.t("self"))


@aten("isnan")
def isnan(op: Op):
    return ops.isnan(op.t("self"))


@aten("isinf")
def isinf(op: Op):
    return ops.isinf(op.t("self"))


@aten("where.self")
def where(op: Op):
    dt = op.out_dtype()
    return ops.where(_as_bool(op, "condition"), op.t("self", dt), op.t("other", dt))


@aten("masked_fill.Scalar", "masked_fill.Tensor")
def masked_fill(op: Op):
    dt = op.out_dtype()
    return ops.where(_as_bool(op, "mask"), op.t("value", dt), op.t("self", dt))


@aten("xlogy.Tensor", "xlogy.Scalar_Other", "xlogy.Scalar_Self")
def xlogy(op: Op):
    """x * log(y), 0 where x is 0 (KL divergence's target term)."""
    dt = op.out_dtype()
    x, y = op.t("self", dt), op.t("other", dt)
    prod = ops.mul(x, ops.log(y))
    return ops.where(ops.equal(x, scalar_like(0.0, x)), scalar_like(0.0, x), prod)
