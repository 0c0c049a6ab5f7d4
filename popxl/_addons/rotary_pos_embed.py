"""popxl-addons' RotaryPosEmbed (ops/rotary_pos_embed/*.cpp): rotary positional embeddings.

x (rank 4, the last axis the head's hidden units) is rotated on its first `rotary_dim` units,
taken as rotary_dim / 2 complex numbers (real, imaginary interleaved); sin and cos (rank 3:
(1 or batch, seq, rotary_dim / 2), inputs 1 and 2) broadcast over axis 2 as poplar's
`expand({2, 3})` does, so x is (batch, seq, heads, hidden):
    y_real = x_real cos - x_img sin,   y_img = x_img cos + x_real sin,
and the units past rotary_dim pass through. The gradient of x is the rotation by the opposite
angle (RotaryPosEmbedGradOpx: the same op with -sin); sin and cos get none."""
from __future__ import annotations

from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph


@register_custom_op
class RotaryPosEmbed(CustomOp):
    """Rotate pairs of hidden units of x by the angles whose sin and cos are given."""
    op_type = "rotary_pos_embed"
    pb_type = "RotaryPosEmbed"
    attrs = ("rotary_dim",)
    input_names = ("t", "sin", "cos")

    def infer(self, inputs, rotary_dim):
        x, sin, cos = inputs
        r = int(rotary_dim)
        if x.rank != 4:
            raise ValueError(f"RotaryPosEmbed: x should have rank 4 (batch, seq, heads, hidden), not shape {x.shape}")
        if sin.rank != 3 or cos.rank != 3:
            raise ValueError("RotaryPosEmbed: the trig tables should have rank 3 (1 or batch, seq, rotary_dim / 2), "
                             f"not {sin.shape} and {cos.shape}")
        if r % 2 or not 0 < r <= x.shape[3]:
            raise ValueError(f"RotaryPosEmbed: rotary_dim must be even and at most {x.shape[3]}, not {r}")
        want = (x.shape[1], r // 2)
        for name, t in (("sin", sin), ("cos", cos)):
            if tuple(t.shape[1:]) != want or t.shape[0] not in (1, x.shape[0]):
                raise ValueError(f"RotaryPosEmbed: {name} must be (1 or {x.shape[0]}, {want[0]}, {want[1]}), "
                                 f"not {t.shape}")
        return [(x.shape, x.dtype)]

    def expand(self, x, sin, cos, rotary_dim):
        b, s, h, d = x.shape
        r = int(rotary_dim)
        xr = x if r == d else x[:, :, :, :r]
        pairs = xr.reshape((b, s, h, r // 2, 2))
        real = pairs[:, :, :, :, 0:1].reshape((b, s, h, r // 2))
        img = pairs[:, :, :, :, 1:2].reshape((b, s, h, r // 2))
        sn = sin.reshape((sin.shape[0], s, 1, r // 2))
        cs = cos.reshape((cos.shape[0], s, 1, r // 2))
        y_real = real * cs - img * sn
        y_img = img * cs + real * sn
        y = ops.concat([y_real.reshape((b, s, h, r // 2, 1)), y_img.reshape((b, s, h, r // 2, 1))], axis=4)
        y = y.reshape((b, s, h, r))
        if r < d:
            y = ops.concat([y, x[:, :, :, r:]], axis=3)
        return y

    def grad(self, ctx, fwd, grads):
        g = grads[0]
        sin, cos = ctx.input(1), ctx.input(2)
        dx, = self.create(g, -sin, cos, rotary_dim=fwd.attrs["rotary_dim"])
        return [dx, None, None]


def _create(graph, inputs, outputs, rotaryDim, settings=None):  # noqa: N803
    return create_in_graph(RotaryPosEmbed(), graph, inputs, outputs, dict(rotary_dim=int(rotaryDim)), settings)


BINDING_CLASSES = {"rotary_pos_embed_binding": [binding_class("RotaryPosEmbedOp", RotaryPosEmbed(), _create)]}
