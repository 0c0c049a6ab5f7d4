"""AllReduce across the IPUs of one replica."""
from typing import List, Optional

from popxl.context import op_debug_context
from popxl.errors import UndefinedValue
from popxl.tensor import Tensor

from .._op_builder import create_op
from ..utils import check_in_graph
from .collectives import CollectiveOps, check_not_float8, to_collective_op

__all__ = ["all_reduce", "all_reduce_identical_inputs", "all_reduce_identical_grad_inputs"]


def _all_reduce(ts: List[Tensor], ipus: Optional[List[int]], op: CollectiveOps, identical_inputs: bool = False,
                identical_grad_inputs: bool = False) -> List[Tensor]:
    op = to_collective_op(op)
    ts = list(ts)
    if not ts:
        raise ValueError("all_reduce needs at least one tensor.")
    for t in ts:
        check_not_float8(t, op, "all_reduce")
    from popxl.context import get_current_context
    check_in_graph(get_current_context().graph, **{f"t{i}": t for i, t in enumerate(ts)})
    if ipus is None:
        try:
            ipus = [t.ipu for t in ts]
        except UndefinedValue as e:
            raise ValueError("Could not automatically infer the IPU of all input Tensors `ts`. "
                             "Please specify the IPUs via the `ipus` parameter.") from e
    ipus = [int(i) for i in ipus]
    if len(ts) != len(ipus):
        raise ValueError(f"Number of specified tensor does not equal number of specified IPUs. "
                         f"{len(ts)} != {len(ipus)}")
    for t in ts[1:]:
        if t.shape != ts[0].shape or t.dtype != ts[0].dtype:
            raise ValueError(f"all_reduce: every tensor must have the shape and dtype of {ts[0]}; {t} differs.")
    if op == "mean" and not ts[0].dtype.is_floating_point:
        raise TypeError(f"all_reduce: op 'mean' needs floating point tensors, not {ts[0].dtype}.")
    o = create_op("all_reduce", ts, [(t.shape, t.dtype) for t in ts],
                  {"op": op, "ipus": tuple(ipus), "identical_inputs": bool(identical_inputs),
                   "identical_grad_inputs": bool(identical_grad_inputs)},
                  out_names=[f"all_reduce_out_{i}" for i in range(len(ts))], check_placement=False)
    for out, ipu in zip(o.outputs, ipus):
        out._set_ipu(ipu)
    return list(o.outputs)


@op_debug_context
def all_reduce(ts: List[Tensor], ipus: Optional[List[int]] = None, op: CollectiveOps = "add") -> List[Tensor]:
    """Reduce tensors that live on different IPUs of one replica; output i (on IPU ``ipus[i]``)
    holds the result on every IPU.

    Args:
        ts: the tensors, one per IPU.
        ipus: the IPU of each tensor (inferred from the tensors if None).
        op: 'add', 'mean', 'mul' (as 'mean'), 'min', 'max', 'and', 'or', 'square_add'.
    """
    return _all_reduce(ts, ipus, op)


@op_debug_context
def all_reduce_identical_inputs(ts: List[Tensor], ipus: Optional[List[int]] = None,
                                op: CollectiveOps = "add") -> List[Tensor]:
    """All-reduce of tensors known to be identical: the op copies each input (an identity) and its
    gradient is the all-reduce of the gradients."""
    return _all_reduce(ts, ipus, op, identical_inputs=True)


@op_debug_context
def all_reduce_identical_grad_inputs(ts: List[Tensor], ipus: Optional[List[int]] = None,
                                     op: CollectiveOps = "add") -> List[Tensor]:
    """All-reduce whose gradients are known to be identical: the op is an all-reduce and its
    gradient an identity."""
    return _all_reduce(ts, ipus, op, identical_grad_inputs=True)
