"""Collectives. Between replicas the Interpreter's replicas meet (`ctx.machine.exchange`); each group
reduces in rank order, float16 through float32. Between the IPUs of one replica (all_reduce) the
inputs are all here. rts_shard is the replica's shard of a replica-sharded variable (its storage,
so updates of the shard are updates of the variable)."""
import numpy as np

from ..interpreter import ReferenceError, Shared
from ..registry import reference_rule


def reduce_values(op_name: str, values) -> np.ndarray:
    """Reduce the values of a group (in rank order) with a collective operator."""
    dt = values[0].dtype
    data = np.stack([np.asarray(v) for v in values])
    acc = data.astype(np.float32) if dt == np.float16 else data
    if op_name in ("add", "mean"):
        out = np.sum(acc, axis=0, dtype=acc.dtype)
        if op_name == "mean":
            out = out / np.asarray(len(values), acc.dtype)
    elif op_name == "square_add":
        out = np.sum(acc * acc, axis=0, dtype=acc.dtype)
    elif op_name == "mul":
        out = np.prod(acc, axis=0, dtype=acc.dtype)
    elif op_name == "min":
        out = np.min(acc, axis=0)
    elif op_name == "max":
        out = np.max(acc, axis=0)
    elif op_name == "and":
        out = np.all(acc != 0, axis=0)
    elif op_name == "or":
        out = np.any(acc != 0, axis=0)
    else:
        raise ReferenceError(f"no reduction for collective operator {op_name!r}")
    return np.asarray(out).astype(dt)


def _group_values(ctx, op, value):
    """(values of this replica's group in rank order, this replica's rank in the group)."""
    machine = ctx.machine
    everyone = machine.exchange(np.array(value, copy=True)) if machine is not None else [value]
    replica = machine.index if machine is not None else 0
    groups = op.attrs["group"]._groups()
    for members in groups:
        members = [r for r in members if r < len(everyone)]
        if replica in members:
            return [everyone[r] for r in members], members.index(replica)
    raise ReferenceError(f"{op}: replica {replica} is in none of the groups {groups}")


@reference_rule("replicated_all_reduce")
def replicated_all_reduce(ctx, op, ins):
    values, _ = _group_values(ctx, op, ins[0])
    return [reduce_values(op.attrs["op"], values)]


@reference_rule("replicated_all_gather")
def replicated_all_gather(ctx, op, ins):
    values, _ = _group_values(ctx, op, ins[0])
    full = np.concatenate([np.asarray(v).reshape(-1) for v in values])
    n = int(np.prod(op.outputs[0].shape, dtype=np.int64))
    return [full[:n].reshape(op.outputs[0].shape)]


@reference_rule("replicated_reduce_scatter")
def replicated_reduce_scatter(ctx, op, ins):
    values, rank = _group_values(ctx, op, ins[0])
    m = int(np.prod(op.outputs[0].shape, dtype=np.int64))
    n = len(values)

    def padded(v):
        flat = np.asarray(v).reshape(-1)
        out = np.zeros(m * n, flat.dtype)
        out[:flat.size] = flat
        return out

    if op.attrs["op"] == "local":
        return [padded(ins[0])[rank * m:(rank + 1) * m]]
    total = reduce_values(op.attrs["op"], [padded(v) for v in values])
    return [total[rank * m:(rank + 1) * m]]


@reference_rule("all_reduce")
def all_reduce(ctx, op, ins):
    red = op.attrs["op"]
    if op.attrs.get("identical_inputs") or red == "local":
        return [np.array(x, copy=True) for x in ins]
    total = reduce_values(red, ins)
    return [total for _ in ins]


@reference_rule("rts_shard")
def rts_shard(ctx, op, ins):
    var = op.attrs["variable"]
    if ctx.machine is None:
        from popxl import _replication

        return [_replication.device_values(var, np.asarray(var._data), 1)]
    return [Shared(ctx.machine.variable(var))]
