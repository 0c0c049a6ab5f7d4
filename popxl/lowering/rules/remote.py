"""Streaming memory and code loading: remote_load(_), remote_store, remote_code_load, remote
variables, and the merging of transfers marked by transforms.merge_exchange.

Every popxl RemoteBuffer becomes an ipu.RemoteBuffer (streaming memory, ipu/remote.py). A remote
variable gets no tile memory: its value is an entry of its buffer, which the Session writes and
reads. An int offset (popxl makes it a uint32 constant) is fixed at compile time; any other offset
tensor is read when the program runs.

Transfers that merge_exchange / io_tile_exchange marked with the same group, and that follow each
other with nothing between them in the program, become one ipu.MultiExchange: one sync and one
transfer phase (PopART's MultiExchangeOp). A transfer that reads what an earlier one of the group
wrote starts a new phase. Consecutive remote_code_load ops become one ipu.CodeLoad (PopXL: code
loads with nothing between them are merged into one exchange).
"""
from __future__ import annotations

import weakref

import numpy as np

import ipu
from popxl.tensor import Constant

from ..registry import lowering_rule


def ipu_buffer(ctx, rb) -> ipu.RemoteBuffer:
    """The ipu.RemoteBuffer of a popxl RemoteBuffer (created on first use)."""
    b = ctx.remote_buffers.get(rb)
    if b is None:
        name = rb.tensor_dtype.name
        if name in ("float64", "int64", "uint64"):
            raise TypeError(f"RemoteBuffer[id={rb.remote_buffer_id}] holds {name}: the IPU has no 64-bit types")
        b = ctx.g.add_remote_buffer(f"remote_buffer_{rb.remote_buffer_id}", rb.tensor_shape, ipu.element_type(name),
                                    rb.entries)
        ctx.remote_buffers[rb] = b
    return b


def remote_variable(ctx, v) -> None:
    """Register a remote variable: its buffer and entry (no tile memory)."""
    if v.consumers:
        users = ", ".join(f"{op.type} '{op.name}'" for op in v.consumers[:3])
        raise ValueError(
            f"Remote variable {v.id} lives in streaming memory, so ops can't read it directly (used by {users}). "
            f"Load it with ops.remote_load(buffer, {v._remote_offset}) and use the loaded tensor.")
    rb = ipu_buffer(ctx, v._remote_buffer)
    ctx.remote_variables[v] = (rb, int(v._remote_offset))


def _offset(ctx, op, rb: ipu.RemoteBuffer):
    off = op.inputs[1]
    if isinstance(off, Constant):
        value = int(np.asarray(off._data).reshape(-1)[0])
        if not 0 <= value < rb.entries:
            raise ValueError(f"{op.type} '{op.name}': offset {value} is outside RemoteBuffer"
                             f"[id={op.attrs['remote_buffer'].remote_buffer_id}] of {rb.entries} entries")
        return value
    return ctx.value(off)


def _reads(p) -> set:
    out = set()
    if isinstance(p, (ipu.RemoteStore, ipu.DeviceToHost)):
        out.add(p.src.variable.id)
    if isinstance(p, (ipu.RemoteLoad, ipu.RemoteStore)) and isinstance(p.offset, ipu.Tensor):
        out.add(p.offset.variable.id)
    return out


def _writes(p) -> set:
    if isinstance(p, (ipu.RemoteLoad, ipu.HostToDevice)):
        return {p.dst.variable.id}
    return set()


# the merge_exchange group of each MultiExchange the lowering built (ipu's program nodes know
# nothing of popxl's groups)
_MERGE_GROUP: weakref.WeakKeyDictionary[ipu.MultiExchange, object] = weakref.WeakKeyDictionary()


def emit_transfer(ctx, op, node) -> None:
    """Emit a host / remote transfer; transfers of one merge_exchange group that follow each other
    share one ipu.MultiExchange."""
    group = op.attrs.get("merge_exchange")
    if group is None:
        ctx.emit(node)
        return
    seq = ctx._seqs[-1]
    last = seq.programs[-1] if seq.programs else None
    if isinstance(last, ipu.MultiExchange) and _MERGE_GROUP.get(last) == group:
        written = set().union(*(_writes(q) for q in last.programs))
        if not (_reads(node) & written):
            last.add(node)
            if node.name and hasattr(ctx, "op_names"):
                ctx.op_names[node.name] = op.name
            return
    m = ipu.MultiExchange(node)
    _MERGE_GROUP[m] = group
    ctx.emit(m)
    if node.name and hasattr(ctx, "op_names"):
        ctx.op_names[node.name] = op.name


@lowering_rule("remote_load")
def remote_load(ctx, op):
    """remote_load: into a new tensor; remote_load_ (aliases {0: 0}): into the input itself."""
    rb = ipu_buffer(ctx, op.attrs["remote_buffer"])
    off = _offset(ctx, op, rb)
    if op.aliases:
        dst = ctx.value(op.inputs[0])
        ctx.bind(op.outputs[0], dst)
    else:
        dst = ctx.new_output(op, 0)
    emit_transfer(ctx, op, ipu.RemoteLoad(rb, off, dst, name=ctx.name()))


@lowering_rule("remote_store")
def remote_store(ctx, op):
    rb = ipu_buffer(ctx, op.attrs["remote_buffer"])
    off = _offset(ctx, op, rb)
    emit_transfer(ctx, op, ipu.RemoteStore(ctx.value(op.inputs[0]), rb, off, name=ctx.name()))


@lowering_rule("remote_code_load")
def remote_code_load(ctx, op):
    """The called graph's ipu.Function keeps its code in streaming memory; a CodeLoad brings it in.
    A load right after another load joins it (one sync, one transfer)."""
    graph = op.attrs["graph"]
    fn = ctx.lowered(graph).function
    fn.code_in_streaming_memory = True
    seq = ctx._seqs[-1]
    last = seq.programs[-1] if seq.programs else None
    if isinstance(last, ipu.CodeLoad):
        if not any(f is fn for f in last.functions):
            last.functions.append(fn)
        return
    ctx.emit(ipu.CodeLoad(fn, name=ctx.name(graph.id)))  # "<op name>/<graph>": the profile finds the op
