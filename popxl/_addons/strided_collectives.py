"""popxl-addons' strided collectives (ops/replicated_strided_collectives/*_binding.cpp, mgcl.cpp):
all-gather, all-reduce and reduce-scatter over the replica groups of (stride, group size), written
on the custom-op API as expansions into the built-in collectives of that ReplicaGrouping.

Semantics (from the C++ sources):
- ReplicatedAllGatherStrided: output (group_size x nelms,) of the group's inputs in rank order
  (the Python wrapper reshapes it to the input's meta shape for a replica-sharded input); no
  gradient op.
- ReplicatedAllReduceStrided: `add` or `mean` over the group; with identicalInputs it is an
  identity (OpToIdentity), and its gradient is the same op with identicalInputs and
  identicalGradInputs swapped.
- ReplicatedReduceScatterStrided: `add` or `mean`, output (ceil(nelms / group_size),), meta shape
  the input's shape when configured for replicated tensor sharding; no gradient op.
"""
from __future__ import annotations

import math

import popxl
from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph

_REDUCING = ("add", "mean")


def _grouping(stride: int, group_size: int):
    ir = popxl.gcg().ir
    if stride < 1 or group_size < 1:
        raise ValueError(f"strided collectives: stride and group size must be > 0 (got {stride}, {group_size})")
    return ir.replica_grouping(stride=int(stride), group_size=int(group_size))


def _check_op(name: str, op: str) -> str:
    op = getattr(op, "name", op)
    op = str(op).lower()
    if op not in _REDUCING:
        raise ValueError(f"{name}: only the 'add' and 'mean' collective operators are implemented (got {op!r}), "
                         "as in popxl-addons' C++ op")
    return op


@register_custom_op
class ReplicatedAllGatherStrided(CustomOp):
    """All-gather over the replica groups of (stride, group_size): (group_size x nelms,)."""
    op_type = "replicated_all_gather_strided"
    pb_type = "ReplicatedAllGatherStrided"
    attrs = ("stride", "group_size")
    gradient = "missing"
    input_names = ("t",)

    def infer(self, inputs, stride, group_size):
        t, = inputs
        return [((int(group_size) * t.nelms,), t.dtype)]

    def expand(self, t, stride, group_size):
        rg = _grouping(stride, group_size)
        g = ops.collectives.replicated_all_gather(t, axis=0, group=rg, output_shape="new_axis")
        return g.reshape((rg.group_size * t.nelms,))


@register_custom_op
class ReplicatedAllReduceStrided(CustomOp):
    """All-reduce (add / mean) over the replica groups of (stride, group_size)."""
    op_type = "replicated_all_reduce_strided"
    pb_type = "ReplicatedAllReduceStrided"
    attrs = ("op", "stride", "group_size", "identical_inputs", "identical_grad_inputs")
    input_names = ("t",)

    def infer(self, inputs, op, stride, group_size, identical_inputs, identical_grad_inputs):
        _check_op("replicated_all_reduce_strided", op)
        t, = inputs
        return [(t.shape, t.dtype, t.meta_shape)]

    def identity_of(self, identical_inputs=False, **attrs):
        return 0 if identical_inputs else None

    def expand(self, t, op, stride, group_size, identical_inputs, identical_grad_inputs):
        if identical_inputs:
            return t
        return ops.collectives.replicated_all_reduce(t, op, _grouping(stride, group_size))

    def grad(self, ctx, fwd, grads):
        a = fwd.attrs
        g, = self.create(grads[0], op=a["op"], stride=a["stride"], group_size=a["group_size"],
                         identical_inputs=a["identical_grad_inputs"], identical_grad_inputs=a["identical_inputs"])
        return [g]


@register_custom_op
class ReplicatedReduceScatterStrided(CustomOp):
    """Reduce-scatter (add / mean) over the replica groups of (stride, group_size)."""
    op_type = "replicated_reduce_scatter_strided"
    pb_type = "ReplicatedReduceScatterStrided"
    attrs = ("op", "stride", "group_size", "rts")
    gradient = "missing"
    input_names = ("t",)

    def infer(self, inputs, op, stride, group_size, rts):
        _check_op("replicated_reduce_scatter_strided", op)
        t, = inputs
        return [((math.ceil(t.nelms / int(group_size)),), t.dtype, t.shape if rts else ())]

    def expand(self, t, op, stride, group_size, rts):
        return ops.collectives.replicated_reduce_scatter(
            t, op, _grouping(stride, group_size), configure_output_for_replicated_tensor_sharding=bool(rts))


def _all_gather(graph, inputs, outputs, stride, groupSize, settings=None):  # noqa: N803
    return create_in_graph(ReplicatedAllGatherStrided(), graph, inputs, outputs,
                           dict(stride=int(stride), group_size=int(groupSize)), settings)


def _all_reduce(graph, inputs, outputs, op, stride, groupSize, identicalInputs, identicalGradInputs,  # noqa: N803
                settings=None):
    return create_in_graph(ReplicatedAllReduceStrided(), graph, inputs, outputs,
                           dict(op=_check_op("replicated_all_reduce_strided", op), stride=int(stride),
                                group_size=int(groupSize), identical_inputs=bool(identicalInputs),
                                identical_grad_inputs=bool(identicalGradInputs)), settings)


def _reduce_scatter(graph, inputs, outputs, op, stride, groupSize,  # noqa: N803
                    configureOutputForReplicatedTensorSharding, settings=None):  # noqa: N803
    return create_in_graph(ReplicatedReduceScatterStrided(), graph, inputs, outputs,
                           dict(op=_check_op("replicated_reduce_scatter_strided", op), stride=int(stride),
                                group_size=int(groupSize), rts=bool(configureOutputForReplicatedTensorSharding)),
                           settings)


BINDING_CLASSES = {
    "replicated_all_gather_strided_binding": [
        binding_class("ReplicatedAllGatherStridedOp", ReplicatedAllGatherStrided(), _all_gather)],
    "replicated_all_reduce_strided_binding": [
        binding_class("ReplicatedAllReduceStridedOp", ReplicatedAllReduceStrided(), _all_reduce)],
    "replicated_reduce_scatter_strided_binding": [
        binding_class("ReplicatedReduceScatterStridedOp", ReplicatedReduceScatterStrided(), _reduce_scatter)],
}
