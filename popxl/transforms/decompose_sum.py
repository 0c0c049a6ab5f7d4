"""``decompose_sum``: add partial gradients as soon as they exist.

autodiff sums the partial gradients of a tensor read by several ops where the total is first
needed: a chain of ``add`` ops tagged ``attrs['grad_sum']`` (one group per total), all partials
alive until then (PopART's single Sum of partial gradients). This transform rewires each group of
three or more partials into a chain that adds the partials in the order they are produced and
schedules each addition right after its newest operand, so every partial dies as soon as it is
added: the peak liveness drops, the number of additions is unchanged.
"""
from typing import Dict, List

from popxl.graph import Graph
from popxl.op import Op

from ._graph_edit import reorder_ops

__all__ = ["decompose_sum"]


def _rewire(op: Op, new_inputs) -> None:
    for t in op.inputs:
        if op in t.consumers and not any(x is t for x in new_inputs):
            t._remove_consumer(op)
    for t in new_inputs:
        if op not in t.consumers:
            t._add_consumer(op)
    op.inputs = tuple(new_inputs)


def decompose_sum(graph: Graph) -> Graph:
    """Decompose the sums of partial gradients in ``graph`` (a gradient graph made by autodiff) into
    a liveness-friendly chain of additions. Returns ``graph`` (changed in place)."""
    if not isinstance(graph, Graph):
        raise TypeError(f"decompose_sum: expected a popxl.Graph, got {type(graph).__name__}.")
    order = sorted(graph._ops, key=lambda o: o.id)
    groups: Dict[object, List[Op]] = {}
    for op in order:
        if op.type == "add" and op.attrs.get("grad_sum") is not None:
            groups.setdefault(op.attrs["grad_sum"], []).append(op)
    changed = False
    for chain in groups.values():
        if len(chain) < 2:  # a sum of two partials is already a single addition
            continue
        chain_outs = {id(op.outputs[0]) for op in chain}
        partials = []
        for op in chain:
            for t in op.inputs:
                if id(t) not in chain_outs:
                    partials.append(t)
        if len(partials) != len(chain) + 1:
            continue  # not a plain chain (edited by someone else): leave it alone
        chain_set = {id(o) for o in chain}
        rest = [o for o in order if id(o) not in chain_set]
        pos = {id(o): i for i, o in enumerate(rest)}

        def produced_at(t):
            return pos[id(t.producer)] if t.producer is not None and id(t.producer) in pos else -1

        partials.sort(key=produced_at)
        # rewire: chain[0] = p0 + p1, chain[i] = chain[i-1] + p(i+1); the last op keeps producing the
        # total the consumers read
        ops_in_order = list(chain)
        prev = None
        for i, op in enumerate(ops_in_order):
            ins = (partials[0], partials[1]) if i == 0 else (prev, partials[i + 1])
            _rewire(op, ins)
            prev = op.outputs[0]
        # schedule each addition right after its newest operand
        new_order = list(rest)
        last_index = -1
        for i, op in enumerate(ops_in_order):
            p_new = partials[1] if i == 0 else partials[i + 1]
            if i == 0:
                at = max(produced_at_list(new_order, partials[0]), produced_at_list(new_order, p_new))
            else:
                at = max(last_index, produced_at_list(new_order, p_new))
            new_order.insert(at + 1, op)
            last_index = at + 1
        order = new_order
        changed = True
    if changed:
        reorder_ops(graph, order)
    return graph


def produced_at_list(order: List[Op], t) -> int:
    if t.producer is None:
        return -1
    for i, o in enumerate(order):
        if o is t.producer:
            return i
    return -1
