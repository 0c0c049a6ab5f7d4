"""Build a forward graph, differentiate it, and compute its gradients three ways: the gradient graph
run by the NumPy interpreter (float64), central finite differences of the forward graph (float64),
and the gradient graph run through ``popxl.Session`` on a small simulated IPU (float32)."""
import os

import numpy as np

import popxl
import popxl.ops as ops
from popxl.transforms import ExpectedConnectionType, autodiff, decompose_sum

from popxl.reference import evaluate, run_graph


class GradCase:
    """A forward function of graph inputs, its input data and the inputs to differentiate."""

    def __init__(self, name, fn, inputs, wrt=None, fd_eps=1e-6, rtol=1e-5, atol=1e-6, session_rtol=2e-3,
                 session_atol=1e-4, reference=None, session_reference=None, decompose=False):
        self.name = name
        self.decompose = decompose  # apply popxl.transforms.decompose_sum to the gradient graph
        # (inputs, cotangents, forward outputs from the IPU) -> gradients, for random ops whose masks
        # the NumPy interpreter can't reproduce
        self.session_reference = session_reference
        self.reference = reference  # (inputs, cotangents) -> gradients, instead of finite differences
        self.fn = fn
        self.inputs = [np.asarray(x) for x in inputs]
        float_idx = [i for i, x in enumerate(self.inputs) if np.issubdtype(x.dtype, np.floating)]
        self.wrt = float_idx if wrt is None else list(wrt)
        self.fd_eps, self.rtol, self.atol = fd_eps, rtol, atol
        self.session_rtol, self.session_atol = session_rtol, session_atol

    def __repr__(self):
        return self.name


def build(case: GradCase):
    """Ir with the forward graph and its grad info. Returns (ir, fwd_graph, fwd_outputs, info)."""
    ir = popxl.Ir()
    with ir.main_graph:
        specs = [popxl.TensorSpec(x.shape, popxl.dtype.as_dtype(x.dtype)) for x in case.inputs]
        g = ir.create_graph(case.fn, *specs)
    outs = list(g.outputs)
    info = autodiff(g, grads_required=[g.inputs[i] for i in case.wrt])
    if case.decompose:
        decompose_sum(info.graph)
    return ir, g, outs, info


def cotangents(outs, seed=1):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(t.shape) if t.dtype.is_floating_point else None for t in outs]


def numpy_grads(case: GradCase):
    ir, g, outs, info = build(case)
    cots = cotangents(outs)
    env = evaluate(g, case.inputs, upcast=True)
    args = []
    k = 0  # grads_provided are the outputs, in order (an output may appear twice)
    for conn in info.expected_inputs:
        t = conn.fwd_tensor
        if conn.connection_type is ExpectedConnectionType.FwdGrad:
            assert t is outs[k]
            args.append(cots[k])
            k += 1
        else:
            args.append(env[t])
    return run_graph(info.graph, args, upcast=True), (ir, g, outs, info, cots)


def fd_grads(case: GradCase, outs_cots):
    g, outs, cots = outs_cots
    if case.reference is not None:
        return case.reference([x.astype(np.float64) for x in case.inputs], cots)

    def loss(inputs):
        env = evaluate(g, inputs, upcast=True)
        return sum(float(np.sum(env[t] * c)) for t, c in zip(outs, cots) if c is not None)

    base = [x.astype(np.float64) if np.issubdtype(x.dtype, np.floating) else x for x in case.inputs]
    res = []
    for i in case.wrt:
        x = base[i]
        gr = np.zeros(x.shape)
        for idx in np.ndindex(*x.shape):
            plus = [b.copy() for b in base]
            minus = [b.copy() for b in base]
            plus[i][idx] += case.fd_eps
            minus[i][idx] -= case.fd_eps
            gr[idx] = (loss(plus) - loss(minus)) / (2 * case.fd_eps)
        res.append(gr)
    return res


def session_grads(case: GradCase, target="small:4", with_forward=False):
    """The gradients computed by the simulated IPU: forward call, gradient call, host_store.
    With ``with_forward`` also the forward outputs and the cotangents used."""
    old = os.environ.get("IPU_SIM_TARGET")
    os.environ["IPU_SIM_TARGET"] = target
    try:
        ir = popxl.Ir()
        with ir.main_graph:
            specs = [popxl.TensorSpec(x.shape, popxl.dtype.as_dtype(x.dtype)) for x in case.inputs]
            g = ir.create_graph(case.fn, *specs)
            outs = list(g.outputs)
            info = autodiff(g, grads_required=[g.inputs[i] for i in case.wrt])
            if case.decompose:
                decompose_sum(info.graph)
            cots = cotangents(outs)
            feeds = {}
            xs = []
            for i, x in enumerate(case.inputs):
                s = popxl.h2d_stream(x.shape, popxl.dtype.as_dtype(x.dtype), f"x{i}")
                feeds[s] = x
                xs.append(ops.host_load(s, f"x{i}"))
            fwd_info = ops.call_with_info(g, *xs)
            seeds = []
            k = 0
            for j, conn in enumerate(info.expected_inputs):
                if conn.connection_type is not ExpectedConnectionType.FwdGrad:
                    continue
                t = conn.fwd_tensor
                c = cots[k].astype(t.dtype.as_numpy())
                k += 1
                s = popxl.h2d_stream(t.shape, t.dtype, f"cot{j}")
                feeds[s] = c
                seeds.append(ops.host_load(s, f"cot{j}"))
            grads = ops.call(info.graph, *seeds, inputs_dict=info.inputs_dict(fwd_info))
            d2h = []
            for k, gt in enumerate(grads):
                s = popxl.d2h_stream(gt.shape, gt.dtype, f"grad{k}")
                ops.host_store(s, gt)
                d2h.append(s)
            fwd_d2h = []
            if with_forward:
                for k in range(len(outs)):
                    t = fwd_info.parent_output(k)
                    s = popxl.d2h_stream(t.shape, t.dtype, f"fwd{k}")
                    ops.host_store(s, t)
                    fwd_d2h.append(s)
        with popxl.Session(ir, "ipu_model") as sess:
            res = sess.run(feeds)
    finally:
        if old is None:
            os.environ.pop("IPU_SIM_TARGET", None)
        else:
            os.environ["IPU_SIM_TARGET"] = old
    if with_forward:
        return [res[s] for s in d2h], [res[s] for s in fwd_d2h], cots
    return [res[s] for s in d2h]
