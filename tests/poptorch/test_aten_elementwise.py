"""Element-wise ATen ops, forward and backward, against PyTorch on the CPU (awkward shapes:
size-1 axes, primes, broadcasting, 0-dim tensors, a tensor spread over many tiles)."""
import torch
import torch.nn.functional as F

from poptorch_helpers import Case, check_cases, t

A, B = (3, 1, 7), (5, 7)


def unary_cases():
    pos = dict(positive=True)
    return [
        Case("relu", torch.relu, [t(*A)]),
        Case("sigmoid", torch.sigmoid, [t(13)]),
        Case("tanh", torch.tanh, [t(2, 11)]),
        Case("exp", torch.exp, [t(*A)]),
        Case("log", torch.log, [t(17, **pos)]),
        Case("sqrt", torch.sqrt, [t(6, 5, **pos)]),
        Case("rsqrt", torch.rsqrt, [t(4, 3, **pos)]),
        Case("abs", torch.abs, [t(1031)]),
        Case("neg", torch.neg, [t(3)]),
        Case("sin", torch.sin, [t(2, 3)]),
        Case("cos", torch.cos, [t(2, 3)]),
        Case("erf", torch.erf, [t(9)]),
        Case("reciprocal", torch.reciprocal, [t(5, **pos)]),
        Case("square", torch.square, [t(5, 2)]),
        Case("log1p", torch.log1p, [t(7, **pos)]),
        Case("expm1", torch.expm1, [t(7)]),
        Case("log2", torch.log2, [t(3, **pos)]),
        Case("gelu", F.gelu, [t(4, 9)], rtol=1e-5, atol=2e-6),
        Case("gelu_tanh", lambda x: F.gelu(x, approximate="tanh"), [t(4, 9)], atol=2e-6),
        Case("silu", F.silu, [t(3, 11)]),
        Case("softplus", F.softplus, [t(3, 11) * 10]),
        Case("leaky_relu", lambda x: F.leaky_relu(x, 0.2), [t(6, 1)]),
        Case("elu", F.elu, [t(2, 7)]),
        Case("hardtanh", lambda x: F.hardtanh(x, -0.5, 0.7), [t(12)]),
        Case("relu6", F.relu6, [t(12) * 5]),
        Case("hardsigmoid", F.hardsigmoid, [t(12) * 3]),
        Case("hardswish", F.hardswish, [t(12) * 3]),
        Case("mish", F.mish, [t(2, 5)]),
        Case("logsigmoid", F.logsigmoid, [t(2, 5)]),
        Case("clamp", lambda x: torch.clamp(x, -0.5, 0.5), [t(4, 4)]),
        Case("clamp_min", lambda x: torch.clamp(x, min=0.1), [t(4, 4)]),
        Case("floor_ceil", lambda x: (torch.floor(x), torch.ceil(x), torch.round(x * 3), torch.trunc(x)), [t(9)],
             grad=False),
        Case("sign", torch.sign, [t(9)], grad=False),
        Case("scalar_tensor_unary", torch.exp, [t()]),
    ]


def binary_cases():
    return [
        Case("add_bcast", lambda a, b: a + b, [t(*A), t(*B)]),
        Case("add_alpha", lambda a, b: torch.add(a, b, alpha=2.5), [t(4, 1), t(1, 6)]),
        Case("sub_scalar", lambda a: a - 1.5, [t(5)]),
        Case("rsub", lambda a: 2.0 - a, [t(5)]),
        Case("mul", lambda a, b: a * b, [t(2, 3, 1), t(3, 4)]),
        Case("div", lambda a, b: a / b, [t(7), t(7, positive=True)]),
        Case("div_scalar", lambda a: a / 3.0, [t(7)]),
        Case("pow_scalar", lambda a: a ** 3, [t(6)]),
        Case("pow_half", lambda a: a ** 0.5, [t(6, positive=True)]),
        Case("pow_tensor", lambda a, b: torch.pow(a, b), [t(5, positive=True), t(5)]),
        Case("maximum", torch.maximum, [t(3, 5), t(5)]),
        Case("minimum", torch.minimum, [t(3, 5), t(3, 1)]),
        Case("add_0dim", lambda a, b: a + b, [t(4, 3), t()]),
        Case("mul_int_float", lambda a, b: a * b, [t(6), t(6, dtype=torch.int64, low=-3, high=4)]),
        Case("int_arith", lambda a, b: (a + b, a * b, a - 3, torch.div(a, 2, rounding_mode="floor"),
                                        a % 3), [t(7, dtype=torch.int32, low=-9, high=9),
                                                 t(7, dtype=torch.int32, low=1, high=5)], grad=False),
        Case("remainder_float", lambda a: torch.remainder(a, 0.7), [t(8)], grad=False),
        Case("fmod", lambda a: torch.fmod(a, 0.7), [t(8)], grad=False),
        Case("addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), [t(3, 4), t(3, 4), t(4)]),
        Case("lerp", lambda a, b: torch.lerp(a, b, 0.3), [t(5), t(5)]),
        Case("lerp_tensor", torch.lerp, [t(5), t(5), t(5, low=0.0, high=1.0)]),
        Case("addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=-0.5), [t(2, 3), t(2, 3), t(3, positive=True)]),
        Case("rsub_tensor", lambda a, b: torch.rsub(a, b, alpha=2), [t(4), t(4)]),
        Case("pow_scalar_base", lambda a: 2.0 ** a, [t(6)]),
        Case("clamp_tensor", lambda a, lo, hi: (torch.clamp(a, min=lo, max=hi), torch.clamp_max(a, hi)),
             [t(3, 4), t(4) - 1, t(4) + 1]),
        Case("threshold", lambda a: F.threshold(a, 0.1, 2.0), [t(9)]),
        Case("xlogy_scalars", lambda a: (torch.xlogy(a, 2.0), torch.xlogy(2.0, a)), [t(5, positive=True)]),
        Case("log10_frac", lambda a: (torch.log10(a), torch.frac(a * 3)), [t(5, positive=True)]),
        Case("float_divisions", lambda a, b: (torch.floor_divide(a, b), torch.fmod(a, b), torch.remainder(a, b),
                                              torch.sgn(a)), [t(7) * 5, t(7, positive=True)], grad=False),
    ]


def logic_cases():
    return [
        Case("compare", lambda a, b: (a < b, a <= b, a > b, a >= b, a == b, a != b), [t(4, 5), t(5)], grad=False),
        Case("compare_scalar", lambda a: (a > 0.5, a == 0.0), [t(4, 5)], grad=False),
        Case("logic", lambda a, b: (a & b, a | b, a ^ b, ~a, torch.logical_not(a), torch.logical_and(a, b)),
             [t(6, dtype=torch.bool), t(6, dtype=torch.bool)], grad=False),
        Case("where", lambda c, a, b: torch.where(c, a, b), [t(3, 1, dtype=torch.bool), t(3, 4), t(4)]),
        Case("where_scalar", lambda c, a: torch.where(c, a, 0.0), [t(5, dtype=torch.bool), t(5)]),
        Case("masked_fill", lambda a, m: a.masked_fill(m, -1e9), [t(2, 3, 4), t(3, 1, dtype=torch.bool)]),
        Case("isnan", lambda a: (torch.isnan(a), torch.isfinite(a), torch.isinf(a / 0.0)), [t(5)], grad=False),
        Case("compare_scalar_more", lambda a: (a >= 0.5, a <= 0.1, a < -0.2), [t(4, 5)], grad=False),
        Case("logic_more", lambda a, b: (torch.logical_or(a, b), torch.logical_xor(a, b), a & True, a | False,
                                         a ^ True), [t(6, dtype=torch.bool), t(6, dtype=torch.bool)], grad=False),
        Case("masked_fill_tensor", lambda a, m, v: a.masked_fill(m, v), [t(3, 4), t(4, dtype=torch.bool), t()],
             no_grad_inputs=(2,)),
    ]


def test_unary_ops(small_ipu):
    check_cases(unary_cases())


def test_binary_ops(small_ipu):
    check_cases(binary_cases())


def test_logic_ops(small_ipu):
    check_cases(logic_cases())
