"""Gradients of the collectives (popxl/ops/collectives) and of copies between IPUs.

- replicated_all_reduce (add / mean): the gradient is the same all-reduce of the gradients (the
  transpose of summing over the group is summing over the group).
- replicated_all_gather: each replica takes its own slice of the gradient (a replicated slice,
  no sum over the group), in every output_shape mode, as PopXL's gradient does; a data-parallel
  RTS model reduce-scatters its weight gradients itself.
- replicated_reduce_scatter: an all-gather of the gradients (times 1 / n for mean); the local
  forms (replica_sharded_slice, replicated_slice) have an all-gather as gradient, as PopXL's.
- all_reduce across IPUs: an all-reduce of the gradients; with identical inputs the op is an
  identity and the gradient the all-reduce; with identical gradient inputs the reverse.
- ipu_copy: a copy of the gradient back to the source IPU.
"""
import popxl.ops as ops
from popxl.context import ipu as _on_ipu
from popxl.ops._op_builder import single
from popxl.ops.collectives.all_reduce import _all_reduce
from popxl.ops.collectives.replicated_reduce_scatter import _reduce_scatter

from ._registry import grad_rule, non_differentiable
from ._util import zeros

non_differentiable("rts_shard")


@grad_rule("replicated_all_reduce")
def _replicated_all_reduce(ctx, op, grads):
    red = op.attrs["op"]
    if red not in ("add", "mean"):
        raise NotImplementedError(f"autodiff: replicated_all_reduce with op {red!r} has no gradient rule "
                                  "(only 'add' and 'mean').")
    g = grads[0]
    return [single("replicated_all_reduce", [g], g.shape, g.dtype, {"op": red, "group": op.attrs["group"]},
                   out_names=["replicated_all_reduce_grad"])]


def _gather(g, group, n):
    flat = g.flatten() if g.rank != 1 else g
    return single("replicated_all_gather", [flat], (n * flat.nelms,), g.dtype,
                  {"group": group, "output_shape": "concat"}, out_names=["all_gather_grad"])


@grad_rule("replicated_all_gather")
def _replicated_all_gather(ctx, op, grads):
    g = grads[0]
    x = op.inputs[0]
    group = op.attrs["group"]
    rts = op.attrs.get("output_shape") == "meta_shape"
    out = _reduce_scatter(g, "local", group, rts, "_grad", "replicated_all_gather grad")
    if out.nelms != x.nelms:
        raise NotImplementedError(f"autodiff: the gradient of {op.name} does not split into shards of {x.nelms} "
                                  "elements; gather with the grouping the shards were made with.")
    return [out.reshape(x.shape)]


@grad_rule("replicated_reduce_scatter")
def _replicated_reduce_scatter(ctx, op, grads):
    red = op.attrs["op"]
    if red not in ("add", "mean", "local"):
        raise NotImplementedError(f"autodiff: replicated_reduce_scatter with op {red!r} has no gradient rule.")
    x = op.inputs[0]
    group = op.attrs["group"]
    n = group.group_size
    full = _gather(grads[0], group, n)
    if n * grads[0].nelms != x.nelms:
        full = full[:x.nelms]
    if red == "mean":
        full = full * (1.0 / n)
    return [full.reshape(x.shape)]


@grad_rule("all_reduce")
def _all_reduce_grad(ctx, op, grads):
    ipus = list(op.attrs["ipus"])
    if op.attrs.get("identical_grad_inputs"):
        return list(grads)
    red = op.attrs["op"]
    if red not in ("add", "mean"):
        raise NotImplementedError(f"autodiff: all_reduce with op {red!r} has no gradient rule (only 'add').")
    gs = []
    for g, t, i in zip(grads, op.outputs, ipus):
        if g is None:
            with _on_ipu(i):
                g = zeros(t.shape, t.dtype)
        gs.append(g)
    return _all_reduce(gs, ipus, red)


@grad_rule("ipu_copy")
def _ipu_copy(ctx, op, grads):
    return [ops.ipu_copy(grads[0], int(op.attrs["source"]), int(op.attrs["destination"]))]
