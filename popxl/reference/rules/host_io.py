"""Host streams and streaming memory, through the Interpreter's replica state (`ctx.machine`)."""
import numpy as np

from ..interpreter import ReferenceError
from ..registry import reference_rule


def _machine(ctx, op):
    if ctx.machine is None:
        raise ReferenceError(f"{op}: host transfers and remote buffers need a whole-Ir run "
                             "(popxl.reference.Interpreter(ir).run(inputs)), not a graph evaluation")
    return ctx.machine


@reference_rule("host_load")
def host_load(ctx, op, ins):
    return [_machine(ctx, op).host_load(op.attrs["stream"])]


@reference_rule("host_store")
def host_store(ctx, op, ins):
    _machine(ctx, op).host_store(op.attrs["stream"], ins[0])
    return []


def _entry(op, rb, offset) -> int:
    k = int(np.asarray(offset).reshape(-1)[0])
    if not 0 <= k < rb.entries:
        raise ReferenceError(f"{op}: entry {k} of a remote buffer with {rb.entries} entries")
    return k


@reference_rule("remote_load")
def remote_load(ctx, op, ins):
    rb = op.attrs["remote_buffer"]
    entries = _machine(ctx, op).remote_buffer(rb)
    k = _entry(op, rb, ins[1])
    value = entries.get(k)
    if value is None:  # never written: what fresh streaming memory holds
        return [np.zeros(op.outputs[0].shape, ctx.out_dtype())]
    return [np.array(value).reshape(op.outputs[0].shape)]


@reference_rule("remote_store")
def remote_store(ctx, op, ins):
    rb = op.attrs["remote_buffer"]
    entries = _machine(ctx, op).remote_buffer(rb)
    entries[_entry(op, rb, ins[1])] = np.array(ins[0], copy=True)
    return []


@reference_rule("remote_code_load")
def remote_code_load(ctx, op, ins):
    return []  # moves vertex code only: no values change
