"""``merge_exchange`` and ``io_tile_exchange``: group host / remote transfers so they run as one
exchange.

PopXL merges the RemoteLoad / RemoteStore / HostLoad / HostStore ops created in a
``merge_exchange()`` context into one MultiExchange op, so their external synchronisations are
shared and the transfers run in parallel. Here the ops are marked: every exchange op created in the
context gets ``attrs['merge_exchange']`` = the id of its group (an enclosing context regroups the
ops of nested ones, as PopXL's outer merge absorbs the inner MultiExchange). The lowering reads the
mark; until streaming memory arrives the mark has no effect on the program.
"""
import itertools
from contextlib import contextmanager
from typing import List

from popxl.context import get_current_graph, in_sequence, io_tiles
from popxl.op import Op

__all__ = ["merge_exchange", "io_tile_exchange", "EXCHANGE_OP_TYPES"]

EXCHANGE_OP_TYPES = frozenset({"host_load", "host_store", "remote_load", "remote_store"})
_GROUPS = itertools.count(1)


@contextmanager
def _record_ops():
    graph = get_current_graph()
    created: List[Op] = []
    handle = graph.register_op_created_hook(lambda view: created.append(view._op))
    try:
        yield created
    finally:
        graph.remove_op_created_hook(handle)


def _depends(a: Op, b: Op) -> bool:
    """True if ``b`` reads (transitively, in the same graph) a tensor ``a`` writes."""
    frontier = list(a.outputs)
    seen = set()
    while frontier:
        t = frontier.pop()
        for c in t.consumers:
            if c is b:
                return True
            if id(c) not in seen and c.graph is a.graph:
                seen.add(id(c))
                frontier.extend(c.outputs)
    return False


@contextmanager
def merge_exchange():
    """Merge the host / remote load and store ops created in this context (in the current graph)
    into one exchange: ``with popxl.transforms.merge_exchange(): ops.host_load(...); ...``."""
    with _record_ops() as created:
        yield
    group = next(_GROUPS)
    for op in created:
        if op.type in EXCHANGE_OP_TYPES:
            op.attrs["merge_exchange"] = group


@contextmanager
def io_tile_exchange(verify_overlap: bool = True):
    """``io_tiles()``, ``merge_exchange()`` and ``in_sequence(False)`` together: transfers on the IO
    tiles, merged into one exchange that can overlap compute.

    Args:
        verify_overlap: check that the context leaves a single op once its exchanges are merged
            (``init`` ops do not count); otherwise the transfers can't overlap compute.

    Raises:
        RuntimeError: if ``verify_overlap`` and more than one op remains: other ops than host /
            remote transfers, or transfers that depend on each other and can't be merged.
    """
    with _record_ops() as created:
        with io_tiles(), merge_exchange(), in_sequence(False):
            yield
    if not verify_overlap:
        return
    counted = [op for op in created if op.type != "init"]
    exchanges = [op for op in counted if op.type in EXCHANGE_OP_TYPES]
    others = [op for op in counted if op.type not in EXCHANGE_OP_TYPES]
    units = len(others) + (1 if exchanges else 0)
    dependent = [(a, b) for a in exchanges for b in exchanges if a is not b and _depends(a, b)]
    if dependent:
        units += len({id(b) for _, b in dependent})
    if units > 1:
        listing = "\n   ".join(f"{op.type} '{op.name}'" for op in counted)
        raise RuntimeError(
            "More than one op remains after io_tile_exchange merged its exchanges, so the transfers can't overlap "
            "compute. Only independent host_load / host_store / remote_load / remote_store ops (and init) may be "
            f"created in the context. Ops created:\n   {listing}")
