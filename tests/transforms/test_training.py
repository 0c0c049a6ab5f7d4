"""A PopXL training script in the style of the user guide's MNIST example (chapter 15): a Module
whose weights are graph inputs, autodiff, the forward and gradient calls, the loss gradient from
nll_loss_with_softmax_grad, SGD updates of variables, several steps through Session. Checked
against the same training written in NumPy."""
import os

import numpy as np

import popxl
import popxl.ops as ops
import popxl.transforms as transforms


class Linear(popxl.Module):
    def __init__(self):
        self.W = None
        self.b = None

    def build(self, x, out_features):
        self.W = popxl.graph_input((x.shape[-1], out_features), popxl.float32, "W")
        self.b = popxl.graph_input((out_features,), popxl.float32, "b")
        return x @ self.W + self.b


class Net(popxl.Module):
    def __init__(self):
        self.fc1 = Linear()
        self.fc2 = Linear()

    def build(self, x):
        x = ops.gelu(self.fc1(x, 6))
        return self.fc2(x, 3)


def _numpy_step(x, labels, params, lr):
    w1, b1, w2, b2 = params
    k = np.sqrt(2 / np.pi)
    h = x @ w1 + b1
    t = np.tanh(k * (h + 0.044715 * h ** 3))
    a = 0.5 * h * (1 + t)
    z = a @ w2 + b2
    p = np.exp(z - z.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    n = x.shape[0]
    loss = -np.mean(np.log(p[np.arange(n), labels]))
    dz = p.copy()
    dz[np.arange(n), labels] -= 1
    dz /= n
    dw2, db2 = a.T @ dz, dz.sum(0)
    da = dz @ w2.T
    dgelu = 0.5 * (1 + t) + 0.5 * h * (1 - t ** 2) * k * (1 + 3 * 0.044715 * h ** 2)
    dh = da * dgelu
    dw1, db1 = x.T @ dh, dh.sum(0)
    new = [w1 - lr * dw1, b1 - lr * db1, w2 - lr * dw2, b2 - lr * db2]
    return loss, new


def test_mnist_style_training_steps():
    rng = np.random.default_rng(3)
    batch, feats, lr, steps = 4, 5, 0.5, 3
    params0 = [rng.standard_normal((feats, 6)).astype(np.float32) * 0.5, np.zeros(6, np.float32),
               rng.standard_normal((6, 3)).astype(np.float32) * 0.5, np.zeros(3, np.float32)]
    data = [(rng.standard_normal((batch, feats)).astype(np.float32), rng.integers(0, 3, batch).astype(np.int32))
            for _ in range(steps)]

    old = os.environ.get("IPU_SIM_TARGET")
    os.environ["IPU_SIM_TARGET"] = "small:4"
    try:
        ir = popxl.Ir()
        with ir.main_graph:
            img_stream = popxl.h2d_stream((batch, feats), popxl.float32, "image")
            label_stream = popxl.h2d_stream((batch,), popxl.int32, "labels")
            img = ops.host_load(img_stream, "image")
            labels = ops.host_load(label_stream, "labels")

            net = Net()
            fwd_graph = ir.create_graph(net, img)
            bwd_info = transforms.autodiff(fwd_graph)

            W1 = popxl.variable(params0[0], name="W1")
            b1 = popxl.variable(params0[1], name="b1")
            W2 = popxl.variable(params0[2], name="W2")
            b2 = popxl.variable(params0[3], name="b2")
            fwd_info = ops.call_with_info(fwd_graph, img, inputs_dict={net.fc1.W: W1, net.fc1.b: b1,
                                                                        net.fc2.W: W2, net.fc2.b: b2})
            logits = fwd_info.parent_output(0)
            probs = ops.softmax(logits, 1)
            loss, dx = ops.nll_loss_with_softmax_grad(probs, labels)

            activations = bwd_info.inputs_dict(fwd_info)
            bwd_call = ops.call_with_info(bwd_info.graph, dx, inputs_dict=activations)
            grads = bwd_info.fwd_parent_ins_to_grad_parent_outs(fwd_info, bwd_call)
            for v in (W1, b1, W2, b2):
                ops.scaled_add_(v, grads[v], b=-lr)
            assert img not in grads or grads[img].shape == img.shape
            loss_stream = popxl.d2h_stream(loss.shape, loss.dtype, "loss")
            ops.host_store(loss_stream, loss)

        losses = []
        with popxl.Session(ir, "ipu_model") as sess:
            for x, lab in data:
                losses.append(float(sess.run({img_stream: x, label_stream: lab})[loss_stream]))
            final = [sess.get_tensor_data(v) for v in (W1, b1, W2, b2)]
    finally:
        if old is None:
            os.environ.pop("IPU_SIM_TARGET", None)
        else:
            os.environ["IPU_SIM_TARGET"] = old

    params = [p.astype(np.float64) for p in params0]
    want_losses = []
    for x, lab in data:
        loss_v, params = _numpy_step(x.astype(np.float64), lab, params, lr)
        want_losses.append(loss_v)
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4)
    for got, want in zip(final, params):
        np.testing.assert_allclose(got, want, rtol=1e-3, atol=1e-5)
