"""AllGather across replicas."""
from typing import Literal, Optional, Union

import numpy as np

from popxl.context import op_debug_context
from popxl.replica_grouping import ReplicaGrouping
from popxl.tensor import Tensor

from .._op_builder import single, not_a_tensor
from .collectives import _group, _normalise_axis, _rearrange_input, _rearrange_output

__all__ = ["replicated_all_gather"]


@op_debug_context
def replicated_all_gather(t: Tensor, axis: Union[int, ReplicaGrouping] = 0, group: Optional[ReplicaGrouping] = None,
                          output_shape: Literal["new_axis", "concat", "meta_shape", "auto"] = "auto") -> Tensor:
    """Gather ``t`` from every replica of each group; every replica of the group gets all of them,
    in the order of the replicas in the group.

    The output shape follows ``output_shape``:

    - ``'new_axis'``: ``(group.group_size, *t.shape)``;
    - ``'concat'``: the values concatenated along ``axis``;
    - ``'meta_shape'``: ``t.meta_shape`` (``t`` is a replica shard of a tensor of that shape);
    - ``'auto'``: ``'meta_shape'`` if ``t`` has a meta shape, else ``'concat'``.

    Its gradient is a :func:`replicated_slice` (except for ``'meta_shape'``, whose gradient is the
    replica's shard of the incoming gradient).
    """
    if isinstance(axis, ReplicaGrouping) and group is None:
        # replicated_all_gather(t, group): the SDK 3.0 signature, whose output is
        # (group_size, *t.shape), or t.meta_shape for a shard
        group = axis
        axis = 0
        if output_shape == "auto":
            output_shape = "meta_shape" if t.meta_shape else "new_axis"
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "replicated_all_gather")
    group = _group(t, group, "replicated_all_gather")
    axis = _normalise_axis(t, axis, "replicated_all_gather")
    if output_shape == "auto":
        output_shape = "meta_shape" if t.meta_shape else "concat"
    if output_shape not in ("new_axis", "concat", "meta_shape"):
        raise ValueError("output_shape must equal one of 'new_axis', 'concat', 'meta_shape', 'auto'. "
                         f"Value: {output_shape}")
    n = group.group_size
    if output_shape == "meta_shape":
        if not t.meta_shape:
            raise ValueError(f"replicated_all_gather: output_shape='meta_shape' needs a tensor with a meta shape; "
                             f"{t.id} has none.")
        total = int(np.prod(t.meta_shape, dtype=np.int64))
        if total > n * t.nelms:
            raise ValueError(f"replicated_all_gather: gathering {n} shards of {t.nelms} elements cannot make the "
                             f"meta shape {t.meta_shape} of {t.id} ({total} elements).")
        return single("replicated_all_gather", [t], t.meta_shape, t.dtype,
                      {"group": group, "output_shape": "meta_shape"}, out_names=[t.name + "_all_gathered"])
    flat, shape = _rearrange_input(t, axis) if t.rank else (t.reshape((1,)), [1])
    out = single("replicated_all_gather", [flat], (n * flat.nelms,), t.dtype,
                 {"group": group, "output_shape": output_shape}, out_names=[flat.name + "_all_gathered"])
    if output_shape == "new_axis":
        return out.reshape((n, *t.shape))
    if t.rank == 0:
        return out
    shape[0] *= n
    return _rearrange_output(out, shape, axis, t.rank)
