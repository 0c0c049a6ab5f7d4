"""The op record: what one op of a graph computes, from which tensors, into which tensors.

This is the contract between the frontend (which records ops) and the lowering and autodiff
(which read them). See docs/ir.md for the meaning of each field and the list of op types.
"""

from typing import TYPE_CHECKING, Any, Dict, Optional, Tuple

if TYPE_CHECKING:
    from popxl.context import ExecutionContext
    from popxl.graph import Graph
    from popxl.tensor import Tensor

__all__ = ["Op"]


class Op:
    """One op of a graph. Created only through ``popxl.ops._op_builder.create_op``.

    Attributes:
        id: unique within the Ir, increasing in creation order (so id order is a valid schedule).
        type: registry key of the op (the op function's name without the trailing ``_``).
        graph: the graph the op belongs to.
        inputs: ordered input tensors (optional inputs that were not given are absent).
        outputs: ordered output tensors.
        attrs: static attributes (axes, scale factors as Python floats, streams, graphs, ...).
        name: debug name, with the name-scope prefix.
        scope: the name scope alone ("" at top level, else "a/b").
        ipu: the IPU the op runs on.
        tile_set: "compute" or "io".
        inplace: True for ``_`` forms and for ops that modify an input.
        modified: indices of the inputs whose contents the op changes.
        aliases: output index -> input index whose storage the output shares.
        called_graphs: graphs the op calls (call, repeat, conditional).
        after: extra ordering edges from ``in_sequence``: this op runs after these ops.
        execution_context: the program fragment the op belongs to (normally ``Normal``).
        debug_context: the popxl API calls (outermost first) that created the op.
    """

    __slots__ = ("id", "type", "graph", "inputs", "outputs", "attrs", "name", "scope", "ipu", "tile_set",
                 "inplace", "modified", "aliases", "called_graphs", "after", "execution_context",
                 "debug_context", "_pb_view")

    def __init__(self, id: int, type: str, graph: "Graph", inputs: Tuple["Tensor", ...],
                 outputs: Tuple["Tensor", ...], attrs: Dict[str, Any], name: str, scope: str,
                 ipu: Optional[int], tile_set: str, inplace: bool, modified: Tuple[int, ...],
                 aliases: Dict[int, int], called_graphs: Tuple["Graph", ...], after: Tuple["Op", ...],
                 execution_context: "ExecutionContext", debug_context: Tuple[str, ...] = ()):
        self.id = id
        self.type = type
        self.graph = graph
        self.inputs = inputs
        self.outputs = outputs
        self.attrs = attrs
        self.name = name
        self.scope = scope
        self.ipu = ipu
        self.tile_set = tile_set
        self.inplace = inplace
        self.modified = modified
        self.aliases = aliases
        self.called_graphs = called_graphs
        self.after = after
        self.execution_context = execution_context
        self.debug_context = debug_context

    def input_index(self, t: "Tensor") -> int:
        """Index of the first input that is ``t``."""
        for i, x in enumerate(self.inputs):
            if x is t:
                return i
        raise ValueError(f"{t} is not an input of {self}.")

    def output_index(self, t: "Tensor") -> int:
        """Index of the output that is ``t``."""
        for i, x in enumerate(self.outputs):
            if x is t:
                return i
        raise ValueError(f"{t} is not an output of {self}.")

    @property
    def _pb_op(self):
        """This op as PopART's `_ir.Op` (a view that reads and edits it; popxl/_pb)."""
        view = getattr(self, "_pb_view", None)
        if view is None:
            from popxl._pb.op_classes import class_for
            view = self._pb_view = class_for(self)(self)
        return view

    def __repr__(self) -> str:
        ins = ", ".join(t.id if t is not None else "-" for t in self.inputs)
        outs = ", ".join(t.id for t in self.outputs)
        return f"Op[{self.id} {self.type} '{self.name}' ({ins}) -> ({outs})]"

    def __hash__(self) -> int:
        return id(self)

    def __eq__(self, other) -> bool:
        return self is other
