"""Gradients of the value-preserving ops (popxl/ops/misc.py, host_io.py): cast, identity,
print_tensor, io_tile_copy. detach stops gradients."""
import popxl.ops as ops

from ._registry import grad_rule, non_differentiable

non_differentiable("detach", "init", "host_load", "host_store", "histogram", "remote_load", "remote_store",
                   "remote_code_load",
                   # variable updates change optimiser state; no gradient flows through them
                   "accumulate", "accumulator_scale", "sparse_accumulate", "adam_updater", "adam_var_update",
                   "copy_var_update")


@grad_rule("identity", "io_tile_copy")
def _identity(ctx, op, grads):
    return [grads[0]]


@grad_rule("cast")
def _cast(ctx, op, grads):
    x = op.inputs[0]
    return [ops.cast(grads[0], x.dtype)]


@grad_rule("print_tensor")
def _print_tensor(ctx, op, grads):
    """Passes the gradient through; prints it too when the op asked for ``print_gradient``."""
    g = grads[0]
    if op.attrs.get("print_gradient"):
        attrs = dict(op.attrs)
        title = attrs.pop("title")
        attrs.pop("print_self", None)
        attrs.pop("print_gradient", None)
        g = ops.print_tensor(g, title=f"{title}_gradient", **attrs)
    return [g]
