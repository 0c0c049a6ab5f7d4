"""A custom op written in Python: leaky ReLU (Graphcore's custom-op example, the Python way).

    y = x            where x >= 0
    y = alpha * x    where x <  0

Graphcore's version is a C++ PopART Op (shape inference, gradient op), an Opx (Poplar program)
and a C++ vertex. Here the same pieces are Python:

1. codelets (`LeakyRelu`, `LeakyReluGrad`): a Numba kernel over all vertices of a compute set,
   a NumPy reference, a cycle cost model with its derivation, code size;
2. the op (`LeakyReluOp`): its attribute, output shape / type inference, lowering to one vertex
   per piece of the output on each tile, gradient rule and NumPy reference;
3. `leaky_relu(t, alpha)`: the function scripts call.

Run it:  python examples/custom_op.py   (trains one linear layer through the op and checks every
step against NumPy; IPU_SIM_TARGET=small:16 for a smaller IPU)
"""
from __future__ import annotations

import numpy as np
from numba import njit

import ipu
import popxl
from ipu import IN, OUT, Codelet, Field, load, store
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

# -- 1. the codelets ------------------------------------------------------------------------------


@njit(cache=True)
def _leaky_relu_kernel(views, off, cnt, fp, ip):
    x = views[F.in_]  # the columns of LeakyRelu's fields and parameters, by name (below the class)
    y = views[F.out]
    for v in range(off.shape[0]):
        alpha = np.float32(fp[v, FP.alpha])
        for i in range(cnt[v, F.in_]):
            a = load(x, off[v, F.in_] + i)
            if a < 0:
                a = alpha * a
            store(y, off[v, F.out] + i, a)  # a value, not a conditional expression (see docs/custom-ops.md)


@njit(cache=True)
def _leaky_relu_grad_kernel(views, off, cnt, fp, ip):
    g = views[GF.grad]
    x = views[GF.in_]
    dx = views[GF.out]
    for v in range(off.shape[0]):
        alpha = np.float32(fp[v, GFP.alpha])
        for i in range(cnt[v, GF.grad]):
            gi = load(g, off[v, GF.grad] + i)
            if load(x, off[v, GF.in_] + i) < 0:
                gi = alpha * gi
            store(dx, off[v, GF.out] + i, gi)


def leaky_relu_cycles(n, itemsize: int, workers: int = 6, per_vector: int = 6) -> np.ndarray:
    """Tile cycles of one vertex over n elements, split over the tile's worker contexts.

    Derivation (the vertex is a C++ worker loop over 64-bit vectors, 2 floats or 4 halves): per
    vector one 64-bit load, a compare, a multiply, a select and a 64-bit store plus the loop
    branch: `per_vector` = 6 issue cycles of a worker (one instruction per cycle, no
    bundling); a worker's fixed cost is popops UnaryOp1D's 17 cycles and the supervisor's 11 + 9
    (poplibs popopsCycleEstimators.cpp, the estimator this codelet's tests compare it with: it
    lies between popops' RELU and RELU followed by a MULTIPLY).
    """
    n = np.asarray(n, np.int64)
    vw = 8 // itemsize
    per_worker = -(-n // workers)
    vectors = -(-per_worker // vw)
    return 11 + 9 + workers * (17 + per_vector * vectors)


_FLOATS = (ipu.FLOAT32, ipu.FLOAT16)


@ipu.register
class LeakyRelu(Codelet):
    """out = in >= 0 ? in : alpha * in."""
    name = "LeakyRelu"
    fields = (Field("in", IN), Field("out", OUT))
    float_params = ("alpha",)
    supervisor = True
    allowed_types = (_FLOATS, _FLOATS)

    def kernel(self):
        return _leaky_relu_kernel

    def check(self, types, cnt, fp, ip):
        t = self.table(types, cnt, fp, ip)  # the vertex tables by name
        if t.type.in_ != t.type.out:
            raise TypeError(f"LeakyRelu: out must have in's type {t.type.in_.name}, not {t.type.out.name}")
        if np.any(t.count.in_ != t.count.out):
            raise ValueError("LeakyRelu: in and out must have the same number of elements")

    def cycles(self, types, cnt, fp, ip, target):
        t = self.table(types, cnt, fp, ip)
        return leaky_relu_cycles(t.count.in_, t.type.in_.itemsize, target.worker_contexts)

    def code_bytes(self, types):
        return 192  # a compiled C++ loop of about 40 instructions plus the supervisor stub (estimate)

    def reference(self, x, alpha):
        x = np.asarray(x)
        y = np.where(x.astype(np.float32) >= 0, x.astype(np.float32), np.float32(alpha) * x.astype(np.float32))
        return y.astype(x.dtype)


@ipu.register
class LeakyReluGrad(Codelet):
    """dx = x >= 0 ? grad : alpha * grad."""
    name = "LeakyReluGrad"
    fields = (Field("grad", IN), Field("in", IN), Field("out", OUT))
    float_params = ("alpha",)
    supervisor = True
    allowed_types = (_FLOATS, _FLOATS, _FLOATS)

    def kernel(self):
        return _leaky_relu_grad_kernel

    def check(self, types, cnt, fp, ip):
        if len(set(types)) != 1:
            raise TypeError(f"LeakyReluGrad: grad, in and out must have one type, not {[t.name for t in types]}")
        c = self.table(types, cnt).count
        if np.any(c.grad != c.in_) or np.any(c.grad != c.out):
            raise ValueError("LeakyReluGrad: grad, in and out must have the same number of elements")

    def cycles(self, types, cnt, fp, ip, target):
        # one more 64-bit load per vector than LeakyRelu
        t = self.table(types, cnt)
        return leaky_relu_cycles(t.count.grad, t.type.grad.itemsize, target.worker_contexts, per_vector=7)

    def code_bytes(self, types):
        return 224

    def reference(self, grad, x, alpha):
        g = np.asarray(grad)
        out = np.where(np.asarray(x, np.float32) >= 0, g.astype(np.float32), np.float32(alpha) * g.astype(np.float32))
        return out.astype(g.dtype)


F, FP = LeakyRelu.F, LeakyRelu.FP  # the kernels read their tables' columns by name
GF, GFP = LeakyReluGrad.F, LeakyReluGrad.FP


# -- 2. the ops -------------------------------------------------------------------------------------


@register_custom_op
class LeakyReluOp(CustomOp):
    """Leaky ReLU: x where x >= 0, else alpha * x."""
    op_type = "leaky_relu"
    pb_type = "LeakyRelu"
    attrs = ("alpha",)
    input_names = ("t",)

    def infer(self, inputs, alpha):
        t, = inputs
        if t.dtype not in (popxl.float32, popxl.float16):
            raise TypeError(f"leaky_relu: the input must be float32 or float16, not {t.dtype.name}")
        return [(t.shape, t.dtype)]

    def lower(self, lc, op):
        lc.elementwise("LeakyRelu", [lc.input(0)], ["in"], fp={"alpha": op.attrs["alpha"]})

    def grad(self, ctx, op, grads):
        dx, = LeakyReluGradOp.create(grads[0], ctx.input(0), alpha=op.attrs["alpha"])
        return [dx]

    def reference(self, x, alpha):
        return LeakyRelu().reference(x, alpha)


@register_custom_op
class LeakyReluGradOp(CustomOp):
    """The gradient of leaky ReLU: grad where x >= 0, else alpha * grad."""
    op_type = "leaky_relu_grad"
    pb_type = "LeakyReluGrad"
    attrs = ("alpha",)
    gradient = "missing"
    input_names = ("grad", "t")

    def infer(self, inputs, alpha):
        g, x = inputs
        if g.shape != x.shape or g.dtype != x.dtype:
            raise ValueError(f"leaky_relu_grad: grad {g.shape} {g.dtype.name} must match the input {x.shape} "
                             f"{x.dtype.name}")
        return [(x.shape, x.dtype)]

    def lower(self, lc, op):
        lc.elementwise("LeakyReluGrad", [lc.input(0), lc.input(1)], ["grad", "in"], fp={"alpha": op.attrs["alpha"]})

    def reference(self, grad, x, alpha):
        return LeakyReluGrad().reference(grad, x, alpha)


# -- 3. the function ----------------------------------------------------------------------------------


@popxl.op_debug_context
def leaky_relu(t: popxl.Tensor, alpha: float = 0.01) -> popxl.Tensor:
    """Leaky ReLU of `t` (float32 or float16): t where t >= 0, else alpha * t."""
    y, = LeakyReluOp.create(t, alpha=float(alpha))
    return y


# -- a model through it ---------------------------------------------------------------------------------


def main(steps: int = 3, batch: int = 8, features: int = 16, alpha: float = 0.1, lr: float = 0.05) -> float:
    rng = np.random.default_rng(0)
    w0 = rng.normal(size=(features, features)).astype(np.float32) * 0.3
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((batch, features), popxl.float32, "x")
        y_s = popxl.d2h_stream((batch, features), popxl.float32, "y")
        w = popxl.variable(w0, name="w")
        fwd = ir.create_graph(lambda x, w: leaky_relu(x @ w, alpha), x_s.spec, w)
        grad = popxl.transforms.autodiff(fwd)
        x = ops.host_load(x_s)
        info = ops.call_with_info(fwd, x, w)
        y = info.outputs[0]
        ops.host_store(y_s, y)
        # loss 0.5 * sum(y^2): its gradient with respect to y is y
        _, dw = ops.call(grad.graph, y, inputs_dict=grad.inputs_dict(info))[:2]
        ops.scaled_add_(w, dw, b=-lr)
    xs = rng.normal(size=(steps, batch, features)).astype(np.float32)
    want_w = w0.astype(np.float64)
    with popxl.Session(ir, "ipu_model") as sess:
        for x in xs:
            got = sess.run({x_s: x})[y_s]
            z = x @ want_w
            want = np.where(z >= 0, z, alpha * z)
            np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
            want_w = want_w - lr * x.T @ np.where(z >= 0, want, alpha * want)
        np.testing.assert_allclose(sess.get_tensor_data(w), want_w, rtol=1e-4, atol=1e-5)
        cycles = sess.total_cycles
    print(f"leaky_relu custom op: {steps} training steps match NumPy ({cycles:,} cycles on {sess.target.name})")
    return cycles


if __name__ == "__main__":
    main()
