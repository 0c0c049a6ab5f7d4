"""Custom ops written in Python: the counterpart of PopART / PopXL custom ops (C++ Op + Opx).

A custom op is a subclass of :class:`CustomOp` registered with :func:`register_custom_op`. It says:

- what it records in the IR: its op type, attributes, and ``infer`` (output shapes and dtypes from
  the inputs, with clear errors for bad input: PopART's ``Op::setup``);
- how it runs on the tiles, either
  * ``lower(lc, op)``: vertices of codelets (your own, registered with ``@ipu.register``: a Numba
    kernel, a NumPy reference, a cost model with its source, code size) placed on the tiles with
    the helpers of :class:`CustomLowering` (PopART's ``Opx::grow``), or
  * ``expand(*inputs, **attrs)``: the op as popxl ops (collectives included); each use lowers
    those ops inline, under the custom op's name;
- its gradient: ``grad(ctx, op, grads)`` built with popxl ops (other custom ops included), as the
  built-in gradient rules are (``gradient = "none"`` for an op no gradient flows through);
- its NumPy reference: ``reference(*arrays, **attrs)`` (or, for an op that talks to other replicas,
  ``reference(ctx, op, arrays)``); an op with ``expand`` gets it from its expansion.

Registration puts the op type in the one op table (``popxl.op_table``) and its rules in the
lowering, gradient and reference registries, like a built-in op. Record it with
``MyOp.create(*inputs, **attrs)``. See docs/custom-ops.md and examples/custom_op.py.
"""
from __future__ import annotations

import inspect
import os
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np

from popxl import dtypes
from popxl.tensor import Tensor, TensorSpec

__all__ = ["CustomOp", "CustomLowering", "InputSpec", "register_custom_op", "custom_op_types", "EXPANSION_ATTR"]

EXPANSION_ATTR = "expansion"
_CUSTOM: Dict[str, "CustomOp"] = {}


class CustomOp:
    """Base class of a custom op. Set the class attributes and override the methods you need."""

    #: the IR op type (an identifier, unique in the op table)
    op_type: str = ""
    #: the op's type name as PopART reports it (`_ir.Op.opType()`, the profile); default: CamelCase
    pb_type: str = ""
    #: the attributes it records (keyword arguments of `create`)
    attrs: Tuple[str, ...] = ()
    #: "rule" (grad() is given), "none" (no gradient flows through it) or "missing"
    gradient: str = "rule"
    #: names of the inputs, for error messages
    input_names: Tuple[str, ...] = ()
    #: the op reads and writes tensors on several IPUs itself (no copy of its inputs to op.ipu)
    spans_ipus: bool = False
    doc: str = ""

    # -- the IR definition ----------------------------------------------------------------------
    def infer(self, inputs: Sequence[TensorSpec], *args: Any, **attrs: Any) -> Sequence:
        """Output specs: TensorSpec or (shape, dtype[, meta_shape]) per output. Raise ValueError /
        TypeError with what is wrong and how to fix it. (Called as ``infer(inputs, **attrs)``; a
        subclass names its attributes as parameters.)"""
        raise NotImplementedError(f"{type(self).__name__}.infer")

    def modified(self, **attrs) -> Tuple[int, ...]:
        """Indices of the inputs the op changes in place."""
        return ()

    def aliases(self, **attrs) -> Dict[int, int]:
        """Output index -> input index whose storage the output shares."""
        return {}

    def identity_of(self, **attrs) -> Optional[int]:
        """The input the op passes through unchanged when it can be replaced by an identity
        (PopART's OpToIdentity pattern), else None."""
        return None

    # -- running it -------------------------------------------------------------------------------
    # methods a subclass may define (None: it has none); each subclass names its own parameters
    lower: Optional[Callable[..., None]] = None  # lower(self, lc: CustomLowering, op)
    expand: Optional[Callable[..., Any]] = None  # expand(self, *inputs: Tensor, **attrs) -> Tensor | tuple
    grad: Optional[Callable[..., Any]] = None  # grad(self, ctx, op, grads) -> one gradient (or None) per input
    # reference(self, *arrays, **attrs) -> array(s); or (self, ctx, op, arrays)
    reference: Optional[Callable[..., Any]] = None
    reference_needs_context = False

    # -- recording --------------------------------------------------------------------------------
    @classmethod
    def create(cls, *inputs: Tensor, name: Optional[str] = None, **attrs) -> Tuple[Tensor, ...]:
        """Record the op in the current graph; returns its output tensors."""
        inst = _CUSTOM.get(cls.op_type)
        if inst is None or type(inst).__qualname__ != cls.__qualname__:  # the registered one of this type
            raise RuntimeError(f"custom op {cls.__qualname__} ({cls.op_type!r}) is not registered: "
                               "call popxl.custom_op.register_custom_op on it first")
        return inst.record(inputs, attrs, name=name).outputs

    def record(self, inputs: Sequence[Tensor], attrs: Dict[str, Any], name: Optional[str] = None,
               out_ids: Optional[Sequence[str]] = None, notify: bool = True):
        """Record the op in the current graph and return the popxl Op."""
        from popxl.ops._op_builder import create_op
        inputs = list(inputs)
        names = self.input_names or tuple(f"input {i}" for i in range(len(inputs)))
        for i, t in enumerate(inputs):
            if not isinstance(t, Tensor):
                raise TypeError(f"{self.op_type}: {names[i] if i < len(names) else f'input {i}'} must be a popxl "
                                f"Tensor, got {type(t).__name__}: {t!r}")
        unknown = [k for k in attrs if k not in self.attrs]
        if unknown:
            raise TypeError(f"{self.op_type}: unknown attribute(s) {unknown}; it takes {list(self.attrs)}")
        specs = [InputSpec(t.shape, t.dtype, t.meta_shape) for t in inputs]
        outs = [_spec(o) for o in self.infer(specs, **attrs)]
        record_attrs = dict(attrs)
        if self.expand is not None and self.lower is None:
            record_attrs[EXPANSION_ATTR] = _expansion(self, specs, attrs, name or self.op_type)
        op = create_op(self.op_type, inputs, [(s.shape, s.dtype) for s in outs], record_attrs,
                       out_names=[f"{self.op_type}_out{i}" if len(outs) > 1 else f"{self.op_type}_out"
                                  for i in range(len(outs))],
                       out_ids=out_ids, name=name or self.op_type, modified=self.modified(**attrs),
                       aliases=self.aliases(**attrs), input_names=names[:len(inputs)],
                       out_meta_shapes=[s.meta_shape for s in outs], check_placement=not self.spans_ipus,
                       notify=notify)
        op.attrs["_custom_op_type"] = self.pb_type or _camel(self.op_type)
        return op

    def __repr__(self) -> str:
        return f"<custom op {self.op_type}>"


class InputSpec(TensorSpec):
    """What `infer` gets for each input: shape, dtype, meta_shape, and rank / nelms."""

    @property
    def rank(self) -> int:
        return len(self.shape)

    @property
    def nelms(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _spec(o) -> TensorSpec:
    if isinstance(o, TensorSpec):
        return o
    if isinstance(o, Tensor):
        return TensorSpec(o.shape, o.dtype, o.meta_shape)
    shape, dt, *meta = o
    return TensorSpec(tuple(int(s) for s in shape), dtypes.dtype.as_dtype(dt), tuple(meta[0]) if meta else ())


def _freeze(v):
    if isinstance(v, (list, tuple)):
        return tuple(_freeze(x) for x in v)
    if isinstance(v, dict):
        return tuple(sorted((k, _freeze(x)) for k, x in v.items()))
    try:
        hash(v)
        return v
    except TypeError:
        return repr(v)


def _expansion(op_def: CustomOp, specs, attrs, name: str):
    """The graph of popxl ops a custom op with `expand` stands for (one per op type, input specs
    and attributes in an Ir; shared by every use)."""
    from popxl.context import get_current_context
    ir = get_current_context().ir
    cache = ir._expansion_cache()
    key = (op_def.op_type, tuple((s.shape, s.dtype.name, s.meta_shape) for s in specs), _freeze(attrs))
    g = cache.get(key)
    if g is None:
        def fn(*xs):
            if op_def.expand is None:
                raise TypeError(f"custom op {op_def.op_type!r} has no expand()")
            out = op_def.expand(*xs, **attrs)
            return out

        fn.__qualname__ = f"{op_def.op_type}__expansion"
        with get_current_context()._quiet():
            g = ir.create_graph(fn, *specs)
        declared = set(op_def.modified(**attrs))
        for inner in g.ops:
            for i in inner.modified:
                t = inner.inputs[i]
                if t in g.inputs and g.inputs.index(t) not in declared:
                    raise ValueError(
                        f"custom op {op_def.op_type!r}: its expansion changes input {g.inputs.index(t)} in place "
                        f"({inner.type} '{inner.name}'), which the op does not declare; return "
                        f"that input's index from {type(op_def).__name__}.modified(), or use the out-of-place op")
        cache[key] = g
    return g


class CustomLowering:
    """What a custom op's ``lower`` uses to place its work on the tiles (the lowering context of
    one op, with the names and placement of built-in rules)."""

    def __init__(self, ctx, op):
        self._ctx = ctx
        self.op = op

    @property
    def graph(self):
        """The ipu.Graph being built (variables, compute sets, vertices)."""
        return self._ctx.g

    @property
    def target(self):
        return self._ctx.target

    def input(self, i: int):
        """Input i as an ipu.Tensor (a view of its tile memory)."""
        return self._ctx.value(self.op.inputs[i])

    def element_type(self, i: int = 0, output: bool = True):
        return self._ctx.etype((self.op.outputs if output else self.op.inputs)[i])

    def new_output(self, i: int = 0, like=None):
        """A new variable for output i, laid out like `like` (an ipu.Tensor) or by the mapping policy."""
        return self._ctx.new_output(self.op, i, like=like)

    def bind(self, i: int, value) -> None:
        """Output i is `value` (an ipu.Tensor)."""
        self._ctx.bind(self.op.outputs[i], value)

    def elementwise(self, codelet: str, inputs, fields, out: int = 0, fp=None, ip=None, out_field: str = "out",
                    suffix: str = ""):
        """Run `codelet` element by element into output `out`: one vertex per piece of the output on
        each tile (split over the worker contexts), inputs brought into the output's layout."""
        from popxl.lowering import blocks
        t = self.op.outputs[out]
        v = blocks.elementwise(self._ctx, codelet, list(inputs), list(fields), tuple(t.shape), self._ctx.etype(t),
                               fp=fp, ip=ip, out_field=out_field, suffix=suffix or codelet)
        self._ctx.bind(t, v)
        return v

    def compute_set(self, suffix: str = ""):
        return self._ctx.compute_set(suffix)

    def emit(self, program) -> None:
        self._ctx.emit(program)

    def copy(self, src, dst, suffix: str = "copy") -> None:
        self._ctx.copy(src, dst, suffix)

    def new_var(self, shape, element_type, suffix: str, like=None):
        return self._ctx.new_var(shape, element_type, self._ctx.name(suffix), like=like)

    def pieces(self, var, split_for_workers: bool = True):
        """(tiles, starts, counts) of `var`'s runs of elements on tiles (split per worker)."""
        return self._ctx.pieces(var, split_for_workers=split_for_workers)

    def name(self, suffix: str = "") -> str:
        return self._ctx.name(suffix)


# -- the rules every custom op gets ------------------------------------------------------------------
def _lowering(op_def: CustomOp):
    def rule(ctx, op):
        if op_def.lower is not None:
            op_def.lower(CustomLowering(ctx, op), op)
            return
        _lower_expansion(ctx, op)

    rule.__name__ = f"lower_{op_def.op_type}"
    return rule


def _lower_expansion(ctx, op) -> None:
    """Lower the ops of the expansion inline: its inputs are the op's inputs, its outputs the op's."""
    from popxl.lowering.registry import get_rule
    graph = op.attrs[EXPANSION_ATTR]
    saved = {t: ctx.values[t] for t in graph.inputs if t in ctx.values}
    for gi, t in zip(graph.inputs, op.inputs):
        ctx.values[gi] = ctx.value(t)
    for c in graph.constants:
        if c not in ctx.values:
            ctx.values[c] = ctx.constants[c] = ctx._persistent(c, __import__("ipu").CONSTANT)
    outer = ctx.op
    try:
        for inner in sorted(graph.ops, key=lambda o: o.id):
            ctx.op = inner
            inner_name, inner.name = inner.name, f"{op.name}/{inner.name.split('/')[-1]}"
            try:
                mark = ctx.placement.begin(inner, ctx)
                get_rule(inner.type)(ctx, inner)
                ctx.placement.end(mark, inner)
            finally:
                inner.name = inner_name
    finally:
        ctx.op = outer
    ins = {id(t) for t in graph.inputs}
    for go, t in zip(graph.outputs, op.outputs):
        v = ctx.value(go)
        if id(go) in ins:  # an output that is an input: a copy, so the op's output is its own
            nv = ctx.new_output(op, list(op.outputs).index(t), like=v if v.is_identity else None)
            ctx.copy(v, nv, "identity")
            continue
        ctx.bind(t, v)
    for t, v in saved.items():
        ctx.values[t] = v


def _reference(op_def: CustomOp):
    def rule(ctx, op, ins):
        if op_def.reference is not None:
            attrs = {k: v for k, v in op.attrs.items() if k in op_def.attrs}
            out = op_def.reference(ctx, op, ins) if op_def.reference_needs_context else op_def.reference(*ins, **attrs)
            return list(out) if isinstance(out, (list, tuple)) else [out]
        graph = op.attrs[EXPANSION_ATTR]
        return ctx.run_graph(graph, [np.array(x, copy=True) for x in ins])

    rule.__name__ = f"reference_{op_def.op_type}"
    return rule


def _grad(op_def: CustomOp):
    def rule(ctx, op, grads):
        if op_def.grad is None:  # register_custom_op refuses gradient='rule' without grad()
            raise TypeError(f"custom op {op_def.op_type!r} has no grad()")
        return op_def.grad(ctx, op, grads)

    rule.__name__ = f"grad_{op_def.op_type}"
    return rule


def register_custom_op(op_def):
    """Register a custom op (a CustomOp subclass or instance): its op table entry and its lowering,
    gradient and reference rules. Returns the class (so it can decorate). Registering the same
    class again (a reloaded module) replaces it; another op of a registered type is refused."""
    from popxl.lowering.placement import SPANS_IPUS
    from popxl.lowering.registry import LOWERING_RULES, lowering_rule
    from popxl.op_table import OP_TYPES, OpType, register_op_type
    from popxl.reference.registry import REFERENCE_RULES, reference_rule
    from popxl.transforms.grad_rules import GRAD_RULES, NON_DIFFERENTIABLE, grad_rule, non_differentiable

    inst = op_def() if isinstance(op_def, type) else op_def
    name = inst.op_type
    if not name or not name.isidentifier():
        raise ValueError(f"{type(inst).__name__}.op_type must be an identifier, not {name!r}")
    if inst.lower is None and inst.expand is None:
        raise TypeError(f"custom op {name!r} needs `lower` (vertices of codelets) or `expand` (popxl ops)")
    if inst.gradient == "rule" and inst.grad is None:
        raise TypeError(f"custom op {name!r} says gradient='rule' but has no grad(); set gradient='none' "
                        "(no gradient flows through it) or 'missing'")
    if inst.expand is None and inst.reference is None:
        raise TypeError(f"custom op {name!r} needs a NumPy `reference` (ops that `expand` get theirs from the "
                        "expansion)")
    have = _CUSTOM.get(name)
    if have is not None:
        same = type(have).__qualname__ == type(inst).__qualname__ and (
            type(have).__module__ == type(inst).__module__ or _source(type(have)) == _source(type(inst)) is not None)
        if not same:
            raise ValueError(f"op type {name!r} is already the custom op {type(have).__qualname__}; "
                             "choose another op_type")
        for reg in (LOWERING_RULES, GRAD_RULES, REFERENCE_RULES):
            reg.pop(name, None)
        NON_DIFFERENTIABLE.discard(name)
        OP_TYPES.pop(name, None)
    elif name in OP_TYPES:
        raise ValueError(f"op type {name!r} is a built-in op type; choose another op_type for the custom op")
    attrs = set(inst.attrs) | {EXPANSION_ATTR, "_custom_op_type"}
    register_op_type(OpType(name, "custom", frozenset(attrs), gradient=inst.gradient,
                            doc=inst.doc or (inspect.getdoc(type(inst)) or "").split("\n")[0]))
    lowering_rule(name)(_lowering(inst))
    reference_rule(name)(_reference(inst))
    if inst.gradient == "rule":
        grad_rule(name)(_grad(inst))
    elif inst.gradient == "none":
        non_differentiable(name)
    if inst.spans_ipus:
        SPANS_IPUS.add(name)
    _CUSTOM[name] = inst
    return op_def


def _source(cls):
    try:
        path = inspect.getsourcefile(cls)
    except (TypeError, OSError):
        return None
    return os.path.realpath(path) if path is not None else None


def custom_op(op_type: str) -> CustomOp:
    """The registered custom op of an op type."""
    try:
        return _CUSTOM[op_type]
    except KeyError:
        raise KeyError(f"no custom op {op_type!r} is registered (registered: {sorted(_CUSTOM)})") from None


def custom_op_types() -> Tuple[str, ...]:
    return tuple(_CUSTOM)
