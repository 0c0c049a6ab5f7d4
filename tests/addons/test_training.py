"""popxl-addons unchanged: a Module of addons.layers.Linear trained through addons.autodiff and an
optimizer graph, gradient accumulation (autodiff_with_accumulation) and recomputation; every
number checked against NumPy doing the same maths."""

import numpy as np
import pytest

import popxl
from popxl import ops

from .conftest import needs

B, D_IN, D_HID, D_OUT = 4, 6, 5, 3
LR = 0.1


def _net(addons):
    class Net(addons.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = addons.layers.Linear(D_HID)
            self.fc2 = addons.layers.Linear(D_OUT)

        def build(self, x):
            return self.fc2(ops.relu(self.fc1(x)))

    return Net()


def _sgd(addons):
    class SGD(addons.Module):
        @popxl.in_sequence()
        def build(self, var: popxl.TensorByRef, grad: popxl.Tensor):
            ops.scaled_add_(var, grad, b=-LR)

    return SGD()


def _forward_np(w, x):
    h_pre = x @ w["fc1.weight"] + w["fc1.bias"]
    h = np.maximum(h_pre, 0)
    return h_pre, h, h @ w["fc2.weight"] + w["fc2.bias"]


def _grads_np(w, x, target):
    """Gradients of 0.5 * sum((y - target)^2) / B (dy = (y - target) / B)."""
    h_pre, h, y = _forward_np(w, x)
    dy = (y - target) / B
    dh = (dy @ w["fc2.weight"].T) * (h_pre > 0)
    return {"fc2.weight": h.T @ dy, "fc2.bias": dy.sum(0), "fc1.weight": x.T @ dh, "fc1.bias": dh.sum(0)}


def _build_training(addons, recompute=False):
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((B, D_IN), popxl.float32, "x")
        t_s = popxl.h2d_stream((B, D_OUT), popxl.float32, "target")
        y_s = popxl.d2h_stream((B, D_OUT), popxl.float32, "y")
        x, target = ops.host_load(x_s), ops.host_load(t_s)
        facts, graph = _net(addons).create_graph(x)
        dgraph = addons.autodiff(graph)
        if recompute:
            dgraph = addons.transforms.recompute_graph(dgraph)
        variables = facts.init()
        fwd = graph.bind(variables).call_with_info(x)
        y = fwd.outputs[0]  # then the activations autodiff added as outputs
        ops.host_store(y_s, y)
        dy = (y - target) / float(B)
        grad_inputs = dgraph.grad_graph_info.inputs_dict(fwd)
        grads_call = dgraph.bind().call_with_info(dy, args=grad_inputs)
        grads = dgraph.grad_graph_info.fwd_graph_ins_to_grad_parent_outs(grads_call)
        for name, var in variables.named_tensors.items():
            sgd_facts, sgd = _sgd(addons).create_graph(var, var)
            sgd.bind(sgd_facts.init()).call(var, grads[graph.args.named_tensors[name]])
    return ir, variables, (x_s, t_s, y_s)


@pytest.mark.parametrize("recompute", [pytest.param(False, marks=pytest.mark.every_branch), True])
def test_linear_module_trained_by_autodiff_and_an_optimizer_graph(addons, recompute):
    ir, variables, (x_s, t_s, y_s) = _build_training(addons, recompute)
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(3, B, D_IN)).astype(np.float32)
    ts = rng.normal(size=(3, B, D_OUT)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        w = {name: sess.get_tensor_data(v).astype(np.float64) for name, v in variables.named_tensors.items()}
        assert np.abs(w["fc1.weight"]).max() > 0 and not w["fc1.bias"].any()  # addons' truncnorm / zeros init
        for x, t in zip(xs, ts):
            y = sess.run({x_s: x, t_s: t})[y_s]
            np.testing.assert_allclose(y, _forward_np(w, x)[2], rtol=1e-5, atol=1e-6)
            for name, g in _grads_np(w, x, t).items():
                w[name] = w[name] - LR * g
        got = {name: sess.get_tensor_data(v) for name, v in variables.named_tensors.items()}
    for name in w:
        np.testing.assert_allclose(got[name], w[name], rtol=1e-5, atol=1e-6, err_msg=name)


def test_recomputation_recomputes_the_forward_in_the_gradient_graph(addons):
    ir = popxl.Ir()
    with ir.main_graph:
        x = popxl.variable(np.ones((B, D_IN), np.float32))
        facts, graph = _net(addons).create_graph(x)
        dgraph = addons.autodiff(graph)
        rgraph = addons.transforms.recompute_graph(dgraph)
    called = {op.attrs["graph"] for op in rgraph.graph.ops if op.type == "call"}
    assert called == {graph.graph, dgraph.graph}  # the forward again, then the gradient graph
    fwd_inputs = [ec for ec in rgraph.grad_graph_info.expected_inputs
                  if ec.connection_type.name == "Fwd"]
    assert {ec.fwd_tensor for ec in fwd_inputs} == set(graph.graph.inputs)  # only inputs, no activations


def test_gradient_accumulation_running_mean(addons):
    """autodiff_with_accumulation: accumulators (by-ref inputs of the gradient graph) hold the
    running mean of each weight's gradient over the micro-batches; the optimizer applies it."""
    n_micro = 3
    ir = popxl.Ir()
    with ir.main_graph:
        x_s = popxl.h2d_stream((B, D_IN), popxl.float32, "x")
        t_s = popxl.h2d_stream((B, D_OUT), popxl.float32, "target")
        facts, graph = _net(addons).create_graph(popxl.TensorSpec((B, D_IN), popxl.float32))
        accum_facts, dgraph = addons.autodiff_with_accumulation(graph, graph.args.tensors)
        variables = facts.init()
        accums = accum_facts.init()

        def micro_batch():
            x, target = ops.host_load(x_s), ops.host_load(t_s)
            fwd = graph.bind(variables).call_with_info(x)
            dy = (fwd.outputs[0] - target) / float(B)
            dgraph.bind(accums).call(dy, args=dgraph.grad_graph_info.inputs_dict(fwd))

        for _ in range(n_micro):  # each host_load takes the next of the step's n_micro transfers
            micro_batch()
        for name, var in variables.named_tensors.items():
            sgd_facts, sgd = _sgd(addons).create_graph(var, var)
            sgd.bind(sgd_facts.init()).call(var, accums.to_dict()["accum." + name])
        ops.var_updates.accumulator_scale_(accums.mean_accum_counter, 0.0)
    ir.num_host_transfers = n_micro
    rng = np.random.default_rng(1)
    xs = rng.normal(size=(n_micro, B, D_IN)).astype(np.float32)
    ts = rng.normal(size=(n_micro, B, D_OUT)).astype(np.float32)
    with popxl.Session(ir, "ipu_model") as sess:
        w = {name: sess.get_tensor_data(v).astype(np.float64) for name, v in variables.named_tensors.items()}
        sess.run({x_s: xs, t_s: ts})
        got = {name: sess.get_tensor_data(v) for name, v in variables.named_tensors.items()}
        counter = sess.get_tensor_data(accums.mean_accum_counter)
    mean_grads = {k: np.mean([_grads_np(w, x, t)[k] for x, t in zip(xs, ts)], axis=0) for k in w}
    for name in w:
        np.testing.assert_allclose(got[name], w[name] - LR * mean_grads[name], rtol=1e-5, atol=1e-6, err_msg=name)
    assert counter == 0


def test_embedding_layer_norm_and_adam_match_the_reference_interpreter(addons):
    """addons.layers Embedding + LayerNorm + Linear, addons.ops.cross_entropy_with_grad and the
    AdamOptimizerStep module (float16 first moments), two training steps: the simulated run and
    popxl's NumPy reference interpreter agree on the losses and the trained weights."""
    from popxl_addons.layers import Embedding, LayerNorm, Linear
    from popxl_addons.optimizers.adam import AdamOptimizerStep

    class Lm(addons.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.ln, self.head = Embedding(popxl.float32, 16, 8), LayerNorm(), Linear(16)

        def build(self, idx):
            return self.head(self.ln(self.emb(idx)))

    # Embedding's initial weights come from scipy's truncnorm.rvs, which draws from NumPy's global
    # generator: seeded, so every run compares the same two Adam steps (an unseeded draw can put a
    # gradient near zero, where Adam's m / sqrt(v) flips sign on a rounding difference)
    np.random.seed(0)
    n = 6
    ir = popxl.Ir()
    with ir.main_graph, popxl.in_sequence(True):
        i_s = popxl.h2d_stream((n,), popxl.int32, "idx")
        l_s = popxl.h2d_stream((n,), popxl.int32, "labels")
        loss_s = popxl.d2h_stream((), popxl.float32, "loss")
        facts, fwd = Lm().create_graph(popxl.TensorSpec((n,), popxl.int32))
        bwd = addons.autodiff(fwd, grads_required=fwd.args.tensors)
        variables = facts.init()
        info = fwd.bind(variables).call_with_info(ops.host_load(i_s))
        loss, dlogits = addons.ops.cross_entropy_with_grad(info.outputs[0], ops.host_load(l_s))
        ops.host_store(loss_s, loss)
        grads = bwd.call(dlogits, args=bwd.grad_graph_info.inputs_dict(info))
        name_of = {t: name for name, t in fwd.args.named_tensors.items()}
        for t, g in zip(fwd.args.tensors, grads):  # the gradients come in grads_required order
            var = variables.named_tensors[name_of[t]]
            opt_facts, opt = AdamOptimizerStep().create_graph(var, g, lr=0.01)
            opt.bind(opt_facts.init()).call(var, g)
    rng = np.random.default_rng(2)
    feeds = [{i_s: rng.integers(0, 16, n).astype(np.int32), l_s: rng.integers(0, 16, n).astype(np.int32)}
             for _ in range(2)]
    ref = popxl.reference.Interpreter(ir)
    with popxl.Session(ir, "ipu_model") as sess:
        for f in feeds:
            got, want = sess.run(f)[loss_s], ref.run(f)[loss_s]
            np.testing.assert_allclose(got, want, rtol=1e-4)
        for name, v in variables.named_tensors.items():
            np.testing.assert_allclose(sess.get_tensor_data(v), ref.get_tensor_data(v), rtol=1e-3, atol=1e-5,
                                       err_msg=name)
    # the first loss is the cross entropy of the initial weights, computed here with NumPy
    w = {k: np.asarray(v._data, np.float64) for k, v in variables.named_tensors.items()}
    h = w["emb.weight"][feeds[0][i_s]]
    h = (h - h.mean(1, keepdims=True)) / np.sqrt(h.var(1, keepdims=True) + 1e-5) * w["ln.weight"] + w["ln.bias"]
    logits = h @ w["head.weight"] + w["head.bias"]
    logp = logits - logits.max(1, keepdims=True)
    logp -= np.log(np.exp(logp).sum(1, keepdims=True))
    first = popxl.reference.Interpreter(ir).run(feeds[0])[loss_s]
    np.testing.assert_allclose(first, -logp[np.arange(n), feeds[0][l_s]].mean(), rtol=1e-5)


def test_conv2d_layer_forward_and_gradients(addons):
    """addons.layers.Conv2D (ops.conv with padding, bias) and its gradients through addons.autodiff,
    against NumPy."""
    needs(addons, "popxl_addons.layers.conv")
    from popxl_addons.layers.conv import Conv2D

    n, c, h, w, oc = 2, 3, 5, 5, 4
    rng = np.random.default_rng(6)
    x = rng.normal(size=(n, c, h, w)).astype(np.float32)
    gy = rng.normal(size=(n, oc, h, w)).astype(np.float32)
    ir = popxl.Ir()
    with ir.main_graph:
        facts, g = Conv2D(oc, 3, paddings=(1, 1, 1, 1)).create_graph(popxl.TensorSpec(x.shape, popxl.float32))
        dg = addons.autodiff(g)
        v = facts.init()
        info = g.bind(v).call_with_info(popxl.variable(x))
        grads = dict(zip(dg.grad_graph_info.outputs,  # forward input -> its gradient
                         dg.call(popxl.variable(gy), args=dg.grad_graph_info.inputs_dict(info))))
        outs = {}
        for name, t in (("y", info.outputs[0]), ("dx", grads[g.graph.inputs[0]]), ("dw", grads[g.args.weight])):
            outs[name] = popxl.d2h_stream(t.shape, t.dtype, name)
            ops.host_store(outs[name], t)
    with popxl.Session(ir, "ipu_model") as sess:
        got = sess.run()
        wt = sess.get_tensor_data(v.weight).astype(np.float64)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    cols = np.stack([xp[:, :, i:i + h, j:j + w] for i in range(3) for j in range(3)], axis=2)  # n c 9 h w
    y = np.einsum("nckhw,ock->nohw", cols, wt.reshape(oc, c, 9))
    np.testing.assert_allclose(got[outs["y"]], y, rtol=1e-4, atol=1e-5)
    dw = np.einsum("nckhw,nohw->ock", cols, gy.astype(np.float64)).reshape(wt.shape)
    np.testing.assert_allclose(got[outs["dw"]], dw, rtol=1e-4, atol=1e-4)
    dcols = np.einsum("nohw,ock->nckhw", gy.astype(np.float64), wt.reshape(oc, c, 9))
    dxp = np.zeros_like(xp)
    for k, (i, j) in enumerate((i, j) for i in range(3) for j in range(3)):
        dxp[:, :, i:i + h, j:j + w] += dcols[:, :, k]
    np.testing.assert_allclose(got[outs["dx"]], dxp[:, :, 1:-1, 1:-1], rtol=1e-4, atol=1e-5)
