"""PopTorch's ops and annotations: identity_loss, Block / BeginBlock / BlockFunction,
recomputationCheckpoint, ipu_print_tensor, nop, serializedMatMul, set_available_memory,
dynamic_slice / dynamic_update, MultiConv, NameScope, CPU, set_overlap_for_input / output.

Ops that return tensors are `torch.ops.poptorch.*` (poptorch/_custom_ops.py): they also run in
plain PyTorch on the CPU. Annotations that only place or name the ops around them (blocks, name
scopes, multi-convolutions) talk to the capture directly and do nothing outside it.
"""
from __future__ import annotations

from typing import Callable, List, Optional, Union

import torch

from . import _capture, enums
from . import _custom_ops  # noqa: F401  (registers torch.ops.poptorch.*)
from ._utils import flattenTensorStructure, reconstructTensorStructure
from .errors import Error, createPoptorchError


def _need_tensor(what: str, t) -> None:
    if not isinstance(t, torch.Tensor):
        raise createPoptorchError(f"{what} must take a torch.tensor argument. {type(t)} is not supported.")


def identity_loss(x: torch.Tensor, reduction: str) -> torch.Tensor:
    """Mark `x` as the loss (backpropagation starts here); reduce it with "sum", "mean" or "none"."""
    if reduction == "sum":
        return torch.ops.poptorch.identity_loss(x, 0)
    if reduction == "mean":
        return torch.ops.poptorch.identity_loss(x, 1)
    if reduction != "none":
        raise createPoptorchError(f"Unsupported reduction type {reduction!r}: use 'sum', 'mean' or 'none'")
    return torch.ops.poptorch.identity_loss(x, 2)


def ipu_print_tensor(tensor: torch.Tensor, title: str = "", print_gradient: bool = True,
                     summarise_threshold: int = 1000, edge_items: int = 3, max_line_width: int = 80,
                     digits: int = 4, float_format: str = "auto", separator: str = ", ", open_bracket: str = "(",
                     close_bracket: str = ")") -> torch.Tensor:
    """Print the tensor (and, in training, its gradient) while the program runs; use the result
    in place of `tensor`."""
    _need_tensor("ipu print tensor", tensor)
    formats = {"auto": 0, "fixed": 1, "scientific": 2, "none": 3}
    if float_format not in formats:
        raise createPoptorchError(f"float_format must be one of {list(formats)}, not {float_format!r}")
    return torch.ops.poptorch.ipu_print_tensor(tensor, title, int(print_gradient), summarise_threshold, edge_items,
                                               max_line_width, digits, formats[float_format], separator,
                                               open_bracket, close_bracket)


def nop(tensor: torch.Tensor) -> torch.Tensor:
    """An identity that is never optimised away."""
    _need_tensor("nop", tensor)
    return torch.ops.poptorch.nop(tensor)


def recomputationCheckpoint(*tensors):  # noqa: N802
    """Checkpoint tensors for recomputation (kept between the forward and backward passes)."""
    if len(tensors) == 1 and isinstance(tensors[0], (tuple, list)):
        return type(tensors[0])(recomputationCheckpoint(*tensors[0]))
    out = []
    for t in tensors:
        if not isinstance(t, torch.Tensor):
            raise ValueError("All inputs must be tensors")
        out.append(torch.ops.poptorch.recomputation_checkpoint(t))
    return out[0] if len(out) == 1 else tuple(out)


def serializedMatMul(lhs: torch.Tensor, rhs: torch.Tensor, mode: enums.MatMulSerializationMode,  # noqa: N802
                     factor: int = 0, keep_precision: bool = False) -> torch.Tensor:
    """lhs @ rhs computed as `factor` smaller products along the dimension `mode` names."""
    if not isinstance(mode, enums.MatMulSerializationMode):
        raise ValueError("serializedMatMul: mode must be a poptorch.MatMulSerializationMode")
    if not isinstance(factor, int) or not isinstance(keep_precision, bool):
        raise ValueError("serializedMatMul: factor must be an int and keep_precision a bool")
    out = torch.matmul(lhs, rhs)
    return torch.ops.poptorch.set_matmul_serialization(out, mode.value, factor, keep_precision)


def set_available_memory(tensor: torch.Tensor, available_memory_proportion: float) -> torch.Tensor:
    """The proportion of tile memory the op that made `tensor` (a matmul, convolution or gather)
    may use for temporary data while it runs (PopLibs' planner; the default is 0.6)."""
    _need_tensor("set_available_memory", tensor)
    if not 0.0 <= float(available_memory_proportion) <= 1.0:
        raise createPoptorchError(f"available_memory_proportion must be in [0, 1], not {available_memory_proportion}")
    return torch.ops.poptorch.set_available_memory(tensor, float(available_memory_proportion))


def set_overlap_for_input(input_tensors, mode: enums.OverlapMode):
    """Overlap the host-to-IPU copy of these inputs with compute (IO tiles; accepted, see docs)."""
    flat = flattenTensorStructure(input_tensors)
    return reconstructTensorStructure(input_tensors, [torch.ops.poptorch.set_overlap_for_input(t, mode.value)
                                                      for t in flat])


def set_overlap_for_output(output_tensors, mode: enums.OverlapMode):
    flat = flattenTensorStructure(output_tensors)
    return reconstructTensorStructure(output_tensors, [torch.ops.poptorch.set_overlap_for_output(t, mode.value)
                                                       for t in flat])


def dynamic_slice(tensor: torch.Tensor, dim: int, start: torch.Tensor, size: int, step: int) -> torch.Tensor:
    """tensor[start:start+size:step] along `dim`, `start` a tensor known only when the model runs."""
    _need_tensor("dynamic_slice", tensor)
    if not isinstance(dim, int) or not isinstance(size, int) or not isinstance(step, int):
        raise createPoptorchError("dynamic_slice: dim, size and step must be integers.")
    _need_tensor("dynamic_slice start", start)
    return torch.ops.poptorch.dynamic_slice(tensor, dim, start, size, step)


def dynamic_update(input: torch.Tensor, src: torch.Tensor, dim: int, start: torch.Tensor,  # noqa: A002
                   size: int) -> torch.Tensor:
    _need_tensor("dynamic_update", input)
    _need_tensor("dynamic_update src", src)
    _need_tensor("dynamic_update start", start)
    if input.dim() != src.dim():
        raise createPoptorchError(f"input and src tensors must have same dimensionality. ({input.dim()}) vs "
                                  f"({src.dim()})")
    if input.dtype != src.dtype:
        raise createPoptorchError(f"input and src tensor must have same dtype. ({input.dtype} vs {src.dtype})")
    return torch.ops.poptorch.dynamic_update(input, src, dim, start, size)


# -- blocks -------------------------------------------------------------------------------------------------------

class Block(torch.nn.Module):
    """`with poptorch.Block("name", ipu_id=n):` — the layers called inside run in this block
    (on IPU n); blocks make up the stages of the execution strategy."""

    _stages_manager = None  # set by the execution strategy while a model is captured

    @staticmethod
    def useAutoId():  # noqa: N802
        if Block._stages_manager is not None:
            Block._stages_manager.resetAutoId()

    @staticmethod
    def start(user_id: Optional[str] = None, ipu_id: Optional[int] = None):
        if Block._stages_manager is not None:
            Block._stages_manager.beginStage(user_id, ipu_id)

    def __init__(self, user_id: Optional[str] = None, ipu_id: Optional[int] = None):
        super().__init__()
        self._user_id = user_id
        self._ipu_id = ipu_id

    def __enter__(self):
        Block.start(self._user_id, self._ipu_id)

    def __exit__(self, type, value, traceback):  # noqa: A002
        return False


class LegacyBeginBlockFn(torch.nn.Module):
    """BeginBlock applied to a function rather than a module."""

    def __init__(self, layer_to_call, user_id=None, ipu_id=None):
        super().__init__()
        self._user_id, self._layer_to_call, self._ipu_id = user_id, layer_to_call, ipu_id

    def __call__(self, *args, **kwargs):
        if Block._stages_manager is not None:
            if self._user_id is None:
                self._user_id = Block._stages_manager.nextAutoId()
            Block._stages_manager.beginStage(self._user_id, self._ipu_id)
        return self._layer_to_call(*args, **kwargs)


class _BlockHook:
    def __init__(self, user_id, ipu_id) -> None:
        self._user_id, self._ipu_id = user_id, ipu_id
        self.handle = None  # the module's RemovableHandle of this hook

    def __call__(self, module, inputs):
        if Block._stages_manager is not None:
            if self._user_id is None:
                self._user_id = Block._stages_manager.nextAutoId()
            Block._stages_manager.beginStage(self._user_id, self._ipu_id)

    def __repr__(self):
        return f"BeginBlock(user_id={self._user_id}, ipu_id={self._ipu_id})"


def BeginBlock(layer_to_call, user_id: str = None, ipu_id: int = None):  # noqa: N802
    """Start a block at this module: it and every layer called after it (until the next block)
    belong to the block (and run on IPU `ipu_id`)."""
    if not isinstance(layer_to_call, torch.nn.Module):
        if callable(layer_to_call):
            return LegacyBeginBlockFn(layer_to_call, user_id, ipu_id)
        raise createPoptorchError("module is not an instance of torch.nn.Module or function.")
    if any(isinstance(h, _BlockHook) for h in layer_to_call._forward_pre_hooks.values()):
        raise createPoptorchError("module has already been assigned to a block.")
    hook = _BlockHook(user_id, ipu_id)
    hook.handle = layer_to_call.register_forward_pre_hook(hook)
    return layer_to_call


def BlockFunction(user_id: Optional[str] = None, ipu_id: Optional[int] = None):  # noqa: N802
    """Decorator: the function runs in a Block."""
    def decorator(func):
        def wrapper(*args, **kwargs):
            with Block(user_id, ipu_id):
                return func(*args, **kwargs)
        return wrapper
    return decorator


def removeBlocks(module):  # noqa: N802
    """Remove the BeginBlock annotations of `module` and its children."""
    if not isinstance(module, torch.nn.Module):
        raise createPoptorchError("removeBlocks takes a torch.nn.Module")
    for m in module.modules():
        for h in list(m._forward_pre_hooks.values()):
            if isinstance(h, _BlockHook) and h.handle is not None:
                h.handle.remove()


# -- scopes -------------------------------------------------------------------------------------------------------

class MultiConv:
    """Convolutions called in this scope form one multi-convolution (PopLibs plans them together).
    Here each is planned on its own; the options are checked and recorded on the convolutions."""

    def __init__(self):
        self._available_memory_proportions = None
        self._partials_types = None
        self._plan_type = None
        self._per_conv_reserved_tiles = None
        self._cycle_back_off = None
        self._enable_conv_ditherings = None
        self._previous = None

    @staticmethod
    def _per_conv(name, value, kind):
        if value is None:
            return None
        if isinstance(value, kind):
            return (value,)
        if isinstance(value, (list, tuple)) and value and all(isinstance(x, kind) for x in value):
            return tuple(value)
        raise AssertionError(f"Invalid {name}!")

    def availableMemoryProportions(self, value: Union[float, List[float]]) -> "MultiConv":  # noqa: N802
        self._available_memory_proportions = self._per_conv("available memory proportion", value, float)
        return self

    def partialsTypes(self, value) -> "MultiConv":  # noqa: N802
        def enc(d):
            if d in (torch.float, torch.float32):
                return 0
            if d in (torch.half, torch.float16):
                return 1
            raise ValueError("Invalid partials types. Expecting torch.float or torch.half")
        self._partials_types = tuple(enc(v) for v in value) if isinstance(value, (list, tuple)) else (enc(value),)
        return self

    def enableConvDithering(self, value) -> "MultiConv":  # noqa: N802
        if value is not None and not (isinstance(value, bool) or
                                      (isinstance(value, (list, tuple)) and all(isinstance(x, bool) for x in value))):
            raise ValueError("value must be bool or list of bools")
        self._enable_conv_ditherings = (value,) if isinstance(value, bool) else value
        return self

    def planType(self, value: enums.MultiConvPlanType) -> "MultiConv":  # noqa: N802
        if value is not None and not isinstance(value, enums.MultiConvPlanType):
            raise AssertionError("Invalid plan type!")
        self._plan_type = value
        return self

    def perConvReservedTiles(self, value: int) -> "MultiConv":  # noqa: N802
        if not isinstance(value, int):
            raise AssertionError("perConvReservedTiles takes an int")
        self._per_conv_reserved_tiles = value
        return self

    def cycleBackOff(self, value: float) -> "MultiConv":  # noqa: N802
        if not isinstance(value, float):
            raise AssertionError("cycleBackOff takes a float")
        self._cycle_back_off = value
        return self

    def __enter__(self):
        rec = _capture.active_recorder()
        if rec is not None:
            self._previous = rec.multi_conv
            rec.multi_conv = rec.next_multi_conv()
            self._first = len(rec.nodes)
        return self

    def __exit__(self, type, value, traceback):  # noqa: A002
        rec = _capture.active_recorder()
        if rec is not None:
            convs = [n for n in rec.nodes[self._first:] if n.packet == "aten::convolution"]
            for i, n in enumerate(convs):
                amp = self._available_memory_proportions
                if amp:
                    n.attrs["available_memory_proportion"] = amp[i] if len(amp) > 1 else amp[0]
            rec.multi_conv = self._previous
        return False


class NameScope:
    """Ops called in this scope get `name` in their name (profiles show it)."""

    def __init__(self, name: str):
        if not isinstance(name, str):
            raise AssertionError("Parameter to NameScope must be a string")
        self.name = name

    def __enter__(self):
        rec = _capture.active_recorder()
        if rec is not None:
            rec.name_scopes.append(("scope", self.name))

    def __exit__(self, type, value, traceback):  # noqa: A002
        rec = _capture.active_recorder()
        if rec is not None:
            rec.name_scopes.pop()
        return False


class CPU:
    """Run a function on the host in the middle of an inference model (PopTorch's poptorch.CPU)."""

    def __init__(self, layer_to_call: Callable, ID: str):  # noqa: N803
        self._layer_to_call = layer_to_call
        if isinstance(layer_to_call, torch.nn.Module):
            layer_to_call.requires_grad_(False)
        self._ID = ID

    def __call__(self, *inputs, **kwargs):
        rec = _capture.active_recorder()
        if rec is None:
            return self._layer_to_call(*inputs, **kwargs)
        raise Error(f"poptorch.CPU('{self._ID}'): host callbacks in the middle of a model are not supported by the "
                    f"simulator; run the function before or after the PopTorch model")


def isRunningOnIpu() -> bool:  # noqa: N802
    """True while the model is being captured for the IPU, False when it runs on the CPU."""
    return _capture.is_capturing()


def custom_op(inputs, name, domain, domain_version, example_outputs, attributes=None):
    raise Error(f"poptorch.custom_op('{name}'): PopART C++ custom ops cannot be loaded by the simulator; write the op "
                f"with supported torch ops, or as a popxl custom op (docs/custom-ops.md) in a PopXL program")


def for_loop(count: int, body, inputs):
    """An on-device loop of `count` iterations; here the body is unrolled into the program."""
    if not isinstance(inputs, list):
        raise ValueError("poptorch.for_loop expects input tensors (inputs) to be a list of tensors. "
                         "(Object is not list)")
    for i, t in enumerate(inputs):
        if not isinstance(t, torch.Tensor):
            raise ValueError(f"poptorch.for_loop expects input tensors (inputs) to be a list of tensors. (Object "
                             f"contained in list at index {i} is not torch.tensor)")
    values = [t.clone() for t in inputs]
    for _ in range(int(count)):
        out = body(*values)
        values = list(out) if isinstance(out, (list, tuple)) else [out]
    return values


def cond(condition, then_body, then_inps, else_body, else_inps):
    """On-device if / else (inference only in PopTorch). Both branches are computed and the
    condition selects between them with torch.where, so the condition may be computed on the IPU."""
    if not isinstance(then_inps, list) or not isinstance(else_inps, list):
        raise ValueError("poptorch.cond expects then_inps and else_inps tensors to be a list of tensors. "
                         "(Object is not list)")
    if not _capture.is_capturing():
        res = then_body(*then_inps) if condition else else_body(*else_inps)
        return [res] if isinstance(res, torch.Tensor) else list(res)
    t = then_body(*then_inps)
    e = else_body(*else_inps)
    t = [t] if isinstance(t, torch.Tensor) else list(t)
    e = [e] if isinstance(e, torch.Tensor) else list(e)
    if len(t) != len(e):
        raise createPoptorchError("poptorch.cond: then_body and else_body must return the same number of outputs")
    c = condition.reshape(()) if condition.numel() == 1 else condition
    return [torch.where(c.bool(), a, b) for a, b in zip(t, e)]
