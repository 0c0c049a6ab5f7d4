"""popxl-addons' ReplicatedAllReduceTP (ops/replicated_all_reduce_TP/*_binding.cpp): a
differentiable all-reduce (`add` only) over a ReplicaGrouping, for tensor parallelism. With
identicalInputs it is an identity (OpToIdentity); its gradient is the same op with identicalInputs
and identicalGradInputs swapped."""
from __future__ import annotations

from popxl import ops
from popxl.custom_op import CustomOp, register_custom_op

from ._binding import binding_class, create_in_graph


@register_custom_op
class ReplicatedAllReduceTP(CustomOp):
    """All-reduce (add) over a replica grouping whose gradient is an all-reduce or an identity."""
    op_type = "replicated_all_reduce_tp"
    pb_type = "ReplicatedAllReduceTP"
    attrs = ("op", "group", "identical_inputs", "identical_grad_inputs")
    input_names = ("t",)

    def infer(self, inputs, op, group, identical_inputs, identical_grad_inputs):
        if op != "add":
            raise ValueError(f"ReplicatedAllReduceTP: only the 'add' collective operator is implemented (got {op!r}), "
                             "as in popxl-addons' C++ op")
        t, = inputs
        return [(t.shape, t.dtype, t.meta_shape)]

    def identity_of(self, identical_inputs=False, **attrs):
        return 0 if identical_inputs else None

    def expand(self, t, op, group, identical_inputs, identical_grad_inputs):
        if identical_inputs:
            return t
        return ops.collectives.replicated_all_reduce(t, op, group)

    def grad(self, ctx, fwd, grads):
        a = fwd.attrs
        g, = self.create(grads[0], op=a["op"], group=a["group"], identical_inputs=a["identical_grad_inputs"],
                         identical_grad_inputs=a["identical_inputs"])
        return [g]


def _create(graph, inputs, outputs, op, group, identicalInputs, identicalGradInputs, settings=None):  # noqa: N803
    op = str(getattr(op, "name", op)).lower()
    return create_in_graph(ReplicatedAllReduceTP(), graph, inputs, outputs,
                           dict(op=op, group=group, identical_inputs=bool(identicalInputs),
                                identical_grad_inputs=bool(identicalGradInputs)), settings)


BINDING_CLASSES = {"replicated_all_reduce_TP_binding": [
    binding_class("ReplicatedAllReduceTPOp", ReplicatedAllReduceTP(), _create)]}
