"""Capture a PyTorch model as a graph of ATen ops (docs/poptorch.md, "Capture").

The model runs once on the CPU, at its micro-batch size, under three pieces of PyTorch's own
machinery:

- `torch.func.functional_call` with copies of the parameters and buffers, so the user's model is
  never changed by the capture (batch norm's running statistics included);
- `torch.func.functionalize`, which turns every in-place op and every write through a view into
  functional ATen ops (`x[:, 0] = 1` becomes `select_scatter`, `relu_` becomes `relu`), and
  writes back into buffers with `copy_` at the end;
- a `TorchDispatchMode` (`_Recorder`), below autograd and functionalization, which sees every
  ATen op the model runs, with real CPU tensors, and records it as a `Node`.

A `TorchFunctionMode` marks the results of torch.nn.functional's losses as losses (PopTorch treats
them as `identity_loss`), and global module hooks give every node the path of the module that
ran it (its name scope) and, through poptorch.Block / BeginBlock, its IPU and pipeline stage.

Because the tensors are real, any value computed only from constants (masks, position ids,
`torch.arange`) is known here and becomes a constant of the program; what depends on inputs,
parameters, buffers or randomness becomes a node. Reading a value of the device on the host
(`.item()`, `if tensor:`) is an error, as in PopTorch.
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

import torch
from torch.overrides import TorchFunctionMode
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import TorchDispatchMode

from . import _custom_ops  # noqa: F401  (registers torch.ops.poptorch.*)
from .errors import Error

aten = torch.ops.aten

# ops whose result is random: never folded into constants
RANDOM_OPS = {"native_dropout", "dropout", "bernoulli", "rand", "randn", "rand_like", "randn_like", "randint",
              "randint_like", "normal", "uniform", "randperm", "multinomial", "exponential", "feature_dropout",
              "alpha_dropout"}
# ops that are kept even when nothing reads their result
SIDE_EFFECT_OPS = {"poptorch::ipu_print_tensor"}

# torch.nn.functional losses: their results are losses (PopTorch's identity_loss, reduction "none")
_LOSS_FUNCTIONS = ("l1_loss", "mse_loss", "nll_loss", "cross_entropy", "binary_cross_entropy",
                   "binary_cross_entropy_with_logits", "smooth_l1_loss", "huber_loss", "kl_div", "soft_margin_loss",
                   "hinge_embedding_loss", "margin_ranking_loss", "cosine_embedding_loss", "poisson_nll_loss",
                   "gaussian_nll_loss", "triplet_margin_loss", "triplet_margin_with_distance_loss",
                   "multilabel_soft_margin_loss", "multi_margin_loss", "multilabel_margin_loss", "ctc_loss")


class Value:
    """A tensor of the captured program: an input, a parameter, a buffer, a constant or the
    output of a node."""

    __slots__ = ("id", "shape", "dtype", "kind", "name", "const", "node", "index", "stride", "offset")

    def __init__(self, vid: int, t: torch.Tensor, kind: str, name: str = "", const=None, node=None, index=0):
        self.id, self.shape, self.dtype = vid, tuple(t.shape), t.dtype
        # its layout in PyTorch's storage (for as_strided); None where the tensor has none
        try:
            self.stride: Optional[tuple] = tuple(t.stride())
            self.offset: Optional[int] = int(t.storage_offset())
        except (RuntimeError, NotImplementedError):
            self.stride, self.offset = None, None
        self.kind, self.name, self.const, self.node, self.index = kind, name, const, node, index

    @property
    def is_const(self) -> bool:
        return self.kind == "const"

    def __repr__(self) -> str:
        what = self.name or (f"{self.node.op_name}[{self.index}]" if self.node is not None else self.kind)
        return f"%{self.id}:{what}{list(self.shape)}:{str(self.dtype).replace('torch.', '')}"


@dataclass
class Node:
    """One ATen (or poptorch::) op call: `op` is the OpOverload, `args` / `kwargs` hold Values
    where the call had tensors."""
    op: Any
    args: tuple
    kwargs: dict
    outputs: List[Optional[Value]]
    module: str = ""           # dotted path of the innermost module running ("" = the model)
    module_type: str = ""      # its class name
    scope: str = ""            # name scope: module path components and poptorch.NameScope, joined by "/"
    ipu: int = 0
    stage: int = 0
    attrs: Dict[str, Any] = field(default_factory=dict)
    python_outputs: Any = None  # non-tensor results (rare)

    @property
    def op_name(self) -> str:
        return _op_name(self.op)

    @property
    def packet(self) -> str:
        return self.op_name.split(".")[0]

    def inputs(self) -> List[Value]:
        return [v for v in pytree.tree_leaves((self.args, self.kwargs)) if isinstance(v, Value)]

    def where(self) -> str:
        if not self.module:
            return "in the model's forward"
        return f"in module '{self.module}' ({self.module_type})"


def _op_name(op) -> str:
    """"aten::addmm.default", "aten::add.Tensor", "poptorch::nop.default"."""
    schema = getattr(op, "_schema", None)
    if schema is not None:
        return f"{schema.name}.{getattr(op, '_overloadname', None) or 'default'}"
    return str(op)


@dataclass
class Captured:
    nodes: List[Node]
    inputs: List[Value]                 # flat tensor inputs, in pytree order
    input_spec: Any                     # pytree spec of (args, kwargs); non-tensors kept in input_statics
    input_statics: List[Any]
    params: Dict[str, Value]            # parameter name -> its Value
    buffers: Dict[str, Value]
    trainable: List[str]                # parameters that require grad
    outputs: List[Any]                  # flat outputs: Values or Python constants
    output_spec: Any
    state_updates: Dict[str, Value]     # parameter / buffer name -> its value after the forward pass
    losses: List[Node]                  # poptorch::identity_loss nodes, in order
    aliases: Dict[str, str]             # tied parameter name -> the name it shares storage with
    num_ipus: int = 1
    stages: Dict[int, int] = field(default_factory=dict)  # stage -> ipu

    def consumers(self) -> Dict[int, List[Node]]:
        out: Dict[int, List[Node]] = {}
        for n in self.nodes:
            for v in n.inputs():
                out.setdefault(v.id, []).append(n)
        return out


class _Recorder(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.nodes: List[Node] = []
        self.values: Dict[int, Value] = {}  # id(tensor) -> Value
        self._keep: List[torch.Tensor] = []  # keeps ids unique while capturing
        self._next = 0
        self.module_stack: List[Tuple[str, str]] = []
        self.name_scopes: List[Tuple[str, str]] = []  # ("module", path) / ("scope", NameScope name)
        self.ipu = 0
        self.stage = 0
        self.stages: Dict[int, int] = {}
        self.multi_conv: Optional[int] = None
        self._multi_conv_count = 0

    def next_multi_conv(self) -> int:
        self._multi_conv_count += 1
        return self._multi_conv_count

    # -- values -----------------------------------------------------------------------------------------------
    def new_value(self, t: torch.Tensor, kind: str, name: str = "", const=None, node=None, index=0) -> Value:
        v = Value(self._next, t, kind, name, const, node, index)
        self._next += 1
        self.values[id(t)] = v
        self._keep.append(t)
        return v

    def value_of(self, t: torch.Tensor) -> Value:
        v = self.values.get(id(t))
        if v is None:  # a tensor the model holds outside its parameters and buffers: a constant
            snapshot = t.detach().clone()
            v = self.new_value(t, "const", const=snapshot)
        return v

    def _map_in(self, x):
        return self.value_of(x) if isinstance(x, torch.Tensor) else x

    # -- context ----------------------------------------------------------------------------------------------
    def _context(self) -> dict:
        module, mtype = self.module_stack[-1] if self.module_stack else ("", "")
        # the innermost module's path (its parents are in it), then poptorch.NameScope names
        # opened inside it; a module entry of "" (disableModuleNamescope) adds nothing
        parts: List[str] = []
        for kind, name in self.name_scopes:
            if kind == "module":
                parts = [name] if name else []
            else:
                parts.append(name)
        return dict(module=module, module_type=mtype, scope="/".join(parts), ipu=self.ipu, stage=self.stage)

    def on_stage(self, user_id, stage, ipu) -> None:
        self.ipu = int(ipu)
        self.stage = int(stage._stage_id if stage._stage_id >= 0 else ipu)
        prev = self.stages.get(self.stage)
        # a phase of a phased execution runs its stages on several IPUs at once (their stage id is the phase's)
        if prev is not None and prev != self.ipu and getattr(stage, "_phase_id", -1) < 0:
            raise Error(f"Stage {self.stage} is placed on IPU {prev} and IPU {self.ipu} (block '{user_id}'): all "
                        f"blocks of a stage must run on the same IPU")
        self.stages[self.stage] = self.ipu

    # -- the ops --------------------------------------------------------------------------------------------------
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        name = _op_name(func)
        if func is aten.copy_.default and isinstance(args[0], torch.Tensor) and id(args[0]) in self.values:
            dst = self.values[id(args[0])]
            out = func(*args, **kwargs)
            if dst.kind in ("buffer", "param") or (dst.kind == "op" and dst.name):
                # functionalization writing the new value of a buffer back at the end
                src = self._map_in(args[1])
                if src.shape != dst.shape or src.dtype != dst.dtype:
                    src = self._record(aten._to_copy.default, (src,), {"dtype": dst.dtype}, [args[0].clone()])[0]
                self.values[id(args[0])] = _renamed(src, dst.name)
            return out
        if name == "aten::_local_scalar_dense.default":
            v = self._map_in(args[0])
            if not v.is_const:
                mod = self._context()["module"]
                raise Error(f"The model reads the value of a tensor computed on the IPU (aten::_local_scalar_dense: "
                            f".item(), int(), float(), bool() or `if tensor:`){' in module ' + repr(mod) if mod else ''}"
                            f"; the program is captured once and cannot branch on or return device values to "
                            f"Python. Keep the computation on tensors (torch.where instead of `if`), or compute the "
                            f"value on the CPU before calling the model.")
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        ins = pytree.tree_map(self._map_in, (tuple(args), dict(kwargs)))
        leaves = [x for x in pytree.tree_leaves(ins) if isinstance(x, Value)]
        out_leaves, _ = pytree.tree_flatten(out)
        tensors = [t for t in out_leaves if isinstance(t, torch.Tensor)]
        packet = name.split("::")[-1].split(".")[0]
        foldable = (all(v.is_const for v in leaves) and packet not in RANDOM_OPS and name.split(".")[0]
                    not in SIDE_EFFECT_OPS and not name.startswith("poptorch::"))
        if foldable:
            for t in tensors:
                self.new_value(t, "const", const=t)
            return out
        self._record(func, ins[0], ins[1], tensors, out_leaves)
        if name == "aten::native_batch_norm.default":
            self._running_stats(args)
        return out

    def _record(self, func, args, kwargs, tensors, out_leaves=None) -> List[Value]:
        node = Node(func, tuple(args), dict(kwargs), [], **self._context())
        if self.multi_conv is not None:
            node.attrs["multi_conv"] = self.multi_conv
        for i, t in enumerate(tensors):
            node.outputs.append(self.new_value(t, "op", node=node, index=i))
        if out_leaves is not None and len(tensors) != len(out_leaves):
            node.python_outputs = [x for x in out_leaves if not isinstance(x, torch.Tensor)]
        self.nodes.append(node)
        return node.outputs

    def _running_stats(self, args) -> None:
        """native_batch_norm in training updates its running mean and variance in place (the
        schema does not say so, so functionalization leaves it): the node gets two more outputs,
        the new statistics, which later reads of those tensors see."""
        x, _w, _b, rm, rv, training = args[:6]
        if not training or rm is None:
            return
        node = self.nodes[-1]
        for t in (rm, rv):
            old = self.values[id(t)]
            new = Value(self._next, t, "op", old.name, node=node, index=len(node.outputs))
            self._next += 1
            node.outputs.append(new)
            self.values[id(t)] = new
        node.attrs["updates_running_stats"] = True


def _renamed(v: Value, name: str) -> Value:
    """`v` as the new value of state `name` (a Value that is only renamed keeps its identity)."""
    if v.kind == "op" and not v.name:
        v.name = name
    return v


class _LossMarker(TorchFunctionMode):
    """Marks the results of torch.nn.functional's losses with poptorch::identity_loss(none)."""

    def __init__(self):
        super().__init__()
        import torch.nn.functional as F
        self._losses = {getattr(F, n) for n in _LOSS_FUNCTIONS if hasattr(F, n)}

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if func in self._losses and isinstance(out, torch.Tensor):
            out = torch.ops.poptorch.identity_loss(out, 2)
        return out


_active: Optional[_Recorder] = None


def active_recorder() -> Optional[_Recorder]:
    return _active


def is_capturing() -> bool:
    return _active is not None


@contextlib.contextmanager
def _module_hooks(model: torch.nn.Module, rec: _Recorder, namescopes: bool):
    names = {id(m): n for n, m in model.named_modules(remove_duplicate=False)}

    def pre(module, inputs):
        path = names.get(id(module))
        if path is None:
            return
        rec.module_stack.append((path, type(module).__name__))
        rec.name_scopes.append(("module", path.replace(".", "/") if namescopes else ""))

    def post(module, inputs, output):
        if names.get(id(module)) is None:
            return
        rec.module_stack.pop()
        rec.name_scopes.pop()

    from torch.nn.modules import module as module_mod
    h1 = module_mod.register_module_forward_pre_hook(pre)
    h2 = module_mod.register_module_forward_hook(post, always_call=True)
    try:
        yield
    finally:
        h1.remove()
        h2.remove()


def capture(model: torch.nn.Module, args: tuple, kwargs: dict, training: bool, strategy=None,
            namescopes: bool = True) -> Captured:
    """Run `model(*args, **kwargs)` once on the CPU and record its ATen ops."""
    global _active
    if _active is not None:
        raise Error("A model is already being captured (nested poptorch model calls are not supported)")
    params_named = dict(model.named_parameters(remove_duplicate=False))
    buffers_named = dict(model.named_buffers(remove_duplicate=False))
    aliases: Dict[str, str] = {}
    first_of: Dict[int, str] = {}
    for n, t in list(params_named.items()) + list(buffers_named.items()):
        if id(t) in first_of:
            aliases[n] = first_of[id(t)]
        else:
            first_of[id(t)] = n
    params = {n: p.detach().clone().requires_grad_(p.requires_grad) for n, p in params_named.items()
              if n not in aliases}
    buffers = {n: b.detach().clone() for n, b in buffers_named.items() if n not in aliases}
    # tied parameters: functional_call gets the same tensor under every name
    state = dict(params)
    state.update(buffers)
    for n, first in aliases.items():
        state[n] = state[first]

    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs)))
    rec = _Recorder()
    inputs: List[Value] = []
    statics: List[Any] = []
    flat_in = []
    for i, x in enumerate(flat):
        if isinstance(x, torch.Tensor):
            t = x.detach().clone()
            inputs.append(rec.new_value(t, "input", name=f"input{len(inputs)}"))
            flat_in.append(t)
            statics.append(None)
        else:
            flat_in.append(x)
            statics.append(x)
    param_values = {n: rec.new_value(t, "param", name=n) for n, t in params.items()}
    buffer_values = {n: rec.new_value(t, "buffer", name=n) for n, t in buffers.items()}

    def fn(state_dict, flat_args):
        a, k = pytree.tree_unflatten(flat_args, spec)
        return torch.func.functional_call(model, state_dict, a, k, tie_weights=False, strict=False)

    was_training = model.training
    model.train(training)
    if strategy is not None:
        strategy._stages_manager.on_stage = rec.on_stage
        strategy.onStartTracing()
    _active = rec
    try:
        with torch.enable_grad(), _module_hooks(model, rec, namescopes), _LossMarker(), rec:
            out = torch.func.functionalize(fn, remove="mutations")(state, flat_in)
    finally:
        _active = None
        model.train(was_training)
        if strategy is not None:
            strategy.onEndTracing()
            strategy._stages_manager.on_stage = None
    out_flat, out_spec = pytree.tree_flatten(out)
    outputs = []
    for o in out_flat:
        if isinstance(o, torch.Tensor):
            outputs.append(rec.value_of(torch._from_functional_tensor(o) if torch._is_functional_tensor(o) else o))
        else:
            outputs.append(o)
    updates: Dict[str, Value] = {}
    for n, t in list(params.items()) + list(buffers.items()):
        final = rec.values[id(t)]
        orig = param_values.get(n) or buffer_values[n]
        if final is not orig:
            updates[n] = final
    losses = [n for n in rec.nodes if n.op_name == "poptorch::identity_loss.default"]
    captured = Captured(rec.nodes, inputs, spec, statics, param_values, buffer_values,
                        [n for n, p in params.items() if p.requires_grad], outputs, out_spec, updates, losses,
                        aliases, stages=dict(rec.stages))
    captured.num_ipus = 1 + max([n.ipu for n in rec.nodes] + [0])
    return captured


# -- after the capture ------------------------------------------------------------------------------------------------

def final_loss(c: Captured) -> Value:
    """PopTorch's rule: every loss (identity_loss or a torch.nn loss) that flows into another loss
    is an intermediate; exactly one independent loss must remain."""
    if not c.losses:
        raise Error("Couldn't find a loss in graph! A training model must compute its loss in forward() with a "
                    "torch.nn loss (for example torch.nn.functional.cross_entropy) or poptorch.identity_loss(loss, "
                    "reduction=...), and return it (alone, or as in `return output, loss`)")
    consumers = c.consumers()
    loss_nodes = {id(n) for n in c.losses}

    def feeds_loss(node, seen) -> bool:
        for v in node.outputs:
            if v is None:
                continue
            for user in consumers.get(v.id, []):
                if id(user) in seen:
                    continue
                seen.add(id(user))
                if id(user) in loss_nodes or feeds_loss(user, seen):
                    return True
        return False

    independent = [n for n in c.losses if not feeds_loss(n, set())]
    if len(independent) != 1:
        raise Error("Multiple independent losses found in graph. Graph must have one final loss. Wrap final graph "
                    "loss in poptorch.identity_loss.")
    return independent[0].outputs[0]


def prune(c: Captured, keep: List[Value]) -> None:
    """Drop nodes whose results nothing needs (what `keep` needs, side effects, state updates)."""
    live = {v.id for v in keep if isinstance(v, Value)}
    out = []
    for n in reversed(c.nodes):
        needed = n.op_name.split(".")[0] in SIDE_EFFECT_OPS or any(v is not None and v.id in live for v in n.outputs)
        if needed:
            out.append(n)
            live.update(v.id for v in n.inputs())
    c.nodes = out[::-1]
