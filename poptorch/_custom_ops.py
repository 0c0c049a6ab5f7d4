"""PopTorch's own ops (`torch.ops.poptorch.*`), registered with torch.library.

Each runs on the CPU too (a model that uses them still runs, and trains, in plain PyTorch: they
are identities there, or the reduction identity_loss asks for), and each reaches the capture as
one node, through functionalization and the dispatcher like any ATen op. None of them may return
its input itself (a custom op's output must not alias an input), so the CPU forms return copies.
"""
from __future__ import annotations

import torch
from torch.library import custom_op, register_autograd

_NS = "poptorch"


def _register_identity(name: str, schema_fn):
    op = custom_op(f"{_NS}::{name}", mutates_args=())(schema_fn)
    op.register_fake(lambda x, *a: torch.empty_like(x))

    def backward(ctx, grad):
        return (grad,) + (None,) * ctx.n_extra

    def setup(ctx, inputs, output):
        ctx.n_extra = len(inputs) - 1

    register_autograd(f"{_NS}::{name}", backward, setup_context=setup)
    return op


# -- identity_loss: the loss PopTorch differentiates ---------------------------------------------------------------

@custom_op(f"{_NS}::identity_loss", mutates_args=())
def identity_loss(x: torch.Tensor, reduction: int) -> torch.Tensor:
    if reduction == 0:
        return x.sum()
    if reduction == 1:
        return x.mean()
    return x.clone()


@identity_loss.register_fake
def _identity_loss_fake(x, reduction):
    return x.new_empty(()) if reduction in (0, 1) else torch.empty_like(x)


def _identity_loss_setup(ctx, inputs, output):
    x, reduction = inputs
    ctx.shape, ctx.numel, ctx.reduction = x.shape, x.numel(), reduction


def _identity_loss_backward(ctx, grad):
    if ctx.reduction == 0:
        return grad.expand(ctx.shape), None
    if ctx.reduction == 1:
        return (grad / ctx.numel).expand(ctx.shape), None
    return grad, None


register_autograd(f"{_NS}::identity_loss", _identity_loss_backward, setup_context=_identity_loss_setup)


# -- identities that carry an annotation to the capture ----------------------------------------------------------

def _nop(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def _recomputation_checkpoint(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


def _set_available_memory(x: torch.Tensor, available_memory_proportion: float) -> torch.Tensor:
    return x.clone()


def _set_matmul_serialization(x: torch.Tensor, mode: str, factor: int, keep_precision: bool) -> torch.Tensor:
    return x.clone()


def _set_overlap_for_input(x: torch.Tensor, mode: str) -> torch.Tensor:
    return x.clone()


def _set_overlap_for_output(x: torch.Tensor, mode: str) -> torch.Tensor:
    return x.clone()


def _ipu_print_tensor(x: torch.Tensor, title: str, print_gradient: int, summarise_threshold: int, edge_items: int,
                      max_line_width: int, digits: int, float_format: int, separator: str, open_bracket: str,
                      close_bracket: str) -> torch.Tensor:
    return x.clone()


nop = _register_identity("nop", _nop)
recomputation_checkpoint = _register_identity("recomputation_checkpoint", _recomputation_checkpoint)
set_available_memory = _register_identity("set_available_memory", _set_available_memory)
set_matmul_serialization = _register_identity("set_matmul_serialization", _set_matmul_serialization)
set_overlap_for_input = _register_identity("set_overlap_for_input", _set_overlap_for_input)
set_overlap_for_output = _register_identity("set_overlap_for_output", _set_overlap_for_output)
ipu_print_tensor = _register_identity("ipu_print_tensor", _ipu_print_tensor)


# -- dynamic slices (a start known only on the device) --------------------------------------------------------------

@custom_op(f"{_NS}::dynamic_slice", mutates_args=())
def dynamic_slice(x: torch.Tensor, dim: int, start: torch.Tensor, size: int, step: int) -> torch.Tensor:
    s = int(start.reshape(-1)[0])
    return x.narrow(dim, s, size)[(slice(None),) * (dim % x.dim()) + (slice(None, None, step),)].clone()


@dynamic_slice.register_fake
def _dynamic_slice_fake(x, dim, start, size, step):
    shape = list(x.shape)
    shape[dim] = (size + step - 1) // step
    return x.new_empty(shape)


@custom_op(f"{_NS}::dynamic_update", mutates_args=())
def dynamic_update(x: torch.Tensor, src: torch.Tensor, dim: int, start: torch.Tensor, size: int) -> torch.Tensor:
    s = int(start.reshape(-1)[0])
    out = x.clone()
    out.narrow(dim, s, size).copy_(src)
    return out


@dynamic_update.register_fake
def _dynamic_update_fake(x, src, dim, start, size):
    return torch.empty_like(x)


# The ops whose node is only an annotation: the translation passes the input through
ANNOTATIONS = {"nop", "recomputation_checkpoint", "set_available_memory", "set_matmul_serialization",
               "set_overlap_for_input", "set_overlap_for_output"}
