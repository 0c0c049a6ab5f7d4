"""float8 ops: casts with a power-of-two scale and the scaled matmul / convolutions, by
codelets.float8's conversions (ml_dtypes' round to nearest even; out of range -> NaN). float8
values travel as their popxl host dtype (one structured uint8 per element)."""
import numpy as np

from codelets.float8 import format_of, host_decode, host_encode

from ..registry import reference_rule
from .conv import conv, conv_transpose


def _scale(v) -> int:
    return int(np.asarray(v).reshape(-1)[0])


def decode(codes: np.ndarray, log2_scale: int = 0) -> np.ndarray:
    return host_decode(codes.view(np.uint8), format_of(codes.dtype), log2_scale)


@reference_rule("pow2scale_then_cast")
def pow2scale_then_cast(ctx, op, ins):
    x = ins[0].astype(np.float32) if ins[0].dtype == np.float16 else ins[0]
    codes = host_encode(x, op.attrs["dtype"].name, _scale(ins[1]), True)
    return [codes.view(np.uint8).view(ctx.out_dtype()).reshape(x.shape)]


@reference_rule("cast_then_pow2scale")
def cast_then_pow2scale(ctx, op, ins):
    with np.errstate(over="ignore"):
        return [decode(ins[0], _scale(ins[1])).astype(np.float32).astype(ctx.out_dtype())]


@reference_rule("matmul_pow2scaled")
def matmul_pow2scaled(ctx, op, ins):
    a, b = decode(ins[0]), decode(ins[1])
    return [(np.matmul(a, b) * 2.0 ** _scale(ins[2])).astype(np.float32).astype(ctx.out_dtype())]


@reference_rule("conv_pow2scaled", "conv_transpose_pow2scaled")
def conv_pow2scaled(ctx, op, ins):
    a = op.attrs
    x, w = decode(ins[0]), decode(ins[1])
    if op.type == "conv_pow2scaled":
        y = conv(x, w, a["strides"], a["pads"], a["dilations"], a["groups"])
    else:
        y = conv_transpose(x, w, a["strides"], a["pads"], a["dilations"], a["groups"], a["output_shape"])
    return [(y * 2.0 ** _scale(ins[2])).astype(np.float32).astype(ctx.out_dtype())]
