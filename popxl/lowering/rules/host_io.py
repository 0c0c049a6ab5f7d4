"""Host transfers: host_load / host_store become stream copies between host and tiles."""
from __future__ import annotations

import ipu

from ..registry import lowering_rule
from .remote import emit_transfer


def _stream(ctx, popxl_stream, to_device: bool):
    table = ctx.h2d if to_device else ctx.d2h
    s = table.get(popxl_stream)
    if s is None:
        et = ctx.etype(popxl_stream)
        add = ctx.g.add_host_to_device_stream if to_device else ctx.g.add_device_to_host_stream
        s = add(popxl_stream.tensor_id, popxl_stream.shape, et)
        table[popxl_stream] = s
    return s


@lowering_rule("host_load")
def host_load(ctx, op):
    stream = _stream(ctx, op.attrs["stream"], True)
    out = ctx.new_output(op, 0)
    emit_transfer(ctx, op, ipu.HostToDevice(stream, out, name=ctx.name()))  # merge_exchange groups merge


@lowering_rule("host_store")
def host_store(ctx, op):
    stream = _stream(ctx, op.attrs["stream"], False)
    emit_transfer(ctx, op, ipu.DeviceToHost(ctx.value(op.inputs[0]), stream, name=ctx.name()))
