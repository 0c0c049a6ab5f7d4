"""Checking PopTorch against PyTorch on the CPU: many small cases run as one model, so one
compile covers a whole family of ops."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, List, Sequence

import numpy as np
import torch

import poptorch


@dataclass
class Case:
    """fn(*inputs) -> tensor or tuple of tensors. Float inputs are trained parameters (their
    gradients are compared); other inputs are buffers."""
    name: str
    fn: Callable
    inputs: Sequence[torch.Tensor]
    grad: bool = True           # compare gradients of float inputs too
    rtol: float = 1e-5
    atol: float = 1e-6
    no_grad_inputs: Sequence[int] = field(default_factory=tuple)  # float inputs without gradient


class _CaseModule(torch.nn.Module):
    def __init__(self, case: Case):
        super().__init__()
        self.case = case
        self.names = []
        for i, t in enumerate(case.inputs):
            name = f"in{i}"
            if t.is_floating_point() and case.grad and i not in case.no_grad_inputs:
                self.register_parameter(name, torch.nn.Parameter(t.clone()))
            else:
                self.register_buffer(name, t.clone())
            self.names.append(name)

    def forward(self):
        out = self.case.fn(*[getattr(self, n) for n in self.names])
        return tuple(x for x in torch.utils._pytree.tree_leaves(out) if isinstance(x, torch.Tensor))


class _Bundle(torch.nn.Module):
    def __init__(self, cases: List[Case], weights):
        super().__init__()
        self.cases = torch.nn.ModuleDict({c.name: _CaseModule(c) for c in cases})
        self.weights = weights  # fixed random weights of each differentiable output in the loss

    def forward(self, dummy):
        outs, loss = [], None
        for name, m in self.cases.items():
            res = m()
            outs.append(res)
            for j, r in enumerate(res):
                w = self.weights.get((name, j))
                if w is not None:
                    term = (r * w).sum()
                    loss = term if loss is None else loss + term
        if loss is None:
            return outs
        return outs, poptorch.identity_loss(loss + 0.0 * dummy.sum(), reduction="sum")


def _weights_for(cases: List[Case]):
    g = torch.Generator().manual_seed(7)
    weights = {}
    for c in cases:
        m = _CaseModule(c)
        res = m()
        for j, r in enumerate(res):
            if c.grad and r.is_floating_point() and r.requires_grad:
                weights[(c.name, j)] = torch.randn(r.shape, generator=g, dtype=r.dtype)
    return weights


def check_cases(cases: List[Case], training: bool = True) -> None:
    """Run every case's forward (and, training, its gradients) on the simulated IPU in one model
    and compare with PyTorch on the CPU."""
    names = [c.name for c in cases]
    assert len(set(names)) == len(names), "case names must be unique"
    weights = _weights_for(cases) if training else {}
    training = training and bool(weights)
    ref = _Bundle(cases, weights)
    ipu = _Bundle(cases, weights)
    ipu.load_state_dict(ref.state_dict())
    dummy = torch.zeros(1)
    # the reference: forward and gradients with torch autograd
    ref_out = ref(dummy)
    ref_grads = {}
    if training:
        ref_out, loss = ref_out
        loss.backward()
        ref_grads = {n: p.grad.clone() for n, p in ref.named_parameters() if p.grad is not None}
    opts = poptorch.Options()
    if training:
        params = [n for n, p in ipu.named_parameters()]
        for n in params:
            opts.anchorTensor(n, "Gradient___" + n)
        model = poptorch.trainingModel(ipu, opts, optimizer=torch.optim.SGD(ipu.parameters(), lr=0.0))
        out, _ = model(dummy)
    else:
        model = poptorch.inferenceModel(ipu.eval(), opts)
        out = model(dummy)
    failures = []
    for c, got, want in zip(cases, out, ref_out):
        for j, (g, w) in enumerate(zip(got, want)):
            w = w.detach()
            exp_dtype = {torch.int64: torch.int32, torch.float64: torch.float32}.get(w.dtype, w.dtype)
            if g.dtype != exp_dtype or tuple(g.shape) != tuple(w.shape):
                failures.append(f"{c.name} output {j}: {g.dtype}{list(g.shape)} vs torch {w.dtype}{list(w.shape)}")
                continue
            if not np.allclose(g.double().numpy(), w.double().numpy(), rtol=c.rtol, atol=c.atol, equal_nan=True):
                err = (g.double() - w.double()).abs().max().item()
                failures.append(f"{c.name} output {j}: max abs error {err:.3g}")
    if training:
        for n, want in ref_grads.items():
            got = model.getAnchoredTensor(n)
            case = next(c for c in cases if n.startswith(f"cases.{c.name}."))
            if not np.allclose(got.double().numpy(), want.double().numpy(), rtol=case.rtol * 10, atol=case.atol * 10):
                err = (got.double() - want.double()).abs().max().item()
                failures.append(f"{case.name} gradient of {n}: max abs error {err:.3g}")
    model.destroy()
    assert not failures, "\n".join(failures)


def t(*shape, dtype=torch.float32, low=-2.0, high=2.0, positive=False):
    """A random tensor of an awkward shape."""
    if dtype.is_floating_point:
        x = torch.rand(shape) * (high - low) + low
        if positive:
            x = x.abs() + 0.1
        return x.to(dtype)
    if dtype == torch.bool:
        return torch.rand(shape) > 0.5
    return torch.randint(int(low), int(high), shape, dtype=dtype)
