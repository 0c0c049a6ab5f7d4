"""Collectives, replica sharding and copies between IPUs.

Between replicas (replicated_all_reduce / all_gather / reduce_scatter, RTS slicing) each op is one
`ipu.CrossReplica` node: the machine runs the ring algorithm's steps (syncs, IPU-Link exchanges,
reductions) over the replicas' memories, with the costs of ipu/collectives.py. The groups come
from the op's ReplicaGrouping (members in replica order = ring order).

Between the IPUs of one replica (ipu_copy, all_reduce across IPUs) the data moves with ordinary
Copy programs whose source and destination tiles are on different IPUs: the exchange cost model
prices the IPU-Links and the inter-IPU sync (ipu/costs.py). These rules place what they create
on the right IPU themselves (lowering/placement.py).
"""
from __future__ import annotations

import numpy as np

import ipu

from .. import blocks
from ..registry import lowering_rule


def _groups(op) -> tuple:
    return tuple(ipu.groups_from_assignment(op.attrs["group"].assignment))


def _whole(ctx, x: ipu.Tensor, suffix: str) -> ipu.Variable:
    """`x` as a whole variable of its own layout (a copy when it is a view)."""
    if x.is_identity:
        return x.variable
    v = ctx.new_var(x.shape, x.dtype, ctx.name(suffix), like=x if x.is_identity else None)
    ctx.copy(x, v, suffix)
    return v


@lowering_rule("replicated_all_reduce")
def replicated_all_reduce(ctx, op):
    x = ctx.value(op.inputs[0])
    if op.modified:  # replicated_all_reduce_: the result goes back into the input's storage
        if x.is_identity:
            ctx.emit(ipu.CrossReplica("all_reduce", x, x, _groups(op), op.attrs["op"], name=ctx.name()))
            ctx.bind(op.outputs[0], x)
            return
        tmp = _whole(ctx, x, "gather")
        ctx.emit(ipu.CrossReplica("all_reduce", tmp, tmp, _groups(op), op.attrs["op"], name=ctx.name()))
        ctx.copy(tmp, x, "copy_back")
        ctx.bind(op.outputs[0], x)
        return
    out = ctx.new_output(op, 0, like=x if x.is_identity else None)
    ctx.emit(ipu.CrossReplica("all_reduce", x, out, _groups(op), op.attrs["op"], name=ctx.name()))


@lowering_rule("replicated_all_gather")
def replicated_all_gather(ctx, op):
    x = ctx.value(op.inputs[0])
    n = op.attrs["group"].group_size
    t_out = op.outputs[0]
    m = x.numel
    full = ctx.new_var((n * m,), x.dtype, t_out.id)
    ctx.emit(ipu.CrossReplica("all_gather", x.flatten(), full, _groups(op), "local", name=ctx.name()))
    if op.attrs.get("output_shape") == "meta_shape":
        k = int(np.prod(t_out.shape, dtype=np.int64))
        ctx.bind(t_out, full[:k].reshape(tuple(t_out.shape)))  # drop the padding of the last shard
    else:
        ctx.bind(t_out, full.reshape(tuple(t_out.shape)))


@lowering_rule("replicated_reduce_scatter")
def replicated_reduce_scatter(ctx, op):
    x = ctx.value(op.inputs[0])
    out = ctx.new_output(op, 0)
    kind = "slice" if op.attrs["op"] == "local" else "reduce_scatter"
    ctx.emit(ipu.CrossReplica(kind, x.flatten(), out, _groups(op), op.attrs["op"], name=ctx.name()))


@lowering_rule("rts_shard")
def rts_shard(ctx, op):
    """The shard of a replica-sharded variable: an always-live variable of its own (written and read
    by the Session, which scatters and gathers the variable's value over the replicas)."""
    var = op.attrs["variable"]
    t = op.outputs[0]
    v = ctx.g.add_variable(var.id, t.shape, ctx.etype(t), ipu.VARIABLE, debug=var.id)
    ctx.tiles.map(ctx.g, v)
    ctx.variables[var] = v
    ctx.bind(t, v)


# -- between the IPUs of one replica ---------------------------------------------------------------


def _on_ipu(ctx, x: ipu.Tensor, i: int, name: str) -> ipu.Variable:
    """A new variable holding `x` on IPU i, laid out like x mirrored onto IPU i when x is a whole
    variable (each tile's piece goes to the same tile number of IPU i)."""
    tpi = ctx.g.target.tiles_per_ipu
    v = ctx.g.add_variable(name, x.shape, x.dtype, ipu.TEMPORARY, debug=ctx.name())
    if x.is_identity and (x.variable.tile_of >= 0).all():
        v.tile_of[:] = x.variable.tile_of % tpi + i * tpi
    else:
        ctx.tiles.map(ctx.g, v)
        ctx.placement.place(v, i)
    if x.numel:
        ctx.copy(x, v, f"to_ipu{i}")
    return v


@lowering_rule("ipu_copy")
def ipu_copy(ctx, op):
    x = ctx.value(op.inputs[0])
    v = _on_ipu(ctx, x, int(op.attrs["destination"]), op.outputs[0].id)
    ctx.bind(op.outputs[0], v)


_PAIRWISE = {"add": "add", "mean": "add", "square_add": "add", "mul": "mul", "min": "min", "max": "max",
             "and": "logical_and", "or": "logical_or"}


@lowering_rule("all_reduce")
def all_reduce(ctx, op):
    ipus = [int(i) for i in op.attrs["ipus"]]
    red = op.attrs["op"]
    xs = [ctx.value(t) for t in op.inputs]
    identical = op.attrs.get("identical_inputs", False)
    for i, (t_out, x, dst) in enumerate(zip(op.outputs, xs, ipus)):
        here = _on_ipu(ctx, x, dst, f"{t_out.id}/own") if not x.is_identity else x.variable
        if identical or red == "local":  # an identity per IPU (its gradient is the all-reduce)
            out = _on_ipu(ctx, here, dst, t_out.id)
            ctx.bind(t_out, out)
            continue
        acc = here
        if red == "square_add":
            acc = blocks.elementwise(ctx, "UnaryOp", [acc], ["in"], acc.shape, acc.dtype,
                                     ip={"op": _unary("square")}, suffix=f"square{i}")
        for j, y in enumerate(xs):
            if j == i:
                continue
            other = ctx.like(y, here, f"from_ipu{ipus[j]}")  # an IPU-Link copy into `here`'s layout
            if red == "square_add":
                other = blocks.elementwise(ctx, "UnaryOp", [other], ["in"], other.shape, other.dtype,
                                           ip={"op": _unary("square")}, suffix=f"square{i}_{j}")
            acc = blocks.binary(ctx, _PAIRWISE[red], acc, other, suffix=f"{red}{i}_{j}")
        if red == "mean":
            scale = ctx.g.add_constant(ctx.name(f"inv_n{i}"), np.array(1.0 / len(xs), dtype=acc.dtype.numpy),
                                       acc.dtype)
            ctx.tiles.map(ctx.g, scale)
            ctx.placement.place(scale, dst)
            acc = blocks.binary(ctx, "mul", acc, scale.reshape(()), suffix=f"mean{i}")
        if acc is here:
            acc = _on_ipu(ctx, here, dst, t_out.id)
        ctx.bind(t_out, acc)


def _unary(name: str) -> int:
    from codelets.elementwise import UNARY_OPS

    return UNARY_OPS[name]
