"""cast (the Cast codelet's conversion rules), copies, init, print_tensor and histogram."""
import numpy as np

from codelets.cast import cast_reference
from codelets.histogram import Histogram

from ..registry import reference_rule


@reference_rule("cast")
def cast(ctx, op, ins):
    x, out = ins[0], ctx.out_dtype()
    if x.dtype.kind == "f" and out.kind == "f":
        return [x.astype(out)]
    return [cast_reference(x, out)]


@reference_rule("identity", "detach", "io_tile_copy", "ipu_copy", "print_tensor")
def copy(ctx, op, ins):
    # print_tensor prints on the device (a stream callback); the reference only passes the value on
    return [ins[0]]


@reference_rule("init")
def init(ctx, op, ins):
    # "undef" has no defined contents; zeros are one valid choice (what fresh tile memory holds)
    return [np.zeros(op.outputs[0].shape, ctx.out_dtype())]


@reference_rule("histogram")
def histogram(ctx, op, ins):
    x = ins[0].astype(np.float32) if ins[0].dtype == np.float16 else ins[0]
    levels = np.asarray(op.attrs["levels"], np.float64).astype(x.dtype)
    return [Histogram().reference(x, levels, bool(op.attrs["absolute_of_input"]))]
