"""Keeping a trained model's host weights in sync with the device, as PopTorch does.

After a training run the host copy of the weights is stale. The wrapped model's class, and its
parameters' and buffers' classes, are swapped for subclasses that read the device's weights back
the first time they are touched (PoplarExecutor.copyWeightsToHostIfNeeded). `unwrapped` gives the
model its original classes back while it is captured or pickled.
"""
from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Dict

import torch
from torch.utils import _pytree as pytree

if TYPE_CHECKING:
    from ._executor import PoplarExecutor


def raw_state(model: torch.nn.Module) -> Dict[str, torch.Tensor]:
    """name -> parameter / buffer tensor, without triggering a weight copy."""
    out = {}
    for mname, m in _raw_modules(model):
        for n, p in object.__getattribute__(m, "_parameters").items():
            if p is not None:
                out.setdefault(f"{mname}.{n}" if mname else n, p)
        for n, b in object.__getattribute__(m, "_buffers").items():
            if b is not None:
                out.setdefault(f"{mname}.{n}" if mname else n, b)
    return out


def raw_params(model: torch.nn.Module):
    seen = set()
    for mname, m in _raw_modules(model):
        for n, p in object.__getattribute__(m, "_parameters").items():
            if p is not None and id(p) not in seen:
                seen.add(id(p))
                yield (f"{mname}.{n}" if mname else n), p


def _raw_modules(model, prefix=""):
    yield prefix, model
    for n, child in object.__getattribute__(model, "_modules").items():
        if child is not None:
            yield from _raw_modules(child, f"{prefix}.{n}" if prefix else n)


_WRAPPED_CLASSES: Dict[type, type] = {}


def wrap_for_weight_sync(executor: PoplarExecutor) -> None:
    """Swap the classes of the model, its parameters and buffers for subclasses that read the
    device's weights back when the host copy is stale."""
    model = executor._user_model
    ref = weakref.ref(executor)
    model.__dict__["_poptorch_trainer"] = ref
    original = type(model)
    if getattr(original, "_poptorch_wrapped", False):
        original = original._poptorch_original
    key = original
    cls = _WRAPPED_CLASSES.get(key)
    if cls is None:
        def __getattribute__(self, name):
            if name in ("_parameters", "_buffers", "forward", "state_dict"):
                _sync(self)
            return object.__getattribute__(self, name)

        def __reduce_ex__(self, protocol):
            # pickled (torch.save, deepcopy) as the original class
            state = dict(self.__dict__)
            state.pop("_poptorch_trainer", None)
            return (_rebuild_module, (original, state))

        cls = type(f"Poptorch{original.__name__}", (original,),
                   {"__getattribute__": __getattribute__, "__reduce_ex__": __reduce_ex__,
                    "_poptorch_wrapped": True, "_poptorch_original": original,
                    "__module__": original.__module__})
        _WRAPPED_CLASSES[key] = cls
    model.__class__ = cls
    for _, p in raw_params(model):
        if type(p) is torch.nn.Parameter:
            p.__class__ = _PoptorchParameter
        p.__dict__["_poptorch_trainer"] = ref
    for _, b in raw_state(model).items():
        if type(b) is torch.Tensor:
            b.__class__ = _PoptorchBuffer
            b.__dict__["_poptorch_trainer"] = ref


def _rebuild_module(cls, state):
    m = cls.__new__(cls)
    m.__dict__.update(state)
    return m


def _sync(obj) -> None:
    ref = obj.__dict__.get("_poptorch_trainer") if hasattr(obj, "__dict__") else None
    ex = ref() if ref is not None else None
    if ex is not None and ex._dirty_host_weights:
        ex.copyWeightsToHostIfNeeded()


class _SyncOnAccess:
    """Reads the device's weights back (when stale) before the tensor is used: on any attribute
    access and in any torch function it takes part in."""
    __slots__ = ()  # adds no storage, so a tensor's class can still be swapped for a subclass

    def __getattribute__(self, name):
        if name != "__dict__":
            _sync(self)
        return object.__getattribute__(self, name)

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in pytree.tree_leaves((args, kwargs or {})):
            if isinstance(a, _SyncOnAccess):
                _sync(a)
        with torch._C.DisableTorchFunctionSubclass():
            return func(*args, **(kwargs or {}))


class _PoptorchParameter(_SyncOnAccess, torch.nn.Parameter):
    def __reduce_ex__(self, protocol):
        return (torch.nn.Parameter, (torch.Tensor(self.detach()).clone(), self.requires_grad))

    def __repr__(self, *args, **kwargs):  # as torch.nn.Parameter prints, with the device's values
        return "Parameter containing:\n" + repr(self.detach().requires_grad_(self.requires_grad))


class _PoptorchBuffer(_SyncOnAccess, torch.Tensor):
    def __repr__(self, *args, **kwargs):
        return repr(self.detach())

    def __reduce_ex__(self, protocol):
        with torch._C.DisableTorchFunctionSubclass():
            return torch.Tensor.__reduce_ex__(self.as_subclass(torch.Tensor), protocol)


class unwrapped:
    """The model with its original classes while it is captured or pickled."""

    def __init__(self, executor: PoplarExecutor):
        self.ex = executor

    def __enter__(self):
        ex = self.ex
        if ex._training and getattr(type(ex._user_model), "_poptorch_wrapped", False):
            if ex._dirty_host_weights:
                ex.copyWeightsToHost()
            unwrap(ex)
            self.rewrap = True
        else:
            self.rewrap = False
        return self

    def __exit__(self, *exc):
        if self.rewrap:
            wrap_for_weight_sync(self.ex)
        return False


def unwrap(executor: PoplarExecutor) -> None:
    model = executor._user_model
    cls = type(model)
    if getattr(cls, "_poptorch_wrapped", False):
        model.__class__ = cls._poptorch_original
    model.__dict__.pop("_poptorch_trainer", None)
    for _, t in raw_state(model).items():
        if type(t) is _PoptorchParameter:
            t.__class__ = torch.nn.Parameter
        elif type(t) is _PoptorchBuffer:
            t.__class__ = torch.Tensor
        t.__dict__.pop("_poptorch_trainer", None)
