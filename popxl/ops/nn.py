"""Neural-network ops: softmax, normalisations, losses and lamb_square."""
from typing import Literal, Optional, Tuple, Union

import numpy as np

from popxl import dtypes
from popxl.context import op_debug_context
from popxl.tensor import Tensor, constant

from ._op_builder import create_op, single, not_a_tensor
from ._shapes import check_float, check_int, check_same_dtype, normalize_axis

__all__ = ["softmax", "group_norm", "layer_norm", "batch_norm_inference", "nll_loss",
           "nll_loss_with_softmax_grad", "lamb_square"]

REDUCTION_TYPE = Literal["mean", "sum", "none"]


def _t(op: str, t, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise not_a_tensor(what, t, op)
    return t


@op_debug_context
def softmax(t: Tensor, axis: int) -> Tensor:
    """Softmax of ``t`` along ``axis``."""
    _t("softmax", t, "t")
    check_float("softmax", t)
    axis = normalize_axis(axis, t.rank)
    return single("softmax", [t], t.shape, t.dtype, {"axis": axis})


def _check_channels(op: str, t: Tensor, **params: Tensor) -> int:
    if t.rank < 2:
        raise ValueError(f"{op}: the input must have shape (N, C, ...), got {t.shape}.")
    channels = t.shape[1]
    for name, p in params.items():
        _t(op, p, name)
        if p.shape != (channels,):
            raise ValueError(f"{op}: `{name}` must have shape ({channels},) (one value per channel of "
                             f"{t.shape}), got {p.shape}.")
    check_same_dtype(op, t, *params.values())
    return channels


@op_debug_context
def group_norm(t: Tensor, weight: Tensor, bias: Tensor, num_groups: int, eps: float = 1e-05) -> Tensor:
    """Group normalisation of ``t`` of shape (N, C, ...) with per-channel ``weight`` and ``bias``.

    The op also outputs the mean and inverse standard deviation of each (sample, group), both of
    shape (N * num_groups,), for the gradient.
    """
    _t("group_norm", t, "t")
    check_float("group_norm", t)
    channels = _check_channels("group_norm", t, weight=weight, bias=bias)
    num_groups = int(num_groups)
    if num_groups < 1 or channels % num_groups:
        raise ValueError(f"group_norm: {channels} channels cannot be split into {num_groups} groups.")
    stats = (t.shape[0] * num_groups,)
    op = create_op("group_norm", [t, weight, bias], [(t.shape, t.dtype), (stats, t.dtype), (stats, t.dtype)],
                   {"num_groups": num_groups, "epsilon": float(eps)}, input_names=["t", "weight", "bias"],
                   out_names=["group_norm_out", "group_norm_mean", "group_norm_inv_std_dev"])
    return op.outputs[0]


@op_debug_context
def layer_norm(t: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-05) -> Tensor:
    """Layer normalisation: ``group_norm`` with one group (normalises over all axes but axis 0)."""
    return group_norm(t, weight=weight, bias=bias, num_groups=1, eps=eps)


@op_debug_context
def batch_norm_inference(t: Tensor, scale: Tensor, bias: Tensor, mean: Tensor, var: Tensor,
                         epsilon: float = 1e-05, momentum: float = 0.9) -> Tensor:
    """``scale * (t - mean) / sqrt(var + epsilon) + bias`` per channel of ``t`` (N, C, ...)."""
    _t("batch_norm_inference", t, "t")
    check_float("batch_norm_inference", t)
    _check_channels("batch_norm_inference", t, scale=scale, bias=bias, mean=mean, var=var)
    return single("batch_norm_inference", [t, scale, bias, mean, var], t.shape, t.dtype,
                  {"epsilon": float(epsilon), "momentum": float(momentum)},
                  input_names=["t", "scale", "bias", "mean", "var"])


def _nll_check(op: str, probs: Tensor, labels: Tensor, reduction: str, ignore_index: Optional[int]):
    _t(op, probs, "probs")
    _t(op, labels, "labels")
    check_float(op, probs)
    check_int(op, labels, "labels")
    if reduction not in ("mean", "sum", "none"):
        raise ValueError(f"{op}: reduction must be 'mean', 'sum' or 'none', not {reduction!r}.")
    # PopART's Nll ops take the labels as they come (any fixed-point type, the loss of reduction
    # 'none' has their shape); their Opx flattens probs to (rows, classes) and the labels to (rows,):
    # so (N,) and (N, 1) labels of (N, C) probs are both accepted
    rows = int(np.prod(probs.shape[:-1], dtype=np.int64)) if probs.rank >= 1 else -1
    if probs.rank < 1 or labels.nelms != rows:
        raise ValueError(f"{op}: labels must hold one class index per row of probs (probs {probs.shape} has "
                         f"{max(rows, 0)} rows of {probs.shape[-1] if probs.rank else 0} classes), "
                         f"got labels of shape {labels.shape}.")
    loss_shape = labels.shape if reduction == "none" else ()
    attrs = {"reduction": reduction, "ignore_index": None if ignore_index is None else int(ignore_index)}
    return loss_shape, attrs


@op_debug_context
def nll_loss(probs: Tensor, labels: Tensor, ignore_index: Optional[int] = None, reduction: REDUCTION_TYPE = "mean",
             log_prob: bool = False) -> Tensor:
    """Negative log likelihood of ``labels`` under the class probabilities ``probs`` (classes on the
    last axis; ``log_prob`` if ``probs`` are already log probabilities)."""
    loss_shape, attrs = _nll_check("nll_loss", probs, labels, reduction, ignore_index)
    attrs["log_prob"] = bool(log_prob)
    return single("nll_loss", [probs, labels], loss_shape, probs.dtype, attrs, input_names=["probs", "labels"])


@op_debug_context
def nll_loss_with_softmax_grad(probs: Tensor, labels: Tensor, loss_grad: Union[float, Tensor] = 1,
                               ignore_index: Optional[int] = None,
                               reduction: REDUCTION_TYPE = "mean") -> Tuple[Tensor, Tensor]:
    """The nll loss of softmax probabilities ``probs`` and, fused, the gradient of the loss (times
    ``loss_grad``) with respect to the logits the softmax was taken of. Returns ``(loss, grad)``."""
    loss_shape, attrs = _nll_check("nll_loss_with_softmax_grad", probs, labels, reduction, ignore_index)
    if not isinstance(loss_grad, Tensor):  # PopXL makes a float32 constant, whatever the probs' type
        loss_grad = constant(loss_grad, dtypes.float32, "loss_grad")
    if loss_grad.dtype not in (dtypes.float32, dtypes.float16):  # float32 with float16 probs is supported
        raise TypeError(f"nll_loss_with_softmax_grad: loss_grad must be float32 or float16, got "
                        f"{loss_grad.id} of dtype {loss_grad.dtype.name}.")
    if loss_grad.nelms != 1:
        raise ValueError(f"nll_loss_with_softmax_grad: loss_grad must be a scalar, got shape {loss_grad.shape}.")
    op = create_op("nll_loss_with_softmax_grad", [probs, labels, loss_grad],
                   [(loss_shape, probs.dtype), (probs.shape, probs.dtype)], attrs,
                   input_names=["probs", "labels", "loss_grad"], out_names=["loss", "dx"])
    return op.outputs[0], op.outputs[1]


@op_debug_context
def lamb_square(t: Tensor) -> Tensor:
    """Sum of the squares of every element of ``t``, as a float32 scalar (for LAMB's norms)."""
    _t("lamb_square", t, "t")
    check_float("lamb_square", t)
    return single("lamb_square", [t], (), dtypes.float32)


def _batch_norm_training(t: Tensor, scale: Tensor, bias: Tensor, epsilon: float = 1e-05):
    """Batch normalisation with the batch's statistics (PopART's BatchNormOp in training): returns
    (y, mean, inv_std) with mean and inverse standard deviation (of the biased variance) per channel."""
    _t("batch_norm_training", t, "t")
    check_float("batch_norm_training", t)
    c = _check_channels("batch_norm_training", t, scale=scale, bias=bias)
    op = create_op("batch_norm_training", [t, scale, bias], [(t.shape, t.dtype), ((c,), t.dtype), ((c,), t.dtype)],
                   {"epsilon": float(epsilon)}, input_names=["t", "scale", "bias"],
                   out_names=["batch_norm_out", "batch_norm_mean", "batch_norm_inv_std_dev"])
    return tuple(op.outputs)


def _batch_norm_training_grad(g: Tensor, t: Tensor, scale: Tensor, mean: Tensor, inv_std: Tensor,
                              epsilon: float = 1e-05):
    """(dx, dscale, dbias) of batch_norm_training (PopART's BatchNormGradOp, popnn's
    batchNormGradients)."""
    c = t.shape[1]
    op = create_op("batch_norm_training_grad", [g, t, scale, mean, inv_std],
                   [(t.shape, t.dtype), ((c,), t.dtype), ((c,), t.dtype)], {"epsilon": float(epsilon)},
                   input_names=["g", "t", "scale", "mean", "inv_std"],
                   out_names=["batch_norm_dx", "batch_norm_dscale", "batch_norm_dbias"])
    return tuple(op.outputs)


def _nonlinearity_grad(g: Tensor, t: Tensor, kind: str, p0: float = 0.0, p1: float = 0.0) -> Tensor:
    """g x f'(t) for the activation `kind` (codelets/nonlinearity.py): t is the forward output for
    relu, sigmoid, tanh and clip (p0, p1 its bounds), the forward input for hard_sigmoid (p0, p1
    alpha and beta), swish and gelu."""
    return single("nonlinearity_grad", [g, t], g.shape, g.dtype, {"kind": kind, "p0": float(p0), "p1": float(p1)},
                  input_names=["g", "t"])
