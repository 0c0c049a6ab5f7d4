"""Graphs: the main graph of an Ir and the subgraphs it calls."""

from functools import wraps
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Optional, Set, Tuple

from popxl.context import get_current_context
from popxl.tensor import Constant, Tensor, Variable

if TYPE_CHECKING:
    from popxl.ir import Ir
    from popxl.op import Op
    from popxl._pb.views import Op as PbOp

__all__ = ["Graph"]


class Graph:
    """A graph of ops and tensors. The main graph is the program's entry point; other graphs have
    inputs and outputs and run when an op (call, repeat, conditional) calls them.

    Graphs are made by the Ir (``ir.main_graph``, ``ir.create_graph``, ``ir.create_empty_graph``).
    Use ``with graph:`` to add ops to a graph.
    """

    # set by _create (the constructor is closed to users)
    _ir: "Ir"
    _id: str
    _ops: List["Op"]  # in schedule order
    _tensors: Dict[str, Tensor]  # id -> tensor
    _inputs: List[Tensor]
    _outputs: List[Tensor]
    _by_ref_inputs: Set[Tensor]
    # False when autodiff must not differentiate this graph's ops where a graph calls it
    # (PopART's Graph::setCanBeRecursivelyAutodiffed): its GradGraphInfo is given instead
    _recursive_autodiff: bool

    def __init__(self):
        raise TypeError(f"Cannot create {self.__module__}.Graph instances using the constructor.")

    @classmethod
    def _create(cls, ir: "Ir", graph_id: str) -> "Graph":
        self = object.__new__(cls)
        self._ir = ir
        self._id = graph_id
        self._ops = []
        self._tensors = {}
        self._inputs = []
        self._outputs = []
        self._by_ref_inputs = set()
        self._recursive_autodiff = True
        return self

    def _set_recursive_autodiff(self, allowed: bool) -> None:
        self._recursive_autodiff = bool(allowed)

    # -- what the op builder, graph_input / graph_output and the transforms change --------------------
    def _add_op(self, op: "Op") -> None:
        # ops may be added after a Session compiled the Ir (PopXL allows it; that session goes on
        # running what it compiled, a new Session compiles the changed Ir)
        self._ops.append(op)

    def _set_op_order(self, ops: Iterable["Op"]) -> None:
        self._ops = list(ops)

    def _add_input(self, t: Tensor, by_ref: bool = False) -> None:
        self._inputs.append(t)
        if by_ref:
            self._by_ref_inputs.add(t)

    def _add_output(self, t: Tensor) -> None:
        self._outputs.append(t)

    # edits through PopART's _ir.Graph view (popxl/_pb)
    def _set_output(self, i: int, t: Tensor) -> None:
        self._outputs[i] = t

    def _remove_output(self, i: int) -> None:
        del self._outputs[i]

    def _remove_input(self, i: int) -> Tensor:
        t = self._inputs.pop(i)
        self._by_ref_inputs.discard(t)
        return t

    def _remove_op(self, op: "Op") -> None:
        self._ops = [o for o in self._ops if o is not op]

    def _remove_tensor(self, t: Tensor) -> None:
        self._tensors.pop(t.id, None)
        self._inputs = [x for x in self._inputs if x is not t]
        self._outputs = [x for x in self._outputs if x is not t]
        self._by_ref_inputs.discard(t)

    # -- naming -----------------------------------------------------------------------------------
    @property
    def name(self) -> str:
        """The graph's scope name (its id; "" for the main graph)."""
        return self._id

    @property
    def id(self) -> str:
        return self._id

    @property
    def _scope_prefix(self) -> str:
        return self._id + "/" if self._id else ""

    @property
    def _label(self) -> str:
        return "the main graph" if self.is_main_graph else f"graph '{self._id}'"

    def _create_tensor_id(self, name: Optional[str] = None) -> str:
        """A new tensor id: graph scope + name scopes + ``name`` (default ``t``), made unique."""
        name = name if name else "t"
        tid = self._scope_prefix + get_current_context().name_scope_prefix + name
        return self._ir._unique_tensor_id(tid)

    def _add_tensor(self, t: Tensor) -> None:
        self._ir._reserve_tensor_id(t.id)
        self._tensors[t.id] = t

    # -- structure ------------------------------------------------------------------------------
    @property
    def ir(self) -> "Ir":
        return self._ir

    @property
    def main_graph(self) -> "Graph":
        return self._ir.main_graph

    @property
    def is_main_graph(self) -> bool:
        return self is self._ir.main_graph

    @property
    def ops(self) -> List["Op"]:
        """The ops of the graph in creation order."""
        return list(self._ops)

    @property
    def inputs(self) -> Tuple[Tensor, ...]:
        return tuple(self._inputs)

    @property
    def inputs_by_name(self) -> Dict[str, Tensor]:
        return {t.name: t for t in self._inputs}

    @property
    def outputs(self) -> Tuple[Tensor, ...]:
        return tuple(self._outputs)

    @property
    def by_ref_inputs(self) -> Tuple[Tensor, ...]:
        """The inputs that are passed by reference, in input order."""
        return tuple(t for t in self._inputs if t in self._by_ref_inputs)

    def get_tensor(self, tensor_id: str) -> Tensor:
        try:
            return self._tensors[tensor_id]
        except KeyError:
            raise KeyError(f"No tensor with id {tensor_id!r} in {self._label}.") from None

    @property
    def tensors(self) -> Tuple[Tensor, ...]:
        return tuple(self._tensors.values())

    @property
    def variables(self) -> Tuple[Variable, ...]:
        return tuple(t for t in self._tensors.values() if isinstance(t, Variable))

    @property
    def constants(self) -> Tuple[Constant, ...]:
        return tuple(t for t in self._tensors.values() if isinstance(t, Constant))

    @property
    def called_graphs(self) -> Tuple["Graph", ...]:
        """Graphs called by ops of this graph (each once, in order of first call)."""
        seen: Dict[int, Graph] = {}
        for op in self._ops:
            for g in op.called_graphs:
                seen.setdefault(id(g), g)
        return tuple(seen.values())

    def __contains__(self, value: Tensor) -> bool:
        if not isinstance(value, Tensor):
            raise TypeError(f"Value must be of type popxl.Tensor. Value: {value!r}. Type: {type(value)}")
        return value.graph is self

    # -- context manager --------------------------------------------------------------------------
    def __enter__(self):
        get_current_context().push_graph(self)
        return self

    def __exit__(self, *exc):
        get_current_context().pop_graph()
        return False

    # -- PopART's internal graph ----------------------------------------------------------------
    @property
    def _pb_graph(self):
        """This graph as PopART's `_ir.Graph`: a view that reads and edits it (popxl/_pb)."""
        view = self.__dict__.get("_pb_view")
        if view is None:
            from popxl._pb.graph import Graph as PbGraph
            view = self._pb_view = PbGraph(self)
        return view

    def _set_pb_view(self, view) -> None:
        """Make `view` this graph's _ir.Graph (a LoopOp's wrapper graph view owns its graph)."""
        self._pb_view = view

    @classmethod
    def _from_pb(cls, pb_graph) -> "Graph":
        """The popxl Graph of an `_ir.Graph` view."""
        g = getattr(pb_graph, "_g", None)
        if not isinstance(g, Graph):
            raise TypeError(f"Graph._from_pb takes an _ir.Graph, not {type(pb_graph).__name__}")
        return g

    # -- hooks ------------------------------------------------------------------------------------
    def register_op_created_hook(self, fn: Callable[["PbOp"], Any]) -> int:
        """Call ``fn(op)`` after each op created in this graph, with the op as PopART's ``_ir.Op``
        (as PopXL does; ``op._op`` is the popxl Op). Returns a handle for removal."""

        @wraps(fn)
        def hook(op):
            if op._op.graph is self:
                fn(op)

        return get_current_context().register_op_created_hook(hook)

    def remove_op_created_hook(self, handle: int):
        get_current_context().remove_op_created_hook(handle)

    # -- identity -------------------------------------------------------------------------------
    def __eq__(self, other) -> bool:
        return isinstance(other, Graph) and self._id == other._id and self._ir is other._ir

    def __hash__(self):
        return hash((self._id, id(self._ir)))

    def __repr__(self) -> str:
        return f"Graph[id={self._id} name={self.name}]" if self._id else "Graph[main_graph]"
