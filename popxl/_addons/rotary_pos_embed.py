"""RotaryPosEmbed, as popxl-addons' C++ op (ops/rotary_pos_embed/*.cpp) and the copies Graphcore's
Dolly and Llama applications ship under the same module name: rotary positional embeddings.

x (rank 4, the last axis the head's hidden units) is rotated on its first `rotary_dim` units,
taken as rotary_dim / 2 complex numbers (real, imaginary interleaved); sin and cos (rank 3:
(1 or batch, seq, rotary_dim / 2), inputs 1 and 2) broadcast over axis 2 as poplar's
`expand({2, 3})` does, so x is (batch, seq, heads, hidden):
    y_real = x_real cos - x_img sin,   y_img = x_img cos + x_real sin,
and the units past rotary_dim pass through. The gradient of x is the rotation by the opposite
angle (RotaryPosEmbedGradOpx: the same op with -sin); sin and cos get none.

The applications' copy (`rotateTensor` of their rotary_pos_embedx.cpp) takes the rotated units as
two contiguous halves instead, x1 = x[..., :r/2] and x2 = x[..., r/2:], as GPT-NeoX and Llama do:
    y1 = x1 cos - x2 sin,   y2 = x2 cos + x1 sin.
Its gradient op was left as popxl-addons' (`rotateGradTensor`: interleaved pairs), and so it is
served here: the same numbers as the C++ op, which only matter to a program that trains through it.

Which one serves a program is decided by the sources its cppimport compiles (popxl/_addons/_sources.py):
the fingerprints below are of the normalised bodies of those functions."""
from __future__ import annotations

from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph
from ._sources import Variant


def _infer(op, inputs, rotary_dim):
    x, sin, cos = inputs
    r = int(rotary_dim)
    name = op.pb_type
    if x.rank != 4:
        raise ValueError(f"{name}: x should have rank 4 (batch, seq, heads, hidden), not shape {x.shape}")
    if sin.rank != 3 or cos.rank != 3:
        raise ValueError(f"{name}: the trig tables should have rank 3 (1 or batch, seq, rotary_dim / 2), "
                         f"not {sin.shape} and {cos.shape}")
    if r % 2 or not 0 < r <= x.shape[3]:
        raise ValueError(f"{name}: rotary_dim must be even and at most {x.shape[3]}, not {r}")
    want = (x.shape[1], r // 2)
    for label, t in (("sin", sin), ("cos", cos)):
        if tuple(t.shape[1:]) != want or t.shape[0] not in (1, x.shape[0]):
            raise ValueError(f"{name}: {label} must be (1 or {x.shape[0]}, {want[0]}, {want[1]}), not {t.shape}")
    return [(x.shape, x.dtype)]


def _rotate(x, sin, cos, rotary_dim, split):
    """x with its first rotary_dim hidden units rotated; `split(xr)` gives the (real, imaginary)
    parts and is undone by the `join` it returns."""
    b, s, h, d = x.shape
    r = int(rotary_dim)
    xr = x if r == d else x[:, :, :, :r]
    real, img, join = split(xr, (b, s, h, r // 2))
    sn = sin.reshape((sin.shape[0], s, 1, r // 2))  # poplar's expand: broadcast over the heads
    cs = cos.reshape((cos.shape[0], s, 1, r // 2))
    y = join(real * cs - img * sn, img * cs + real * sn)
    if r < d:
        y = ops.concat([y, x[:, :, :, r:]], axis=3)
    return y


def _interleaved(xr, half):
    """Units (2i, 2i + 1) are the real and imaginary parts of complex number i."""
    pairs = xr.reshape(half + (2,))
    real = pairs[:, :, :, :, 0:1].reshape(half)
    img = pairs[:, :, :, :, 1:2].reshape(half)

    def join(y_real, y_img):
        y = ops.concat([y_real.reshape(half + (1,)), y_img.reshape(half + (1,))], axis=4)
        return y.reshape(half[:3] + (2 * half[3],))
    return real, img, join


def _halves(xr, half):
    """Units i and i + r/2 are the parts of complex number i (contiguous halves)."""
    n = half[3]
    return xr[:, :, :, :n], xr[:, :, :, n:], lambda y1, y2: ops.concat([y1, y2], axis=3)


@register_custom_op
class RotaryPosEmbed(CustomOp):
    """Rotate pairs of hidden units (2i, 2i + 1) of x by the angles whose sin and cos are given
    (popxl-addons)."""
    op_type = "rotary_pos_embed"
    pb_type = "RotaryPosEmbed"
    attrs = ("rotary_dim",)
    input_names = ("t", "sin", "cos")

    def infer(self, inputs, rotary_dim):
        return _infer(self, inputs, rotary_dim)

    def expand(self, x, sin, cos, rotary_dim):
        return _rotate(x, sin, cos, rotary_dim, _interleaved)

    def grad(self, ctx, fwd, grads):
        return _grad_interleaved(ctx, fwd, grads)


@register_custom_op
class RotaryPosEmbedHalves(CustomOp):
    """Rotate the hidden units i and i + rotary_dim / 2 of x together (the Dolly and Llama
    applications' own op of the same module name)."""
    op_type = "rotary_pos_embed_halves"
    pb_type = "RotaryPosEmbed"
    attrs = ("rotary_dim",)
    input_names = ("t", "sin", "cos")

    def infer(self, inputs, rotary_dim):
        return _infer(self, inputs, rotary_dim)

    def expand(self, x, sin, cos, rotary_dim):
        return _rotate(x, sin, cos, rotary_dim, _halves)

    def grad(self, ctx, fwd, grads):
        # the applications' RotaryPosEmbedGradOpx kept popxl-addons' interleaved rotateGradTensor
        return _grad_interleaved(ctx, fwd, grads)


def _grad_interleaved(ctx, fwd, grads):
    """RotaryPosEmbedGradOpx: the interleaved rotation of dy by the opposite angle."""
    g = grads[0]
    sin, cos = ctx.input(1), ctx.input(2)
    dx, = RotaryPosEmbed().create(g, -sin, cos, rotary_dim=fwd.attrs["rotary_dim"])
    return [dx, None, None]


def _creator(op_def):
    def create(graph, inputs, outputs, rotaryDim, settings=None):  # noqa: N803
        return create_in_graph(op_def, graph, inputs, outputs, dict(rotary_dim=int(rotaryDim)), settings)
    return create


# fingerprints of the normalised function bodies (popxl/_addons/_sources.py) of each known source
_GROW = {"RotaryPosEmbedOpx::grow": {"cea3c5119e017a10", "f06bcad4e82d81aa"},  # snap / poplar API
         "RotaryPosEmbedGradOpx::grow": {"719df9489d97372a", "bb29c95fecec731e"}}
_GRAD_INTERLEAVED = {"4d9bb067fbd609f3"}

VARIANTS = {"rotary_pos_embed_binding": [
    Variant("interleaved pairs (popxl-addons sdk-release-3.1 to 3.4)",
            {"rotateTensor": {"fffd6f505c29f1fc"}, "rotateGradTensor": _GRAD_INTERLEAVED, **_GROW},
            [binding_class("RotaryPosEmbedOp", RotaryPosEmbed(), _creator(RotaryPosEmbed()))]),
    Variant("contiguous halves (Graphcore's Dolly and Llama applications)",
            {"rotateTensor": {"77f31505f9134886"}, "rotateGradTensor": _GRAD_INTERLEAVED, **_GROW},
            [binding_class("RotaryPosEmbedOp", RotaryPosEmbedHalves(), _creator(RotaryPosEmbedHalves()))]),
]}
