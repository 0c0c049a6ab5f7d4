"""The translation of captured ATen nodes into popxl ops: the registry of rules and the view a
rule gets of its node.

One rule per ATen op (`@aten("addmm")` for every overload of a packet, `@aten("add.Tensor")` for
one overload; an overload's own rule wins). A rule gets an `Op`: the call's arguments by their
schema names with the schema's defaults (`op.t("self")` as a popxl tensor, `op.arg("dim")` as the
Python value), the recorded outputs (`op.out(i)`: shape and torch dtype, so rules never guess
PyTorch's shape or type inference) and returns popxl tensors. Every result is checked against the
shape and dtype PyTorch computed when the model was captured: a rule that disagrees with PyTorch
fails at once, naming the op, instead of giving wrong numbers later.
"""
from __future__ import annotations

import contextlib
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import torch

import popxl
import popxl.ops as ops

from .._capture import Captured, Node, Value
from ..errors import Error

Rule = Callable[["Op"], Any]
RULES: Dict[str, Rule] = {}


def aten(*names: str):
    """Register a rule for ATen ops: "relu" (every overload of aten::relu), "add.Tensor" (one
    overload), or a full name such as "poptorch::nop"."""
    def deco(fn):
        for n in names:
            key = n if "::" in n else f"aten::{n}"
            if key in RULES:
                raise ValueError(f"two translation rules for {key}")
            RULES[key] = fn
        return fn
    return deco


def find_rule(node: Node) -> Optional[Rule]:
    """The rule of the overload, else of its packet; an in-place op that reached the capture
    unfunctionalised (`masked_fill_`) uses its functional form's rule: the capture already gave
    its result a new value."""
    name = node.op_name
    rule = RULES.get(name) or RULES.get(name.split(".")[0])
    if rule is None:
        packet, _, overload = name.partition(".")
        if packet.endswith("_") and not packet.endswith("__"):
            rule = RULES.get(f"{packet[:-1]}.{overload}") or RULES.get(packet[:-1])
    return rule


def supported_ops() -> List[str]:
    return sorted(RULES)


# -- types ---------------------------------------------------------------------------------------------------------

_DEVICE_DTYPES = {torch.float32: popxl.float32, torch.float16: popxl.float16, torch.float64: popxl.float32,
                  torch.int64: popxl.int32, torch.int32: popxl.int32, torch.int16: popxl.int16,
                  torch.int8: popxl.int8, torch.uint8: popxl.uint8, torch.bool: popxl.bool}


def device_dtype(dt: torch.dtype, what: str = "") -> popxl.dtype:
    """The type a tensor of torch type `dt` has on the IPU: as PopTorch, 64-bit types are narrowed
    to 32 bits (int64 -> int32, float64 -> float32)."""
    try:
        return _DEVICE_DTYPES[dt]
    except KeyError:
        raise Error(f"{what + ': ' if what else ''}{dt} tensors are not supported on the IPU (PopTorch runs "
                    f"float32, float16, int32 (int64 is narrowed), int16, int8, uint8 and bool); convert it with "
                    f".float() or .int()") from None


def host_array(t: torch.Tensor, what: str = "") -> np.ndarray:
    """A torch CPU tensor as the NumPy array the device holds (narrowed to the device type)."""
    dt = device_dtype(t.dtype, what)
    arr = t.detach().cpu().numpy()
    if arr.dtype.kind in "iu" and arr.size and dt.as_numpy() != arr.dtype and np.dtype(dt.as_numpy()).kind in "iu":
        info = np.iinfo(dt.as_numpy())
        if arr.min() < info.min or arr.max() > info.max:
            raise Error(f"{what + ': ' if what else ''}{t.dtype} values outside the {dt.name} range the IPU holds "
                        f"({info.min}..{info.max}): 64-bit integers are narrowed to 32 bits on the IPU")
    return np.array(arr, dtype=dt.as_numpy(), order="C")  # (np.ascontiguousarray makes 0-dim arrays 1-dim)


# -- the translation --------------------------------------------------------------------------------------------------

class Translation:
    """Translates captured nodes into the popxl graph being built: `env` maps a captured Value
    to the popxl tensor standing for it there (inputs, parameters and buffers are bound first)."""

    def __init__(self, captured: Captured, training: bool, seed: Optional[popxl.Tensor] = None,
                 placement: bool = False, options=None):
        self.captured = captured
        self.training = training
        self.seed = seed
        self.placement = placement
        self.options = options
        self.env: Dict[int, popxl.Tensor] = {}
        self._consts: Dict[tuple, popxl.Tensor] = {}
        self._copies: Dict[tuple, popxl.Tensor] = {}
        self._seeds = 0
        self.node: Optional[Node] = None

    def bind(self, v: Value, t: popxl.Tensor) -> None:
        self.env[v.id] = t

    def tensor(self, v: Value) -> popxl.Tensor:
        t = self.env.get(v.id)
        if t is not None:
            if self.placement and self.node is not None:
                ipu = getattr(t, "_ipu", None)
                if ipu is not None and ipu != self.node.ipu:  # made on another IPU: over the IPU-Links
                    key = (v.id, self.node.ipu)
                    if key not in self._copies:
                        self._copies[key] = ops.ipu_copy(t, self.node.ipu)
                    return self._copies[key]
            return t
        if v.is_const:
            key = (v.id, self.node.ipu if self.placement and self.node is not None else None)
            if key not in self._consts:
                what = f"a constant of {self.node.op_name}" if self.node is not None else "a constant"
                self._consts[key] = popxl.constant(host_array(v.const, what), device_dtype(v.dtype, what),
                                                   name=f"const{v.id}")
            return self._consts[key]
        raise Error(f"internal: {v} has no value in the popxl graph (produced by "
                    f"{v.node.op_name if v.node is not None else v.kind})")

    def next_seed(self) -> popxl.Tensor:
        """A fresh (2,) uint32 seed for one random op, derived from the model's seed."""
        if self.seed is None:
            raise Error("internal: a random op needs the program's random seed")
        self._seeds += 1
        return ops.create_random_seed(self.seed, popxl.constant(np.uint32(self._seeds), popxl.uint32))

    def run(self, nodes: Sequence[Node]) -> None:
        for node in nodes:
            self.node = node
            rule = find_rule(node)
            if rule is None:
                raise unsupported(node)
            with self._placement(node):
                try:
                    result = rule(Op(self, node))
                except Error:
                    raise
                except (ValueError, TypeError, NotImplementedError) as e:
                    raise Error(f"{node.op_name} {node.where()}: {e}") from e
            self._bind_results(node, result)
        self.node = None

    def _placement(self, node: Node):
        stack = contextlib.ExitStack()
        if self.placement:
            stack.enter_context(popxl.ipu(node.ipu))
        if node.scope:
            stack.enter_context(popxl.name_scope(node.scope))
        return stack

    def _bind_results(self, node: Node, result) -> None:
        if isinstance(result, (list, tuple)):
            results = list(result)
        else:
            results = [result]
        for i, v in enumerate(node.outputs):
            r = results[i] if i < len(results) else None
            if r is None:
                continue  # an output the rule does not compute: an error only if something reads it
            if not isinstance(r, popxl.Tensor):
                raise Error(f"internal: the rule of {node.op_name} returned {type(r).__name__} for output {i}")
            want_dt = device_dtype(v.dtype, node.op_name)
            if tuple(r.shape) != tuple(v.shape) or r.dtype != want_dt:
                raise Error(f"internal: the translation of {node.op_name} {node.where()} gives output {i} as "
                            f"{r.dtype.name}{list(r.shape)} where PyTorch computed {want_dt.name}{list(v.shape)}")
            self.env[v.id] = r


def unsupported(node: Node) -> Error:
    name = node.op_name
    packet = name.split(".")[0]
    similar = sorted({r.split(".")[0] for r in RULES if r.split(".")[0].split("::")[-1][:4] ==
                      packet.split("::")[-1][:4]})[:6]
    hint = f" Supported ops with similar names: {', '.join(similar)}." if similar else ""
    return Error(f"Unsupported op {name} {node.where()}: the simulated IPU has no translation for this ATen op."
                 f"{hint} Rewrite that part of the model with supported ops (docs/poptorch.md lists them), or run it "
                 f"on the CPU before or after the PopTorch model.")


class Op:
    """A rule's view of its node."""

    def __init__(self, tr: Translation, node: Node):
        self.tr, self.node = tr, node
        self.args = _normalise(node)

    # arguments
    def arg(self, name: str, default: Any = None) -> Any:
        v = self.args.get(name, default)
        return default if v is None else v

    def has(self, name: str) -> bool:
        return self.args.get(name) is not None

    def t(self, name: str, dtype: Optional[popxl.dtype] = None) -> popxl.Tensor:
        """Argument `name` as a popxl tensor (a Python number becomes a constant), cast to `dtype`
        when given."""
        v = self.args.get(name)
        if isinstance(v, Value):
            t = self.tr.tensor(v)
        elif isinstance(v, (int, float, bool)):
            t = popxl.constant(np.asarray(v, (dtype or _scalar_dtype(v)).as_numpy()), dtype or _scalar_dtype(v))
        else:
            raise self.error(f"argument {name!r} is {type(v).__name__}, a tensor was expected")
        if dtype is not None and t.dtype != dtype:
            t = ops.cast(t, dtype)
        return t

    def value(self, name: str) -> Optional[Value]:
        v = self.args.get(name)
        return v if isinstance(v, Value) else None

    def tensors(self, name: str, dtype: Optional[popxl.dtype] = None) -> List[popxl.Tensor]:
        out = []
        for v in self.args[name]:
            t = self.tr.tensor(v) if isinstance(v, Value) else v
            if dtype is not None and t.dtype != dtype:
                t = ops.cast(t, dtype)
            out.append(t)
        return out

    def const(self, name: str):
        """A tensor argument known when the model was captured (a torch tensor), else None."""
        v = self.args.get(name)
        if isinstance(v, Value) and v.is_const:
            return v.const
        return None

    # results
    def out(self, i: int = 0) -> Value:
        return self.node.outputs[i]

    def out_dtype(self, i: int = 0) -> popxl.dtype:
        return device_dtype(self.node.outputs[i].dtype, self.node.op_name)

    def out_shape(self, i: int = 0) -> tuple:
        return tuple(self.node.outputs[i].shape)

    def scalar(self, value, dtype: popxl.dtype) -> popxl.Tensor:
        return popxl.constant(np.asarray(value, dtype.as_numpy()), dtype)

    def attr(self, name: str, default=None):
        return self.node.attrs.get(name, default)

    def error(self, msg: str) -> Error:
        return Error(f"{self.node.op_name} {self.node.where()}: {msg}")


def _scalar_dtype(v) -> popxl.dtype:
    if isinstance(v, bool):
        return popxl.bool
    if isinstance(v, int):
        return popxl.int32
    return popxl.float32


def _normalise(node: Node) -> Dict[str, Any]:
    schema = getattr(node.op, "_schema", None)
    if schema is None:
        return {f"arg{i}": a for i, a in enumerate(node.args)} | dict(node.kwargs)
    out: Dict[str, Any] = {}
    args = list(node.args)
    for i, a in enumerate(schema.arguments):
        if i < len(args) and not a.kwarg_only:
            out[a.name] = args[i]
        elif a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        elif a.has_default_value():
            out[a.name] = a.default_value
        else:
            out[a.name] = None
    return out
