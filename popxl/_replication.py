"""How a Session maps host data to replicas and IPUs.

- Variables: with a replica grouping of G > 1 groups the host data has a leading group axis and
  replica r gets ``data[assignment[r]]``; with one group every replica gets the data. Reading back,
  ``one_per_group`` takes the first replica of each group; ``all_replicas`` (when groups have more
  than one replica) returns one value per replica, shape ``(replication_factor, *shape)``.
- Replica-sharded variables (RTS): each replica holds its shard of its group's value (popxl/_rts.py);
  reading gathers the shards of a group back into the value.
- IPUs: a replica takes 1 + the highest IPU any op is placed on (``popxl.ipu(n)``, ``ipu_copy``).
"""
from __future__ import annotations

from typing import Callable, List, Optional

import numpy as np

__all__ = ["ipus_per_replica", "device_values", "host_value", "replicas_read", "accepts_host_shape",
           "expected_host_shapes", "retrieved"]


def ipus_per_replica(ir) -> int:
    """IPUs one replica of the Ir needs."""
    top = 0
    for g in ir.graphs:
        for op in g.ops:
            if op.ipu is not None:
                top = max(top, int(op.ipu))
            if op.type == "ipu_copy":
                top = max(top, int(op.attrs["destination"]), int(op.attrs["source"]))
            elif op.type == "all_reduce":
                top = max([top, *[int(i) for i in op.attrs["ipus"]]])
    return top + 1


def _is_rts(var) -> bool:
    # remote_replica_sharded_variable: the shards live in streaming memory (rules/remote.py)
    return getattr(var, "_rts_shard", None) is not None or getattr(var, "_remote_rts", False)


def _shard(value: np.ndarray, index: int, shard_over: int) -> np.ndarray:
    flat = np.ascontiguousarray(value).reshape(-1)
    m = -(-flat.size // shard_over)
    out = np.zeros(m, flat.dtype)
    piece = flat[index * m:(index + 1) * m]
    out[:piece.size] = piece
    return out


def expected_host_shapes(var, replicas: int) -> List[tuple]:
    """Host data shapes write_variable_data accepts for `var`: shape_on_host, and one value per
    replica for an all_replicas variable."""
    shapes = [tuple(var.shape_on_host)]
    rg = var.replica_grouping
    if var.retrieval_mode == "all_replicas" and replicas > 1 and rg.group_size > 1:
        shapes.append((replicas, *var.shape))
    return shapes


def accepts_host_shape(var, shape, replicas: int) -> bool:
    return tuple(shape) in expected_host_shapes(var, replicas)


def _per_replica_values(var, data: np.ndarray, replicas: int) -> Optional[list]:
    """The value of every replica (None: the same value everywhere)."""
    data = np.asarray(data)
    rg = var.replica_grouping
    shape = tuple(var.shape)
    G = rg.num_groups
    if G > 1 and data.shape == (G, *shape):
        return [data[g] for g in rg.assignment[:replicas]]
    if replicas > 1 and var.retrieval_mode == "all_replicas" and data.shape == (replicas, *shape):
        return [data[r] for r in range(replicas)]
    if G == 1 and data.size == int(np.prod(shape, dtype=np.int64)):
        return None
    raise ValueError(f"variable {var.id!r}: host data of shape {data.shape} does not fit; expected one of "
                     f"{expected_host_shapes(var, replicas)}")


def device_values(var, data: np.ndarray, replicas: int):
    """What to write on each replica: a single array for all replicas, or a list per replica, in
    the shape of the variable's device storage (the flat shard for an RTS variable)."""
    values = _per_replica_values(var, data, replicas)
    data = np.asarray(data)
    if values is None:
        data = data.reshape(var.shape)
    if not _is_rts(var):
        return values if values is not None else data
    so = var._shard_over
    rg = var.replica_grouping
    out = []
    for r in range(replicas):
        value = values[r] if values is not None else data
        out.append(_shard(value, rg._rank(r) % so, so))
    if all(np.array_equal(out[0], o) for o in out[1:]):
        return out[0]
    return out


def host_value(var, read: Callable[[int], np.ndarray], replicas: int) -> np.ndarray:
    """The host data of `var` from the device (read(r): replica r's device storage)."""
    rg = var.replica_grouping
    shape = tuple(var.shape)
    groups = rg._groups()

    def value_of_group(g: int) -> np.ndarray:
        members = [r for r in groups[g] if r < replicas]
        if not _is_rts(var):
            return np.asarray(read(members[0])).reshape(shape)
        so = var._shard_over
        parts = [np.asarray(read(members[k])).reshape(-1) for k in range(so)]
        n = int(np.prod(shape, dtype=np.int64))
        return np.concatenate(parts)[:n].reshape(shape)

    if var.retrieval_mode == "all_replicas" and replicas > 1 and rg.group_size > 1:
        if not _is_rts(var):
            return np.stack([np.asarray(read(r)).reshape(shape) for r in range(replicas)])
        by_group = [value_of_group(g) for g in range(rg.num_groups)]
        return np.stack([by_group[rg.assignment[r]] for r in range(replicas)])
    if rg.num_groups > 1:
        return np.stack([value_of_group(g) for g in range(rg.num_groups)])
    return value_of_group(0)


def replicas_read(var, replicas: int) -> list:
    """The replicas whose device storage host_value reads for `var` (with PopDist each instance
    reads those it holds and the instances exchange them)."""
    rg = var.replica_grouping
    groups = rg._groups()
    per_group = var._shard_over if _is_rts(var) else 1

    def of_group(g):
        return [r for r in groups[g] if r < replicas][:per_group]

    if var.retrieval_mode == "all_replicas" and replicas > 1 and rg.group_size > 1 and not _is_rts(var):
        return list(range(replicas))
    gs = range(rg.num_groups) if (rg.num_groups > 1 or var.retrieval_mode == "all_replicas") else [0]
    return sorted({r for g in gs for r in of_group(g)})


def retrieved(var, data: np.ndarray, replicas: int) -> np.ndarray:
    """A copy of host data of `var` in the form get_tensor_data returns: one value per replica for
    an all_replicas variable whose groups have several replicas (data given per group is spread
    over the replicas of each group), else as it is."""
    data = np.array(data, copy=True)
    rg = var.replica_grouping
    shape = tuple(var.shape)
    if var.retrieval_mode != "all_replicas" or replicas <= 1 or rg.group_size <= 1 or data.shape == (replicas, *shape):
        return data
    if rg.num_groups > 1 and data.shape == (rg.num_groups, *shape):
        return np.stack([data[g] for g in rg.assignment[:replicas]])
    return np.stack([data.reshape(shape)] * replicas)
