"""PopTorch's optimizers: torch.optim's SGD, Adam, AdamW and RMSprop with PopTorch's extra
options (loss_scaling, velocity_scaling, accumulation types, max_grad_norm), and LAMB.

They are torch optimizers (they run on the CPU as torch's do; LAMB has its own CPU step). On the
IPU the wrapped model's optimizer becomes PopART's (popart.SGD / Adam / Adaptive, see
poptorch/_optimizer_convert.py): the same update, computed with popxl.ops.var_updates.
Attributes given explicitly in the constructor (and the learning rate) are *variable*: they live
on the device, so setOptimizer() changes them without recompiling; the others are compiled in.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Tuple

import torch

from ._logging import logger


class VariableAttributes:
    """Which attributes of an optimizer are variable (changeable by setOptimizer) or constant."""

    def __init__(self, variable_attributes: List[str], allowed_attributes: List[str]) -> None:
        self._variable_attributes = list(variable_attributes)
        self._allowed_attributes = list(allowed_attributes)

    def isConstant(self, attr: str) -> bool:  # noqa: N802
        return attr not in self._variable_attributes

    def markAsConstant(self, attr: str) -> None:  # noqa: N802
        self._check(attr)
        self._variable_attributes = [a for a in self._variable_attributes if a != attr]

    def markAsVariable(self, attr: str) -> None:  # noqa: N802
        self._check(attr)
        if attr not in self._variable_attributes:
            self._variable_attributes.append(attr)

    def _check(self, attr: str) -> None:
        if attr not in self._allowed_attributes:
            raise ValueError(f"Unknown attribute {attr}, allowed values: {self._allowed_attributes}")


def _explicit(local_vars: Dict[str, Any], own: List[str]) -> Tuple[Dict[str, Any], List[str]]:
    """(arguments for the torch parent, names the user gave explicitly)."""
    given = [k for k, v in local_vars.items() if k not in ("self", "params", "kwargs", "__class__") and v is not None]
    parent = {k: local_vars[k] for k in given if k not in own}
    parent.update(local_vars.get("kwargs") or {})
    return parent, given + list((local_vars.get("kwargs") or {}).keys())


_ACCUM_TYPES = (torch.float16, torch.float32)


def _accum(name: str, dtype) -> torch.dtype:
    dtype = torch.float32 if dtype is None else dtype
    if dtype not in _ACCUM_TYPES:
        raise ValueError(f"{name}: Accumulation types must be either torch.float32 or torch.float16")
    return dtype


class Optimizer:
    """What every PopTorch optimizer adds to its torch parent: the optimizer state on the device
    (read back by state_dict() while a model is attached) and the dirty flags."""

    _child_vars = ["loss_scaling"]

    def __init__(self) -> None:
        self._state_dict = {"ipu_state": None, "ipu_param": None}
        self.ipu_state_is_dirty = False
        self.host_state_is_dirty = False
        self._executor_ref = None  # weakref to the PoplarExecutor training with this optimizer

    def bind_executor(self, executor) -> None:
        """The PoplarExecutor training with this optimizer (None: none), whose device state
        state_dict() reads back."""
        import weakref
        self._executor_ref = weakref.ref(executor) if executor is not None else None

    def set_ipu_state(self, ipu_state, ipu_param) -> None:
        """The optimizer state read from the device."""
        self._state_dict = {"ipu_state": ipu_state, "ipu_param": ipu_param}
        self.host_state_is_dirty = False

    def state_dict(self):
        executor = self._executor_ref() if self._executor_ref is not None else None
        if executor is not None:
            executor._read_optimizer_state()
        return self.get_state_dict()

    def load_state_dict(self, state):
        torch.optim.Optimizer.load_state_dict(self, state)
        self.set_state_dict(state)

    def get_state_dict(self):
        return {**self._state_dict, **torch.optim.Optimizer.state_dict(self)}

    def set_state_dict(self, state):
        if not state:
            raise RuntimeError("Cannot load optimizer state dictionary because it is empty.")
        if "ipu_state" not in state or "ipu_param" not in state:
            raise RuntimeError("Only IPU optimizer states can be loaded onto the IPU.")
        self._state_dict = {"ipu_state": state["ipu_state"], "ipu_param": state["ipu_param"]}
        self.ipu_state_is_dirty = self.has_state()
        self.host_state_is_dirty = False

    def has_state(self) -> bool:
        return self._state_dict.get("ipu_state") is not None and self._state_dict.get("ipu_param") is not None

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_executor_ref"] = None
        state["ipu_state_is_dirty"] = self.has_state()
        state["host_state_is_dirty"] = False
        return state

    def __setstate__(self, state):
        self.__dict__.update(state)


class SGD(Optimizer, torch.optim.SGD):
    """Stochastic gradient descent with optional momentum, loss scaling and velocity scaling."""

    _child_only = ["loss_scaling", "velocity_scaling", "use_combined_accum", "accum_type", "velocity_accum_type",
                   "max_grad_norm"]
    _group_vars = ["lr", "momentum", "dampening", "weight_decay", "nesterov", "velocity_scaling"]

    def __init__(self, params: Iterable, lr: float, momentum: Optional[float] = None,
                 dampening: Optional[float] = None, weight_decay: Optional[float] = None,
                 nesterov: Optional[bool] = None, maximize: Optional[bool] = None, foreach: Optional[bool] = None,
                 differentiable: Optional[bool] = None, loss_scaling: Optional[float] = None,
                 velocity_scaling: Optional[float] = None, use_combined_accum: Optional[bool] = None,
                 accum_type: Optional[torch.dtype] = None, velocity_accum_type: Optional[torch.dtype] = None,
                 max_grad_norm: Optional[float] = None, **kwargs) -> None:
        parent, variables = _explicit(locals(), SGD._child_only)
        Optimizer.__init__(self)
        torch.optim.SGD.__init__(self, params, **parent)
        self.loss_scaling = 1.0 if loss_scaling is None else float(loss_scaling)
        self.use_combined_accum = bool(use_combined_accum)
        if velocity_scaling is not None and not self.use_combined_accum:
            logger.warning("velocity_scaling value ignored when using the separate variant (use_combined_accum=False)")
        if self.use_combined_accum:
            vs = 1.0 if velocity_scaling is None else float(velocity_scaling)
            self.defaults["velocity_scaling"] = vs
            for g in self.param_groups:
                g.setdefault("velocity_scaling", vs)
        self.accum_type = _accum("accum_type", accum_type)
        self.velocity_accum_type = _accum("velocity_accum_type", velocity_accum_type)
        self.max_grad_norm = float("inf") if max_grad_norm is None else float(max_grad_norm)
        self.variable_attrs = VariableAttributes(variables, list(self.defaults) + SGD._child_vars)


class Adam(Optimizer, torch.optim.Adam):
    """Adam (PyTorch's update: L2 weight decay added to the gradient) with loss scaling."""

    _child_only = ["loss_scaling", "accum_type", "first_order_momentum_accum_type",
                   "second_order_momentum_accum_type", "max_grad_norm"]
    _group_vars = ["lr", "betas", "eps", "weight_decay", "amsgrad"]

    def __init__(self, params: Iterable, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                 eps: Optional[float] = None, weight_decay: Optional[float] = None, amsgrad: Optional[bool] = None,
                 foreach: Optional[bool] = None, maximize: Optional[bool] = None, capturable: Optional[bool] = None,
                 differentiable: Optional[bool] = None, fused: Optional[bool] = None,
                 loss_scaling: Optional[float] = None, accum_type: Optional[torch.dtype] = None,
                 first_order_momentum_accum_type: Optional[torch.dtype] = None,
                 second_order_momentum_accum_type: Optional[torch.dtype] = None,
                 max_grad_norm: Optional[float] = None, **kwargs) -> None:
        parent, variables = _explicit(locals(), Adam._child_only)
        Optimizer.__init__(self)
        torch.optim.Adam.__init__(self, params, **parent)
        _adam_extras(self, loss_scaling, accum_type, first_order_momentum_accum_type,
                     second_order_momentum_accum_type, max_grad_norm)
        self.variable_attrs = VariableAttributes(variables, list(self.defaults) + Adam._child_vars)


class AdamW(Optimizer, torch.optim.AdamW):
    """AdamW (decoupled weight decay), with or without bias correction, with loss scaling."""

    _child_only = ["loss_scaling", "bias_correction", "accum_type", "first_order_momentum_accum_type",
                   "second_order_momentum_accum_type", "max_grad_norm"]
    _group_vars = ["lr", "betas", "weight_decay", "eps", "amsgrad"]

    def __init__(self, params: Iterable, lr: Optional[float] = None, betas: Optional[Tuple[float, float]] = None,
                 eps: Optional[float] = None, weight_decay: Optional[float] = None, amsgrad: Optional[bool] = None,
                 maximize: Optional[bool] = None, foreach: Optional[bool] = None, capturable: Optional[bool] = None,
                 differentiable: Optional[bool] = None, fused: Optional[bool] = None,
                 loss_scaling: Optional[float] = None, bias_correction: Optional[bool] = None,
                 accum_type: Optional[torch.dtype] = None,
                 first_order_momentum_accum_type: Optional[torch.dtype] = None,
                 second_order_momentum_accum_type: Optional[torch.dtype] = None,
                 max_grad_norm: Optional[float] = None, **kwargs) -> None:
        parent, variables = _explicit(locals(), AdamW._child_only)
        Optimizer.__init__(self)
        torch.optim.AdamW.__init__(self, params, **parent)
        self.bias_correction = True if bias_correction is None else bool(bias_correction)
        _adam_extras(self, loss_scaling, accum_type, first_order_momentum_accum_type,
                     second_order_momentum_accum_type, max_grad_norm)
        self.variable_attrs = VariableAttributes(variables, list(self.defaults) + AdamW._child_vars)


def _adam_extras(opt, loss_scaling, accum_type, first, second, max_grad_norm):
    opt.loss_scaling = 1.0 if loss_scaling is None else float(loss_scaling)
    opt.accum_type = _accum("accum_type", accum_type)
    opt.first_order_momentum_accum_type = _accum("first_order_momentum_accum_type", first)
    opt.second_order_momentum_accum_type = _accum("second_order_momentum_accum_type", second)
    opt.max_grad_norm = float("inf") if max_grad_norm is None else float(max_grad_norm)


class RMSprop(Optimizer, torch.optim.RMSprop):
    """RMSprop (PyTorch's, or TensorFlow's with use_tf_variant: eps inside the square root)."""

    _child_only = ["loss_scaling", "accum_type", "first_order_momentum_accum_type",
                   "second_order_momentum_accum_type", "use_tf_variant"]
    _group_vars = ["lr", "momentum", "weight_decay", "alpha", "eps", "centered"]

    def __init__(self, params: Iterable, lr: Optional[float] = None, alpha: Optional[float] = None,
                 eps: Optional[float] = None, weight_decay: Optional[float] = None,
                 momentum: Optional[float] = None, centered: Optional[bool] = None, foreach: Optional[bool] = None,
                 maximize: Optional[bool] = None, differentiable: Optional[bool] = None,
                 loss_scaling: Optional[float] = None, accum_type: Optional[torch.dtype] = None,
                 first_order_momentum_accum_type: Optional[torch.dtype] = None,
                 second_order_momentum_accum_type: Optional[torch.dtype] = None,
                 use_tf_variant: Optional[bool] = None, **kwargs) -> None:
        parent, variables = _explicit(locals(), RMSprop._child_only)
        Optimizer.__init__(self)
        torch.optim.RMSprop.__init__(self, params, **parent)
        _adam_extras(self, loss_scaling, accum_type, first_order_momentum_accum_type,
                     second_order_momentum_accum_type, None)
        self.use_tf_variant = bool(use_tf_variant)
        self.variable_attrs = VariableAttributes(variables, list(self.defaults) + RMSprop._child_vars)


class LAMB(Optimizer, torch.optim.Optimizer):
    """Layer-wise Adaptive Moments (You et al., "Large Batch Optimization for Deep Learning:
    Training BERT in 76 minutes"): an Adam update with decoupled weight decay, scaled per weight
    by the trust ratio min(||w||, max_weight_norm) / ||update|| (1 when either norm is 0)."""

    _child_only = ["loss_scaling", "bias_correction", "accum_type", "first_order_momentum_accum_type",
                   "second_order_momentum_accum_type"]
    _group_vars = ["lr", "weight_decay", "betas", "eps", "max_weight_norm"]

    def __init__(self, params: Iterable, lr: Optional[float] = None, betas: Tuple[float, float] = None,
                 eps: Optional[float] = None, weight_decay: Optional[float] = None,
                 bias_correction: Optional[bool] = None, loss_scaling: Optional[float] = None,
                 max_weight_norm: Optional[float] = None, accum_type: Optional[torch.dtype] = None,
                 first_order_momentum_accum_type: Optional[torch.dtype] = None,
                 second_order_momentum_accum_type: Optional[torch.dtype] = None) -> None:
        _, variables = _explicit(locals(), [])
        defaults = dict(lr=1e-3 if lr is None else lr, betas=(0.9, 0.999) if betas is None else tuple(betas),
                        eps=1e-8 if eps is None else eps, weight_decay=1e-2 if weight_decay is None else weight_decay,
                        max_weight_norm=65500.0 if max_weight_norm is None else max_weight_norm)
        Optimizer.__init__(self)
        torch.optim.Optimizer.__init__(self, params, defaults)
        self.bias_correction = True if bias_correction is None else bool(bias_correction)
        self.max_weight_norm = defaults["max_weight_norm"]
        _adam_extras(self, loss_scaling, accum_type, first_order_momentum_accum_type,
                     second_order_momentum_accum_type, None)
        self.variable_attrs = VariableAttributes(variables, list(self.defaults) + LAMB._child_vars)

    @torch.no_grad()
    def step(self, closure: Optional[Callable] = None) -> Optional[float]:
        loss = None
        if closure is not None:
            with torch.enable_grad():
                loss = closure()
        for group in self.param_groups:
            beta1, beta2 = group["betas"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if not state:
                    state["step"] = 0
                    state["exp_avg"] = torch.zeros_like(p)
                    state["exp_avg_sq"] = torch.zeros_like(p)
                state["step"] += 1
                m, v = state["exp_avg"], state["exp_avg_sq"]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                if self.bias_correction:
                    m_hat = m / (1 - beta1 ** state["step"])
                    v_hat = v / (1 - beta2 ** state["step"])
                else:
                    m_hat, v_hat = m, v
                upd = m_hat / (v_hat.sqrt() + group["eps"]) + group["weight_decay"] * p
                r1 = p.pow(2).sum().sqrt().clamp(max=group["max_weight_norm"])
                r2 = upd.pow(2).sum().sqrt()
                trust = 1.0 if (float(r1) == 0.0 or float(r2) == 0.0) else float(r1 / r2)
                p.add_(upd, alpha=-group["lr"] * trust)
        return loss
