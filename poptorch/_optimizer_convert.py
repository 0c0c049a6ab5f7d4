"""A torch / PopTorch optimizer as PopART's (popart.SGD, Adam, Adaptive), the form
popart/_optimizer_updates.py turns into popxl var_updates.

Group 0's values are the defaults; the parameters of the other groups get theirs with
insertSpecific. The learning rate, and every attribute a PopTorch optimizer was given explicitly
(its `variable_attrs`), are non-constant: their values live on the device and setOptimizer()
writes new ones; the other values are compiled in.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import torch

import popart
from popart.optimizers import AdamMode, AdaptiveMode, WeightDecayMode

from . import optim
from .errors import Error


def _is_variable(opt, attr: str) -> bool:
    if attr == "lr":
        return True
    va = getattr(opt, "variable_attrs", None)
    return va is not None and not va.isConstant(attr)


def _check(opt, group) -> None:
    if group.get("amsgrad"):
        raise Error(f"{type(opt).__name__}: AMSGrad is not supported by PopTorch (amsgrad must be False)")
    if group.get("maximize"):
        raise Error(f"{type(opt).__name__}: maximize=True is not supported by PopTorch")


def param_names(opt, named_params: Dict[str, torch.Tensor]) -> List[List[str]]:
    """The parameter names of each parameter group (by identity with the model's parameters)."""
    by_id = {id(p): n for n, p in named_params.items()}
    groups = []
    for i, g in enumerate(opt.param_groups):
        names = []
        for p in g["params"]:
            n = by_id.get(id(p))
            if n is None:
                raise Error(f"Parameter group {i} of the optimizer holds a tensor of shape {list(p.shape)} that is not "
                            f"a parameter of the model being trained")
            names.append(n)
        groups.append(names)
    return groups


def _values(opt, group, keys: Dict[str, str]) -> Dict[str, Tuple[float, bool]]:
    out = {}
    for popart_key, torch_key in keys.items():
        if torch_key not in group:
            continue
        out[popart_key] = (float(group[torch_key]), not _is_variable(opt, torch_key))
    return out


def convert(opt, named_params: Dict[str, torch.Tensor]) -> Tuple[object, List[str], Optional[float]]:
    """(popart optimizer, trained parameter names, max_grad_norm or None)."""
    groups = param_names(opt, named_params)
    loss_scaling = float(getattr(opt, "loss_scaling", 1.0))
    clip = getattr(opt, "max_grad_norm", float("inf"))
    clip = None if clip is None or clip == float("inf") else float(clip)
    per_group: List[Dict] = []
    if isinstance(opt, torch.optim.SGD):
        kind = "sgd"
        for g in opt.param_groups:
            _check(opt, g)
            vals = _values(opt, g, {"learningRate": "lr", "momentum": "momentum", "dampening": "dampening",
                                    "weightDecay": "weight_decay"})
            if "velocity_scaling" in g:
                vals["velocityScaling"] = (float(g["velocity_scaling"]), not _is_variable(opt, "velocity_scaling"))
            vals["nesterov"] = (1.0 if g.get("nesterov") else 0.0, True)
            per_group.append(vals)
    elif isinstance(opt, (torch.optim.Adam, torch.optim.AdamW)):
        kind = "adam"
        decoupled = isinstance(opt, torch.optim.AdamW)
        for g in opt.param_groups:
            _check(opt, g)
            decoupled = decoupled or bool(g.get("decoupled_weight_decay", False))
            b1, b2 = g["betas"]
            vals = _values(opt, g, {"learningRate": "lr", "eps": "eps", "weightDecay": "weight_decay"})
            vals["beta1"] = (float(b1), not _is_variable(opt, "betas"))
            vals["beta2"] = (float(b2), not _is_variable(opt, "betas"))
            per_group.append(vals)
        bias = getattr(opt, "bias_correction", True)
        mode = AdamMode.Adam if bias else AdamMode.AdamNoBias
        wd_mode = WeightDecayMode.Decay if decoupled else WeightDecayMode.L2Regularization
    elif isinstance(opt, torch.optim.RMSprop):
        kind = "adaptive"
        centered = bool(opt.param_groups[0].get("centered", False))
        for g in opt.param_groups:
            _check(opt, g)
            if bool(g.get("centered", False)) != centered:
                raise Error("RMSprop: all parameter groups must agree on `centered`")
            per_group.append(_values(opt, g, {"learningRate": "lr", "alpha": "alpha", "eps": "eps",
                                              "weightDecay": "weight_decay", "momentum": "momentum"}))
    elif isinstance(opt, optim.LAMB):
        kind = "lamb"
        for g in opt.param_groups:
            b1, b2 = g["betas"]
            vals = _values(opt, g, {"learningRate": "lr", "eps": "eps", "weightDecay": "weight_decay",
                                    "maxWeightNorm": "max_weight_norm"})
            vals["beta1"] = (float(b1), not _is_variable(opt, "betas"))
            vals["beta2"] = (float(b2), not _is_variable(opt, "betas"))
            per_group.append(vals)
    else:
        raise Error(f"Unsupported optimizer {type(opt).__name__}: PopTorch supports torch.optim.SGD, Adam, AdamW, "
                    f"RMSprop and poptorch.optim.SGD, Adam, AdamW, RMSprop, LAMB")
    defaults = {("default" + k[0].upper() + k[1:]): v for k, v in per_group[0].items()}
    defaults["lossScaling"] = (loss_scaling, True)
    if kind == "sgd":
        result = popart.SGD(defaults)
    elif kind == "adam":
        result = popart.Adam(defaults, mode=mode, weight_decay_mode=wd_mode)
    elif kind == "lamb":
        result = popart.Adam(defaults, mode=AdamMode.Lamb if opt.bias_correction else AdamMode.LambNoBias,
                             weight_decay_mode=WeightDecayMode.Decay)
    else:
        result = popart.Adaptive(defaults, mode=AdaptiveMode.CenteredRMSProp if centered else AdaptiveMode.RMSProp,
                                 weight_decay_mode=WeightDecayMode.L2Regularization,
                                 rmspropTFVariant=bool(getattr(opt, "use_tf_variant", False)))
    for names, vals in zip(groups[1:], per_group[1:]):
        for n in names:
            result.insertSpecific(n, vals)
    trained = [n for names in groups for n in names]
    return result, trained, clip
