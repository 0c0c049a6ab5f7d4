"""The optimizer step as popxl ops: `popxl.ops.var_updates` (accumulate_, accumulator_scale_,
adam_updater / lamb_updater / adamax_updater, adam_var_update, copy_var_update_) and scaled_add_.

`OptimizerState` makes, in the main graph, the variables an optimizer needs: per weight its state
(velocity, first and second moments, step count, ...) and one scalar variable per non-constant
hyper-parameter value (so `updateOptimizerFromHost` can write new values without recompiling).
`apply(get, weight, grad)` records one weight's update in the current graph; `get` maps a main
graph variable to the tensor that stands for it in that graph.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Optional, Tuple

import numpy as np

import popxl
import popxl.ops as ops
from popxl.ops import var_updates

from .errors import popart_exception
from .optimizers import SGD, Adam, AdamMode, Adaptive, AdaptiveMode, Optimizer, WeightDecayMode

Get = Callable[[popxl.Tensor], popxl.Tensor]


def _safe(name: str) -> str:
    return name.replace(":", "_").replace("/", "_")


def grouped_zeros(var: popxl.Variable, name: str) -> popxl.Variable:
    """A zero variable of `var`'s shape on every replica, grouped as `var` is (optimizer state and
    accumulators of a weight made with VariableSettings differ per group as the weight does)."""
    rg = var.replica_grouping
    groups = rg.num_groups
    shape = var.shape if groups == 1 else (groups, *var.shape)
    return popxl.variable(np.zeros(shape, var.dtype.as_numpy()), var.dtype, name=name, replica_grouping=rg)


class OptimizerState:
    def __init__(self, optimizer: Optimizer, weights: Dict[str, popxl.Variable]):
        self.optimizer = optimizer
        self.weights = weights
        self.state: Dict[Tuple[str, str], popxl.Variable] = {}  # (weight, slot) -> variable
        self.hyper_vars: Dict[Tuple[str, Optional[str]], popxl.Variable] = {}  # (param, weight or None) -> var
        for w, var in weights.items():
            for slot in self._slots(w):
                name = f"{_slot_prefix(slot)}{_safe(w)}"
                self.state[(w, slot)] = popxl.variable(np.zeros((), np.float32), name=name) if slot == "step" \
                    else grouped_zeros(var, name)
        for name in optimizer.PARAMS:
            for w in [None] + list(weights):
                v = optimizer._defaults[name] if w is None else optimizer._specific.get(w, {}).get(name)
                if v is not None and not v.isConst():
                    self.hyper_vars[(name, w)] = popxl.variable(np.float32(v.val()),
                                                                name=f"{name}_{_safe(w) if w else 'default'}")

    def _slots(self, w: str) -> List[str]:
        o = self.optimizer
        if isinstance(o, SGD):
            return ["velocity"] if o.needs_velocity(w) else []
        if isinstance(o, Adam):
            return ["m", "v", "step"]
        if isinstance(o, Adaptive):
            slots = ["v"]
            if o.mode == AdaptiveMode.CenteredRMSProp:
                slots.append("mg")
            if o.mode == AdaptiveMode.AdaDelta:
                slots.append("d")
            mm = o.value("momentum", w)
            if not mm.isConst() or mm.val() != 0.0:
                slots.append("x")
            return slots
        raise popart_exception(f"Unsupported optimizer {type(o).__name__}")

    def variables(self) -> List[popxl.Variable]:
        return list(self.state.values()) + list(self.hyper_vars.values())

    def host_values(self, optimizer: Optimizer) -> Dict[popxl.Variable, np.ndarray]:
        """The new values of the non-constant hyper-parameter variables for `optimizer`."""
        out = {}
        for (name, w), var in self.hyper_vars.items():
            v = optimizer._defaults[name] if w is None else optimizer._specific[w][name]
            out[var] = np.float32(v.val())
        return out

    # -- hyper-parameters in the current graph ---------------------------------------------------
    def hp(self, get: Get, name: str, w: str):
        """A float for a constant value, else the scalar tensor holding it."""
        spec = self.optimizer._specific.get(w, {})
        key = (name, w) if name in spec else (name, None)
        v = spec.get(name, self.optimizer._defaults[name])
        if v.isConst():
            return float(v.val())
        return get(self.hyper_vars[key])

    # -- the update --------------------------------------------------------------------------------
    def apply(self, get: Get, w: str, g: popxl.Tensor, grad_scale) -> None:
        """Update weight `w` from its gradient `g`; the true gradient is g * grad_scale (grad_scale
        removes loss scaling and applies the mean reduction)."""
        o = self.optimizer
        var = get(self.weights[w])
        if g.dtype != var.dtype:
            g = ops.cast(g, var.dtype)
        g = _mul(g, grad_scale)
        if isinstance(o, SGD):
            self._sgd(get, w, var, g)
        elif isinstance(o, Adam):
            self._adam(get, w, var, g)
        else:
            self._adaptive(get, w, var, g)

    def _state(self, get, w, slot):
        return get(self.state[(w, slot)])

    def _sgd(self, get, w, var, g):
        lr, wd = self.hp(get, "learningRate", w), self.hp(get, "weightDecay", w)
        dm, vs = self.hp(get, "dampening", w), self.hp(get, "velocityScaling", w)
        if _is_zero(wd):
            gw = g
        else:
            gw = ops.add(g, _mul(var, wd))
        if not self.optimizer.needs_velocity(w):
            # v' = (1 - dm)(g + wd w); w' = w - lr v'
            var_updates.accumulate_(var, gw, _like(_neg(_mul_s(lr, _one_minus(dm))), var))
            return
        mm = self.hp(get, "momentum", w)
        v = self._state(get, w, "velocity")  # stored as vs * v
        var_updates.accumulator_scale_(v, _like(mm, v))
        var_updates.accumulate_(v, gw, _like(_mul_s(_one_minus(dm), vs), v))
        nesterov = self.optimizer.value("nesterov", w).val() != 0.0
        if nesterov:
            step = ops.add(gw, _mul(v, _div_s(mm, vs)))
            var_updates.accumulate_(var, step, _like(_neg(lr), var))
        else:
            var_updates.accumulate_(var, v, _like(_neg(_div_s(lr, vs)), var))

    def _adam(self, get, w, var, g):
        o = self.optimizer
        lr, wd = self.hp(get, "learningRate", w), self.hp(get, "weightDecay", w)
        b1, b2, eps = self.hp(get, "beta1", w), self.hp(get, "beta2", w), self.hp(get, "eps", w)
        m, v, t = self._state(get, w, "m"), self._state(get, w, "v"), self._state(get, w, "step")
        l2 = o.weight_decay_mode == WeightDecayMode.L2Regularization and not _is_zero(wd)
        gt = ops.add(g, _mul(var, wd)) if l2 else g
        decay = None if (l2 or _is_zero(wd)) else wd
        var_updates.accumulate_moving_average_(m, gt, b1)
        mode = o.mode
        if mode == AdamMode.AdaMax:
            var_updates.copy_var_update_(v, ops.maximum(_mul(v, b2), ops.abs(gt)))
            u = var_updates.adamax_updater(m, v, weight=var if decay is not None else None, time_step=t,
                                           weight_decay=decay, beta1=b1, epsilon=eps)
        else:
            var_updates.accumulate_moving_average_square_(v, gt, b2)
            bias = mode in (AdamMode.Adam, AdamMode.Lamb)
            fn = var_updates.adam_updater if mode in (AdamMode.Adam, AdamMode.AdamNoBias) else var_updates.lamb_updater
            u = fn(m, v, weight=var if decay is not None else None, time_step=t if bias else None,
                   weight_decay=decay, beta1=b1 if bias else None, beta2=b2 if bias else None, epsilon=eps)
        if mode in (AdamMode.Lamb, AdamMode.LambNoBias):
            r1 = ops.sqrt(ops.lamb_square(var))
            r2 = ops.sqrt(ops.lamb_square(u))
            var_updates.adam_var_update(var, u, r1, r2, learning_rate=_like(lr, var),
                                        max_weight_norm=_like(self.hp(get, "maxWeightNorm", w), var))
        else:
            var_updates.adam_var_update(var, u, None, None, learning_rate=_like(lr, var))

    def _adaptive(self, get, w, var, g):
        o = self.optimizer
        lr, wd = self.hp(get, "learningRate", w), self.hp(get, "weightDecay", w)
        alpha, eps = self.hp(get, "alpha", w), self.hp(get, "eps", w)
        l2 = o.weight_decay_mode == WeightDecayMode.L2Regularization and not _is_zero(wd)
        gt = ops.add(g, _mul(var, wd)) if l2 else g
        v = self._state(get, w, "v")
        mode = o.mode
        if mode == AdaptiveMode.AdaGrad:
            var_updates.accumulate_square_(v, gt, 1.0)
        else:
            var_updates.accumulate_moving_average_square_(v, gt, alpha)
        if mode == AdaptiveMode.AdaDelta:
            d = self._state(get, w, "d")
            u = ops.mul(gt, ops.div(ops.sqrt(_add(d, eps)), ops.sqrt(_add(v, eps))))
            var_updates.accumulate_moving_average_square_(d, u, alpha)
        else:
            denom_sq = v
            if mode == AdaptiveMode.CenteredRMSProp:
                mg = self._state(get, w, "mg")
                var_updates.accumulate_moving_average_(mg, gt, alpha)
                denom_sq = ops.sub(v, ops.mul(mg, mg))
            if o.rmspropTFVariant:
                denom = ops.sqrt(_add(denom_sq, eps))
            else:
                denom = _add(ops.sqrt(denom_sq), eps)
            u = ops.div(gt, denom)
        if not l2 and not _is_zero(wd):
            u = ops.add(u, _mul(var, wd))
        if ("x") in [s for (ww, s) in self.state if ww == w]:
            x = self._state(get, w, "x")
            var_updates.accumulator_scale_(x, _like(self.hp(get, "momentum", w), x))
            var_updates.accumulate_(x, u)
            u = x
        var_updates.accumulate_(var, u, _like(_neg(lr), var))


# -- scalar helpers: floats stay floats (compiled in), tensors become ops ----------------------------

def _like(x, t: popxl.Tensor):
    """A hyper-parameter for an update of `t`: a float stays a float; a tensor (a value kept on
    the device, float32) is cast to t's type (float16 weights are updated in float16)."""
    if isinstance(x, popxl.Tensor) and x.dtype != t.dtype:
        return ops.cast(x, t.dtype)
    return x


def _is_zero(x) -> bool:
    return not isinstance(x, popxl.Tensor) and float(x) == 0.0


def _mul(t: popxl.Tensor, s) -> popxl.Tensor:
    if isinstance(s, popxl.Tensor):
        return ops.mul(t, ops.cast(s, t.dtype) if s.dtype != t.dtype else s)
    if float(s) == 1.0:
        return t
    return ops.mul(t, popxl.constant(np.asarray(s, t.dtype.as_numpy())))


def _add(t: popxl.Tensor, s) -> popxl.Tensor:
    if isinstance(s, popxl.Tensor):
        return ops.add(t, ops.cast(s, t.dtype) if s.dtype != t.dtype else s)
    return ops.add(t, popxl.constant(np.asarray(s, t.dtype.as_numpy())))


def _mul_s(a, b):
    if isinstance(a, popxl.Tensor) or isinstance(b, popxl.Tensor):
        ta = a if isinstance(a, popxl.Tensor) else popxl.constant(np.float32(a))
        return ops.mul(ta, b if isinstance(b, popxl.Tensor) else popxl.constant(np.float32(b)))
    return float(a) * float(b)


def _div_s(a, b):
    if isinstance(a, popxl.Tensor) or isinstance(b, popxl.Tensor):
        ta = a if isinstance(a, popxl.Tensor) else popxl.constant(np.float32(a))
        return ops.div(ta, b if isinstance(b, popxl.Tensor) else popxl.constant(np.float32(b)))
    return float(a) / float(b)


def _one_minus(a):
    if isinstance(a, popxl.Tensor):
        return ops.sub(popxl.constant(np.float32(1.0)), a)
    return 1.0 - float(a)


def _neg(a):
    return ops.negate(a) if isinstance(a, popxl.Tensor) else -float(a)


def _slot_prefix(slot: str) -> str:
    # PopART's state tensor prefixes
    return {"velocity": "Accl___", "m": "Accl1___", "v": "Accl2___", "step": "Step___", "mg": "Accl3___",
            "d": "Accl3___", "x": "Accl1___"}[slot]
