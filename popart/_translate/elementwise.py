"""Element-wise ONNX ops. An ONNX op popxl has an op for is that op (Sigmoid, Erf, Reciprocal:
the same bits and cycles as the PopXL program); the others are built from popxl ops (Softplus,
LeakyRelu, ...), so autodiff and the lowering treat them like any other ops."""
from __future__ import annotations

import numpy as np

import popxl
import popxl.ops as ops

from .context import GRAPHCORE, onnx_op

_UNARY = {"Abs": ops.abs, "Neg": ops.negate, "Exp": ops.exp, "Log": ops.log, "Sqrt": ops.sqrt, "Relu": ops.relu,
          "Tanh": ops.tanh, "Ceil": ops.ceil, "Floor": ops.floor, "Sin": ops.sin, "Cos": ops.cos, "Sign": ops.sign,
          "Not": ops.logical_not, "IsNaN": ops.isnan, "Identity": ops.identity}
_GRAPHCORE_UNARY = {"Gelu": ops.gelu, "GeluErf": ops.geluerf, "Swish": ops.swish, "Nop": ops.identity,
                    "Detach": ops.detach}


@onnx_op(*_UNARY)
def unary(node):
    return _UNARY[node.op_type](node.input(0))


@onnx_op(*_GRAPHCORE_UNARY, domain=GRAPHCORE)
def graphcore_unary(node):
    return _GRAPHCORE_UNARY[node.op_type](node.input(0))


def _scalar(x, like) -> popxl.Tensor:
    return popxl.constant(np.asarray(x, like.dtype.as_numpy()))


@onnx_op("Sigmoid")
def sigmoid_rule(node):
    return ops.sigmoid(node.input(0))  # popops' SIGMOID: one op, whose gradient is one NonLinearityGrad


@onnx_op("Erf")
def erf_rule(node):
    return ops.erf(node.input(0))  # popops' ERF: one op, as popxl records it


@onnx_op("Gelu", attrs=("approximate",))
def onnx_gelu(node):
    """ONNX Gelu (opset 20): exact (erf) by default, tanh with approximate='tanh'."""
    x = node.input(0)
    return ops.gelu(x) if (node.attr("approximate", "none") or "none") == "tanh" else ops.geluerf(x)


@onnx_op("HardSwish")
def hard_swish(node):
    x = node.input(0)  # x * clip(x / 6 + 1 / 2, 0, 1)
    return ops.mul(x, ops.clip(ops.add(ops.mul(x, _scalar(1 / 6, x)), _scalar(0.5, x)), 0.0, 1.0))


@onnx_op("Mish")
def mish(node):
    x = node.input(0)  # x * tanh(softplus(x))
    sp = ops.add(ops.relu(x), ops.log(ops.add(_scalar(1.0, x), ops.exp(ops.negate(ops.abs(x))))))
    return ops.mul(x, ops.tanh(sp))


@onnx_op("IsInf", attrs=("detect_negative", "detect_positive"))
def is_inf(node):
    x = node.input(0)
    pos, neg = int(node.attr("detect_positive", 1)), int(node.attr("detect_negative", 1))
    inf = ops.isinf(x)
    if pos and neg:
        return inf
    side = ops.greater(x, _scalar(0.0, x)) if pos else ops.greater(_scalar(0.0, x), x)
    return ops.logical_and(inf, side) if (pos or neg) else ops.logical_and(inf, ops.logical_not(inf))


@onnx_op("Reciprocal")
def reciprocal(node):
    return ops.reciprocal(node.input(0))  # popops' INVERSE: one op, as popxl records it


@onnx_op("Softplus")
def softplus(node):
    x = node.input(0)  # log(1 + exp(x)) = max(x, 0) + log(1 + exp(-|x|)), stable for large |x|
    return ops.add(ops.relu(x), ops.log(ops.add(_scalar(1.0, x), ops.exp(ops.negate(ops.abs(x))))))


@onnx_op("Softsign")
def softsign(node):
    x = node.input(0)
    return ops.div(x, ops.add(_scalar(1.0, x), ops.abs(x)))


@onnx_op("LeakyRelu", attrs=("alpha",))
def leaky_relu(node):
    x = node.input(0)
    alpha = float(node.attr("alpha", 0.01))
    return ops.where(ops.greater(x, _scalar(0.0, x)), x, ops.mul(x, _scalar(alpha, x)))


@onnx_op("Elu", attrs=("alpha",))
def elu(node):
    x = node.input(0)
    alpha = float(node.attr("alpha", 1.0))
    neg = ops.mul(ops.sub(ops.exp(x), _scalar(1.0, x)), _scalar(alpha, x))
    return ops.where(ops.greater(x, _scalar(0.0, x)), x, neg)


@onnx_op("Selu", attrs=("alpha", "gamma"))
def selu(node):
    x = node.input(0)
    alpha, gamma = float(node.attr("alpha")), float(node.attr("gamma"))
    neg = ops.mul(ops.sub(ops.exp(x), _scalar(1.0, x)), _scalar(alpha, x))
    return ops.mul(ops.where(ops.greater(x, _scalar(0.0, x)), x, neg), _scalar(gamma, x))


@onnx_op("HardSigmoid", attrs=("alpha", "beta"))
def hard_sigmoid(node):
    x = node.input(0)
    y = ops.add(ops.mul(x, _scalar(float(node.attr("alpha")), x)), _scalar(float(node.attr("beta")), x))
    return ops.clip(y, 0.0, 1.0)


@onnx_op("PRelu")
def prelu(node):
    x, slope = node.input(0), node.input(1)
    return ops.where(ops.greater(x, _scalar(0.0, x)), x, ops.mul(x, slope))


@onnx_op("Clip", attrs=("min", "max"))
def clip(node):
    x = node.input(0)
    if node.version < 11:
        lo, hi = node.attr("min", float("-inf")), node.attr("max", float("inf"))
    else:
        lo = float(node.const(1, "min")) if node.has_input(1) else float("-inf")
        hi = float(node.const(2, "max")) if node.has_input(2) else float("inf")
    return ops.clip(x, float(lo), float(hi))


_BINARY = {"Add": ops.add, "Sub": ops.sub, "Mul": ops.mul, "Div": ops.div, "Pow": ops.pow, "Equal": ops.equal,
           "Greater": ops.greater, "And": ops.logical_and, "Or": ops.logical_or}


def _broadcast_attrs_ok(node):
    # opset < 7 used explicit broadcast/axis attributes; numpy broadcasting is what they meant
    if node.has_attr("axis") and node.attr("axis") not in (None,):
        raise node.error("the legacy 'axis' broadcast attribute (opset < 7) is not supported; re-export the model "
                         "with opset >= 7")


@onnx_op(*_BINARY, attrs=("broadcast", "axis"))
def binary(node):
    _broadcast_attrs_ok(node)
    a, b = node.input(0), node.input(1)
    return _BINARY[node.op_type](a, b)  # integer Div truncates toward zero, as ONNX and popops DIVIDE do


@onnx_op("Less")
def less(node):
    return ops.less(node.input(0), node.input(1))


@onnx_op("LessOrEqual")
def less_equal(node):
    return ops.logical_not(ops.greater(node.input(0), node.input(1)))


@onnx_op("GreaterOrEqual")
def greater_equal(node):
    return ops.logical_not(ops.greater(node.input(1), node.input(0)))


@onnx_op("Xor")
def xor(node):
    a, b = node.input(0), node.input(1)
    return ops.logical_and(ops.logical_or(a, b), ops.logical_not(ops.logical_and(a, b)))


@onnx_op("Max")
def maximum(node):
    return ops.maximum(*node.inputs())


@onnx_op("Min")
def minimum(node):
    ts = node.inputs()
    out = ts[0]
    for t in ts[1:]:
        out = ops.minimum(out, t)
    return out


@onnx_op("Sum")
def sum_(node):
    ts = node.inputs()
    out = ts[0]
    for t in ts[1:]:
        out = ops.add(out, t)
    return out if len(ts) > 1 else ops.identity(out)


@onnx_op("Mean")
def mean(node):
    ts = node.inputs()
    out = ts[0]
    for t in ts[1:]:
        out = ops.add(out, t)
    return ops.mul(out, _scalar(1.0 / len(ts), out))


@onnx_op("Mod", attrs=("fmod",))
def mod(node):
    a, b = node.input(0), node.input(1)
    if int(node.attr("fmod", 0)) == 1:
        return ops.fmod(a, b)
    return _python_mod(a, b)


def _python_mod(a, b):
    """The remainder with the sign of the divisor: fmod, plus b where the signs differ."""
    r = ops.fmod(a, b)
    zero = _scalar(0, r)
    fix = ops.logical_and(ops.logical_not(ops.equal(r, zero)),
                          ops.logical_not(ops.equal(ops.greater(r, zero), ops.greater(b, zero))))
    return ops.where(fix, ops.add(r, b), r)


@onnx_op("Remainder", domain=GRAPHCORE)
def remainder(node):
    """Python's remainder: the sign of the divisor (as Mod with fmod=0)."""
    return _python_mod(node.input(0), node.input(1))


@onnx_op("IncrementMod", domain=GRAPHCORE, attrs=("increment", "modulus"))
def increment_mod(node):
    return ops.increment_mod(node.input(0), float(node.attr("increment")), float(node.attr("modulus")))


@onnx_op("PrintTensor", domain=GRAPHCORE, attrs=("print_gradient", "title"))
def print_tensor(node):
    x = node.input(0)
    return ops.print_tensor(x, node.attr("title", "") or node.proto.input[0],
                            print_gradient=bool(int(node.attr("print_gradient", 1))))


@onnx_op("Round")
@onnx_op("Round", domain=GRAPHCORE)
def round_(node):
    """To the nearest integer, halves to the even one (ONNX's definition): floor(x), plus 1 above
    a half, plus |fmod(floor(x), 2)| (1 when the floor is odd) at exactly a half."""
    x = node.input(0)
    f = ops.floor(x)
    d = ops.sub(x, f)
    half = _scalar(0.5, x)
    up = ops.where(ops.greater(d, half), _scalar(1.0, x), _scalar(0.0, x))
    tie = ops.where(ops.equal(d, half), ops.abs(ops.fmod(f, _scalar(2.0, x))), _scalar(0.0, x))
    return ops.add(f, ops.add(up, tie))


@onnx_op("Fmod", domain=GRAPHCORE)
def gc_fmod(node):
    return ops.fmod(node.input(0), node.input(1))


@onnx_op("Where")
def where(node):
    return ops.where(node.input(0), node.input(1), node.input(2))


@onnx_op("Scale", domain=GRAPHCORE, attrs=("scale",))
def scale(node):
    x = node.input(0)
    return ops.mul(x, _scalar(float(node.attr("scale")), x))


@onnx_op("ScaledAdd", domain=GRAPHCORE, attrs=("scale0", "scale1"))
def scaled_add(node):
    x, y = node.input(0), node.input(1)
    a = node.input(2) if node.has_input(2) else float(node.attr("scale0", 1.0))
    b = node.input(3) if node.has_input(3) else float(node.attr("scale1", 1.0))
    return ops.scaled_add(x, y, a, b)


@onnx_op("Expm1", domain=GRAPHCORE)
def expm1(node):
    x = node.input(0)
    return ops.sub(ops.exp(x), _scalar(1.0, x))


@onnx_op("Log1p", domain=GRAPHCORE)
def log1p(node):
    x = node.input(0)
    return ops.log(ops.add(x, _scalar(1.0, x)))


# -- trigonometric and hyperbolic ops: PopART's own definitions (its opx or the pattern that replaces
# the op before lowering, willow/src/patterns), so values and gradients are the ops' it makes

@onnx_op("Asin")
def asin(node):
    return ops.asin(node.input(0))  # AsinOpx: popops ASIN; AsinGrad 1 / sqrt(1 - x^2)


@onnx_op("Acos")
def acos(node):
    x = node.input(0)  # AcosOpPattern: pi / 2 - asin(x)
    return ops.sub(_scalar(np.pi / 2, x), ops.asin(x))


@onnx_op("Atan")
def atan(node):
    x = node.input(0)  # AtanOpx: asin(x / sqrt(1 + x^2))
    return ops.asin(ops.div(x, ops.sqrt(ops.add(_scalar(1.0, x), ops.mul(x, x)))))


@onnx_op("Tan")
def tan(node):
    x = node.input(0)  # TanToSinOverCosPattern: sin(x) / cos(x)
    return ops.div(ops.sin(x), ops.cos(x))


@onnx_op("Sinh")
def sinh(node):
    x = node.input(0)  # (exp(x) - exp(-x)) / 2
    return ops.mul(ops.sub(ops.exp(x), ops.exp(ops.negate(x))), _scalar(0.5, x))


@onnx_op("Cosh")
def cosh(node):
    x = node.input(0)  # CoshOpPattern: (exp(x) + exp(-x)) / 2
    return ops.mul(ops.add(ops.exp(x), ops.exp(ops.negate(x))), _scalar(0.5, x))


@onnx_op("Asinh")
def asinh(node):
    x = node.input(0)  # AsinhOpPattern: log(x + sqrt(x^2 + 1))
    return ops.log(ops.add(x, ops.sqrt(ops.add(ops.mul(x, x), _scalar(1.0, x)))))


@onnx_op("Acosh")
def acosh(node):
    x = node.input(0)  # AcoshOpPattern: log(x + sqrt(x^2 - 1))
    return ops.log(ops.add(x, ops.sqrt(ops.sub(ops.mul(x, x), _scalar(1.0, x)))))


@onnx_op("Atanh")
def atanh(node):
    x = node.input(0)  # AtanhOpPattern: log((1 + x) / (1 - x)) / 2
    one = _scalar(1.0, x)
    return ops.mul(ops.log(ops.div(ops.add(one, x), ops.sub(one, x))), _scalar(0.5, x))


@onnx_op("Shrink", attrs=("lambd", "bias"))
def shrink(node):
    """x + bias below -lambd, x - bias above lambd, 0 between (PopART's ShrinkOp, gradient: 1
    outside [-lambd, lambd], 0 inside)."""
    x = node.input(0)
    lambd, bias = float(node.attr("lambd", 0.5)), float(node.attr("bias", 0.0))
    zero = _scalar(0.0, x)
    low = ops.where(ops.less(x, _scalar(-lambd, x)), ops.add(x, _scalar(bias, x)), zero)
    return ops.where(ops.greater(x, _scalar(lambd, x)), ops.sub(x, _scalar(bias, x)), low)


@onnx_op("ThresholdedRelu", attrs=("alpha",))
def thresholded_relu(node):
    x = node.input(0)  # x above alpha, else 0
    return ops.where(ops.greater(x, _scalar(float(node.attr("alpha", 1.0)), x)), x, _scalar(0.0, x))
