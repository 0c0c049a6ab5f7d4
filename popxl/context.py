"""The global build context: which graph ops go into, and the settings new ops pick up.

Graphs are pushed with ``with graph:``; ``name_scope``, ``ipu``, ``io_tiles`` and ``in_sequence``
are context managers that change how the ops created inside them are recorded.
"""

import inspect
import numbers
import os
from collections import defaultdict, namedtuple
from contextlib import contextmanager
from enum import Enum
from functools import wraps
from typing import (TYPE_CHECKING, Any, Callable, DefaultDict, Dict, List, Literal, Optional, Tuple,
                    TypeVar, Union, overload)

if TYPE_CHECKING:
    from popxl.graph import Graph
    from popxl.ir import Ir
    from popxl.op import Op
    from popxl._pb.views import Op as PbOp

__all__ = [
    "Context", "ExecutionContext", "get_current_context", "get_current_graph", "get_main_graph",
    "gcg", "gmg", "get_ir", "gir", "ipu", "in_sequence", "io_tiles", "name_scope",
    "debug_context_frame_offset", "get_source_location", "op_debug_context",
]


class ExecutionContext(Enum):
    """The program an op belongs to. User ops are ``Normal``; the others are the fragments PopXL
    runs around the main program (weights to/from host, optimizer and accumulate-outer)."""
    Normal = 0
    AccumulateOuterFragment = 1
    WeightsFromHostFragment = 2
    WeightsToHostFragment = 3
    OptimizerFromHostFragment = 4
    Subgraph = 5

    @property
    def value_name(self) -> str:
        return self.name


SourceLocation = namedtuple("SourceLocation", ["function", "filename", "lineno"])


class Context:
    """Build state shared by every popxl call in this process."""

    def __init__(self):
        self._reset()

    def _reset(self):
        self._graphs: List["Graph"] = []
        self._ipu_id: Optional[int] = 0
        # None: no sequencing (the default, and the 'pass' mode); True/False: see in_sequence().
        self._in_sequence: Optional[bool] = None
        self._previous_ops: DefaultDict[Tuple[int, ExecutionContext], List[Optional["Op"]]] = \
            defaultdict(list)
        self._debug_names: List[str] = []
        self._debug_context_frame_offset: int = 0
        self._name_scope: List[str] = []
        self._io_tile_set: bool = False
        self._execution_context: ExecutionContext = ExecutionContext.Normal
        self._hook_handle: int = 0
        self._op_created_hooks: Dict[int, Callable[["PbOp"], Any]] = {}  # hooks get the _ir.Op view

    # -- settings picked up by new ops -------------------------------------------------------
    @contextmanager
    def _placed(self, ipu_id: Optional[int], io_tile_set: bool, execution_context: ExecutionContext,
                name_scope: List[str]):
        """Record ops with this placement, execution context and name scope inside the block."""
        prev = (self._ipu_id, self._io_tile_set, self._execution_context, self._name_scope)
        self._ipu_id, self._io_tile_set = ipu_id, io_tile_set
        self._execution_context, self._name_scope = execution_context, list(name_scope)
        try:
            yield
        finally:
            self._ipu_id, self._io_tile_set, self._execution_context, self._name_scope = prev

    @contextmanager
    def _without_name_scope(self):
        """Record ops outside any name scope inside the block."""
        saved, self._name_scope = self._name_scope, []
        try:
            yield
        finally:
            self._name_scope = saved

    @property
    def ipu_id(self) -> Optional[int]:
        return self._ipu_id

    @property
    def io_tile_set(self) -> bool:
        return self._io_tile_set

    @property
    def execution_context(self) -> ExecutionContext:
        return self._execution_context

    def push_name_scope(self, name: str):
        self._name_scope.append(str(name))

    def pop_name_scope(self) -> str:
        return self._name_scope.pop()

    @property
    def name_scopes(self) -> List[str]:
        return list(self._name_scope)

    @property
    def name_scope_prefix(self) -> str:
        """The current name scopes joined with '/', with a trailing '/' ("" at top level)."""
        return "".join(s + "/" for s in self._name_scope)

    # -- graph stack --------------------------------------------------------------------------
    def push_graph(self, g: "Graph"):
        if self._graphs and self._graphs[0].ir is not g.ir:
            raise RuntimeError(
                "Cannot enter a graph of a different Ir inside the context of another Ir's graph: "
                f"{self._graphs[0].ir} != {g.ir}.")
        self._graphs.append(g)

    def pop_graph(self) -> "Graph":
        return self._graphs.pop()

    @property
    def graph(self) -> "Graph":
        if not self._graphs:
            raise RuntimeError(
                "No graph is selected. Create ops inside a graph context (for example "
                "`with ir.main_graph:`) or inside a function passed to `Ir.create_graph()`.")
        return self._graphs[-1]

    @property
    def main_graph(self) -> "Graph":
        if not self._graphs:
            raise RuntimeError(
                "No graph is selected, so there is no main graph. Use `with ir.main_graph:` first.")
        return self._graphs[0].main_graph

    @property
    def ir(self) -> "Ir":
        return self.graph.ir

    # -- in_sequence ----------------------------------------------------------------------------
    @property
    def in_sequence(self) -> Optional[bool]:
        return self._in_sequence

    @in_sequence.setter
    def in_sequence(self, enabled: Optional[bool]):
        if enabled is None:
            # Leaving every sequenced scope (or entering 'pass') forgets the ops seen so far.
            self._previous_ops.clear()
        self._in_sequence = enabled

    @in_sequence.deleter
    def in_sequence(self):
        raise AttributeError("Cannot delete in_sequence. Set it to False instead.")

    def _sequence_op(self, op: "Op") -> Tuple["Op", ...]:
        """Record ``op`` for in_sequence and return the ops it must run after.

        In a True scope an op runs after every op recorded since the last True op (so ops of a
        nested False scope are ordered as one block); in a False scope an op only runs after the
        last op of the enclosing True scope.
        """
        mode = self._in_sequence
        if mode is None:
            return ()
        if not isinstance(mode, bool):
            raise ValueError(f"`in_sequence` mode not understood: {mode!r}. "
                             "Must be one of True, False, 'pass'.")
        previous = self._previous_ops[(id(op.graph), op.execution_context)]
        after: List["Op"] = []
        if mode:
            after = [p for p in previous if p is not None and p is not op]
            previous.clear()
        else:
            if previous:
                if previous[0] is not None and previous[0] is not op:
                    after = [previous[0]]
            else:
                previous.append(None)  # marks "no True op yet" so later False ops stay unordered
        previous.append(op)
        return tuple(after)

    # -- hooks ------------------------------------------------------------------------------------
    def register_op_created_hook(self, fn: Callable[["PbOp"], Any]) -> int:
        self._hook_handle += 1
        self._op_created_hooks[self._hook_handle] = fn
        return self._hook_handle

    def remove_op_created_hook(self, handle: int):
        if handle not in self._op_created_hooks:
            raise ValueError(f"Unknown op created hook {handle}")
        del self._op_created_hooks[handle]

    def _op_created(self, op):
        """Tell the op-created hooks about a new op (a popxl Op or its `_ir.Op` view); hooks get
        the `_ir.Op` view, as in PopXL."""
        if not self._op_created_hooks:
            return
        from popxl._pb import op_view
        view = op_view(getattr(op, "_op", op))
        for fn in list(self._op_created_hooks.values()):
            fn(view)

    @contextmanager
    def _quiet(self):
        """Record ops without telling the op-created hooks and without in_sequence ordering (a
        custom op's expansion graph is built while the user's graph is being built)."""
        hooks, seq = self._op_created_hooks, self._in_sequence
        self._op_created_hooks, self._in_sequence = {}, None
        try:
            yield
        finally:
            self._op_created_hooks, self._in_sequence = hooks, seq

    @contextmanager
    def _op_settings_applied(self, graph, settings):
        """Create ops in `graph` with the placement and execution context of `settings` (an
        OpSettings from `_get_op_settings`, or None for the current ones)."""
        prev = (self._ipu_id, self._io_tile_set, self._execution_context)
        pushed = not self._graphs or self._graphs[-1] is not graph
        if pushed:
            self.push_graph(graph)
        if settings is not None:
            self._ipu_id = settings.vgraphId
            self._io_tile_set = settings.tileSet == "io"
            self._execution_context = settings.executionContext
        try:
            yield
        finally:
            self._ipu_id, self._io_tile_set, self._execution_context = prev
            if pushed:
                self.pop_graph()

    def _get_op_settings(self, name: str):
        """The settings of an op about to be created here (PopART's `Op::Settings`): graph, name
        with the name scope, IPU, tile set, execution context. Custom ops' createOpInGraph use it."""
        from popxl._pb import OpSettings
        scope = "/".join(self._name_scope)
        return OpSettings(self.graph, f"{scope}/{name}" if scope else name, scope, self._ipu_id,
                          "io" if self._io_tile_set else "compute", self._execution_context, self._debug_names)

    def _add_in_sequence_topocons(self, op) -> None:
        """Order an op created without `in_sequence` (or edited since) like the ops around it."""
        op = getattr(op, "_op", op)
        after = self._sequence_op(op)
        op.after = tuple(op.after) + tuple(a for a in after if a not in op.after)


_CURRENT_CONTEXT = Context()


def get_current_context() -> Context:
    return _CURRENT_CONTEXT


def get_current_graph() -> "Graph":
    """The graph new ops are added to (the innermost ``with graph:``). Alias: ``gcg``."""
    return get_current_context().graph


def get_main_graph() -> "Graph":
    """The main graph of the Ir currently being built. Alias: ``gmg``."""
    return get_current_context().main_graph


gcg = get_current_graph
gmg = get_main_graph


def get_ir() -> "Ir":
    """The Ir currently being built (of the innermost ``with graph:``). Alias: ``gir`` (PopXL 3.3)."""
    return get_current_context().graph.ir


gir = get_ir


@contextmanager
def ipu(ipu: int):
    """Place the ops created in this context on IPU ``ipu``."""
    if isinstance(ipu, bool) or not isinstance(ipu, numbers.Integral) or ipu < 0:
        raise ValueError(f"popxl.ipu takes the index of an IPU of the replica (an int >= 0), got {ipu!r}.")
    ipu = int(ipu)
    ctx = get_current_context()
    prev = ctx._ipu_id
    ctx._ipu_id = ipu
    try:
        yield ipu
    finally:
        ctx._ipu_id = prev


@contextmanager
def in_sequence(mode: Union[bool, Literal["pass"]] = True):
    """Make the ops created in this context run in the order they are created.

    ``True``: each op runs after the previous one. ``False``: no order among these ops, but nested
    in a True scope they run as one block after the op before and before the op after.
    ``'pass'``: add no ordering at all.
    """
    if mode is None:
        raise TypeError("`None` cannot be passed to `in_sequence`. Try `False` instead.")
    enabled: Optional[bool]  # the context's setting: None for 'pass'
    if mode == "pass":
        enabled = None
    elif isinstance(mode, bool):
        enabled = mode
    else:
        raise ValueError(f"`in_sequence` mode not understood: {mode!r}. Must be True, False or 'pass'.")
    ctx = get_current_context()
    prev = ctx.in_sequence
    ctx.in_sequence = enabled
    try:
        yield enabled
    finally:
        ctx.in_sequence = prev


@contextmanager
def io_tiles():
    """Run the ops created in this context on the IO tiles of the current IPU."""
    ctx = get_current_context()
    prev = ctx._io_tile_set
    ctx._io_tile_set = True
    try:
        yield
    finally:
        ctx._io_tile_set = prev


@contextmanager
def _tile_set(tile_set: str):
    """Create ops on the "io" or "compute" tiles (io_tile_copy runs on its destination's)."""
    ctx = get_current_context()
    prev = ctx._io_tile_set
    ctx._io_tile_set = tile_set == "io"
    try:
        yield
    finally:
        ctx._io_tile_set = prev


@contextmanager
def name_scope(name: str):
    """Prefix the names of tensors and ops created in this context with ``name/``."""
    ctx = get_current_context()
    ctx.push_name_scope(name)
    try:
        yield ctx.name_scopes
    finally:
        ctx.pop_name_scope()


@contextmanager
def debug_context_frame_offset(i: int):
    """Skip ``i`` extra stack frames when recording the source location of ops."""
    ctx = get_current_context()
    ctx._debug_context_frame_offset += i + 1
    try:
        yield ctx._debug_context_frame_offset
    finally:
        ctx._debug_context_frame_offset -= i + 1


@contextmanager
def _execution_context(execution_context: ExecutionContext):
    ctx = get_current_context()
    prev = ctx._execution_context
    ctx._execution_context = execution_context
    try:
        yield execution_context
    finally:
        ctx._execution_context = prev


def get_source_location(offset: int) -> SourceLocation:
    """Function, file and line of the caller ``offset`` frames above this one."""
    frame = inspect.currentframe()
    try:
        for _ in range(offset + 1):
            if frame is None:
                break
            frame = frame.f_back
        if frame is None:
            raise IndexError(f"Incorrect source location offset {offset + 1}: the stack is shorter.")
        return SourceLocation(frame.f_code.co_name, os.path.realpath(frame.f_code.co_filename),
                              frame.f_lineno)
    finally:
        del frame


Fn = TypeVar("Fn")


@overload
def op_debug_context(name: str) -> Callable[[Fn], Fn]:
    ...


@overload
def op_debug_context(name: Fn) -> Fn:
    ...


def op_debug_context(name):
    """Decorator naming a debug context: ops created inside the decorated function record it.

    Use as ``@op_debug_context`` (the function's name is used) or ``@op_debug_context("name")``.
    """
    api_name: str = name if isinstance(name, str) else getattr(name, "__name__", "op")

    def outer(func):
        @wraps(func)
        def wrapper(*args, **kwargs):
            ctx = get_current_context()
            ctx._debug_names.append(api_name)
            try:
                return func(*args, **kwargs)
            finally:
                ctx._debug_names.pop()

        return wrapper

    if callable(name):
        return outer(name)
    return outer
