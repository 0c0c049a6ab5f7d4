"""The Ir: a program made of a main graph and the graphs it calls."""

import inspect
import itertools
import os
import re
import typing
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterable, List, Literal, Optional, Set, Union

from popxl.graph import Graph
from popxl.module import Module
from popxl.replica_grouping import ReplicaGrouping
from popxl.tensor import Tensor, TensorByRef, TensorSpec, graph_input, graph_output

if TYPE_CHECKING:
    from popxl.op import Op
    from popxl.remote_buffer import RemoteBuffer
    from popxl.streams import DeviceToHostStream, HostToDeviceStream, Stream

__all__ = ["Ir"]

_IR_IDS = itertools.count()
_TENSOR_ID_SUFFIX = re.compile(r"__t\d+$")


def _hint_is_by_ref(hint: Any) -> bool:
    if hint is TensorByRef:
        return True
    return isinstance(hint, str) and hint.split(".")[-1] == "TensorByRef"


def _hint_is_by_ref_sequence(hint: Any) -> bool:
    if isinstance(hint, str):
        return bool(re.fullmatch(r"\s*(typing\.)?(List|Tuple|Sequence|list|tuple)\[\s*(popxl\.)?TensorByRef"
                                 r"(\s*,\s*\.\.\.)?\s*\]\s*", hint))
    args = typing.get_args(hint)
    return bool(args) and args[0] is TensorByRef and all(a is TensorByRef or a is Ellipsis for a in args)


class Ir:
    """A PopXL program: a main graph (``main_graph``) plus graphs made with :meth:`create_graph`
    and :meth:`create_empty_graph`.

    Args:
        replication: the replication factor, or ``'popdist'`` to take the global replication
            factor and this instance's replicas from PopRun / PopDist (environment variables
            POPDIST_NUM_TOTAL_REPLICAS, POPDIST_NUM_LOCAL_REPLICAS, ...; one replica without them).
    """

    def __init__(self, replication: Union[int, Literal["popdist"]] = 1):
        self._id = next(_IR_IDS)
        self._tensor_ids: Set[str] = set()
        self._tensor_suffix_counter = itertools.count(1)
        self._op_ids = itertools.count()
        self._graph_name_counts: Dict[str, int] = {}
        self._graphs: Dict[str, Graph] = {}
        self._streams: List["Stream"] = []
        self._remote_buffers: List["RemoteBuffer"] = []
        self._remote_buffer_ids = itertools.count(1)
        # recomputation: an op of a gradient graph -> the forward op it computes again
        # (transforms.autodiff_recomputing); the lowering reruns the forward op's programs for it
        self._recompute_of: Dict["Op", "Op"] = {}
        self._num_host_transfers = 1
        self._replication_factor = 1
        self._instance_replication_factor: Optional[int] = None
        self._use_popdist = isinstance(replication, str) and replication == "popdist"
        if self._use_popdist:
            from popxl._popdist import settings
            self._popdist = settings()
            self.replication_factor = self._popdist.total_replicas
            self._instance_replication_factor = self._popdist.local_replicas
        elif isinstance(replication, str):
            raise ValueError(f"replication must be a positive integer or 'popdist', not {replication!r}.")
        else:
            self.replication_factor = replication
        from popxl._pb.graph import Ir as PbIr
        # PopART's internal Ir as a view of this one (popxl/_pb): scripts set session options through
        # ir._pb_ir.getSessionOptions(); popxl-addons reads and edits graphs through it
        self._pb_ir = PbIr(self)
        self._custom_op_expansions: dict = {}  # popxl/custom_op.py: expansion graphs by op and signature
        if self._use_popdist:  # as PopXL: PopDist writes the distributed options into the session options
            from popxl._popdist import configure_session_options

            configure_session_options(self._pb_ir.getSessionOptions())
        self._main_graph = Graph._create(self, "")
        self._graphs[""] = self._main_graph

    # -- graphs -----------------------------------------------------------------------------------
    @property
    def main_graph(self) -> Graph:
        """The graph the program starts in."""
        return self._main_graph

    @property
    def graphs(self) -> typing.Tuple[Graph, ...]:
        """All graphs of the Ir, the main graph first, then in creation order."""
        return tuple(self._graphs.values())

    def _new_graph(self, name: str) -> Graph:
        base = name.replace(".<locals>", "")
        while True:
            n = self._graph_name_counts.get(base, 0)
            self._graph_name_counts[base] = n + 1
            graph_id = f"{base}_{n}"
            if graph_id not in self._graphs:
                break
        g = Graph._create(self, graph_id)
        self._graphs[graph_id] = g
        return g

    def _new_graph_with_id(self, graph_id: str) -> Graph:
        """A new empty graph with exactly this id (PopART's Ir::createGraph)."""
        if graph_id in self._graphs:
            raise ValueError(f"The Ir already has a graph {graph_id!r}.")
        g = Graph._create(self, graph_id)
        self._graphs[graph_id] = g
        return g

    def create_empty_graph(self, name: Optional[str] = None) -> Graph:
        """A new graph with no inputs, outputs or ops, named ``name`` (default ``graph``) + ``_N``."""
        return self._new_graph(name or "graph")

    def create_graph(self, fn: Union[Callable[..., Union[None, Tensor, Iterable[Tensor]]], Module],
                     *args: Any, **kwargs: Any) -> Graph:
        """Build a graph by calling ``fn`` (a function, or a Module's ``build``) with ``args``.

        Every Tensor or TensorSpec argument (alone, in a list/tuple argument, in ``*args`` or in
        ``**kwargs``) becomes a graph input of the same shape and dtype, in signature order; graph
        inputs created inside ``fn`` with ``popxl.graph_input`` follow. Arguments annotated
        ``TensorByRef`` (or ``List[TensorByRef]``) are passed by reference. ``fn`` must return
        None, a Tensor or an iterable of Tensors: these become the graph outputs.

        Raises:
            TypeError: if ``fn`` is not callable, or a list, ``*args`` or ``**kwargs`` argument
                mixes tensors and other values.
            ValueError: if the arguments do not match the signature of ``fn``, or ``fn`` returns
                something else than None, a Tensor or an iterable of Tensors.
        """
        if isinstance(fn, Module):
            qualname = type(fn).__qualname__
            func = fn.build
        else:
            if not callable(fn) or not hasattr(fn, "__qualname__"):
                raise TypeError("Callable `fn` must be either a function or a class that extends popxl.Module")
            qualname = fn.__qualname__
            func = fn

        signature = inspect.signature(func, follow_wrapped=True)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise ValueError(f"The arguments, `args` and `kwargs`, do not match the signature of the "
                             f"function `fn` ({qualname}{signature}): {e}") from e
        bound.apply_defaults()
        arguments = bound.arguments

        graph = self._new_graph(qualname)
        try:
            self._build_graph(graph, func, signature, arguments)
        except BaseException:
            del self._graphs[graph.id]  # leave no half-built graph behind
            raise
        return graph

    @staticmethod
    def _build_graph(graph: Graph, func: Callable, signature: inspect.Signature, arguments) -> None:
        with graph:
            for name, arg in list(arguments.items()):
                param = signature.parameters[name]
                hint = param.annotation
                if isinstance(arg, (Tensor, TensorSpec)):
                    arguments[name] = graph_input(arg.shape, arg.dtype, name, by_ref=_hint_is_by_ref(hint),
                                                  meta_shape=arg.meta_shape)
                    continue
                if not isinstance(arg, (tuple, list, dict)):
                    continue
                if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
                    by_ref = _hint_is_by_ref(hint)
                elif isinstance(arg, dict):
                    continue  # a plain dict argument is passed through untouched
                else:
                    by_ref = _hint_is_by_ref_sequence(hint)
                items = list(arg.items()) if isinstance(arg, dict) else \
                    [(f"{name}_{i}", a) for i, a in enumerate(arg)]
                is_tensor = [isinstance(a, (Tensor, TensorSpec)) for _, a in items]
                if any(is_tensor) and not all(is_tensor):
                    raise TypeError(f"A {type(arg).__name__} argument can't contain a mixture of Tensors and "
                                    f"other types. Arg name: {name}. Value: {arg}")
                if not items or not is_tensor[0]:
                    continue
                inputs = {sub: graph_input(a.shape, a.dtype, sub, by_ref=by_ref, meta_shape=a.meta_shape)
                          for sub, a in items}
                arguments[name] = inputs if isinstance(arg, dict) else list(inputs.values())

            new_bound = inspect.BoundArguments(signature, arguments)
            outputs = func(*new_bound.args, **new_bound.kwargs)

            if outputs is None:
                outputs = []
            elif isinstance(outputs, Tensor):
                outputs = [outputs]
            elif isinstance(outputs, Iterable) and not isinstance(outputs, (str, bytes, dict)):
                outputs = list(outputs)
                if not all(isinstance(o, Tensor) for o in outputs):
                    raise ValueError("Output of subgraph must be None, a Tensor or an iterable of Tensors. "
                                     f"Output types: {[type(o) for o in outputs]}. Value {outputs}")
            else:
                raise ValueError("Output of subgraph must be None, a Tensor or an iterable of Tensors. "
                                 f"Output type: {type(outputs)}. Value {outputs}")
            for out in outputs:
                graph_output(out)

    # -- ids --------------------------------------------------------------------------------------
    @property
    def id(self) -> int:
        return self._id

    def _mark_prepared(self) -> None:
        """Called by the Session that compiled this Ir: from here on the Ir belongs to it."""
        self._is_prepared = True

    def _check_not_prepared(self, what: str) -> None:
        """A Session owns the Ir it compiled: PopXL refuses a new replication factor or number of
        host transfers, and PopART's IR edits through `_pb_ir` views, which the session would
        never run. (New ops built with popxl after a Session are allowed, as in PopXL: a new
        Session compiles them.)"""
        if getattr(self, "_is_prepared", False):
            raise RuntimeError(
                f"The Ir {self.id} is already compiled by a popxl.Session, so {what} cannot change: the "
                "session would go on running the program it compiled. Build the whole program before "
                "creating the Session, or build a new Ir (and Session) for the changed program.")

    def _reserve_tensor_id(self, tensor_id: str) -> None:
        if tensor_id in self._tensor_ids:
            raise ValueError(f"Tensor id {tensor_id!r} is already used in {self}.")
        self._tensor_ids.add(tensor_id)

    def _unique_tensor_id(self, tensor_id: str) -> str:
        if tensor_id not in self._tensor_ids:
            return tensor_id
        base = _TENSOR_ID_SUFFIX.sub("", tensor_id)
        while True:
            candidate = f"{base}__t{next(self._tensor_suffix_counter)}"
            if candidate not in self._tensor_ids:
                return candidate

    def _unique_stream_id(self, stream_id: str) -> str:
        used = {s.tensor_id for s in self._streams}
        if stream_id not in used:
            return stream_id
        base = _TENSOR_ID_SUFFIX.sub("", stream_id)
        while True:
            candidate = f"{base}__t{next(self._tensor_suffix_counter)}"
            if candidate not in used:
                return candidate

    def _add_stream(self, stream: "Stream") -> None:
        self._streams.append(stream)

    def _add_recomputation(self, copy: "Op", source: "Op") -> None:
        """Record that ``copy`` (a gradient graph's op) computes ``source`` again, so the lowering
        reruns ``source``'s programs for it."""
        self._recompute_of[copy] = source

    def _add_remote_buffer(self, buffer: "RemoteBuffer") -> None:
        self._remote_buffers.append(buffer)

    def _forget_graph(self, graph_id: str) -> None:
        """Drop a graph whose building failed."""
        self._graphs.pop(graph_id, None)

    def _expansion_cache(self) -> dict:
        """Custom ops' expansion graphs, keyed by op type, input specs and attributes."""
        return self._custom_op_expansions

    def _next_op_id(self) -> int:
        return next(self._op_ids)

    def _next_remote_buffer_id(self) -> int:
        return next(self._remote_buffer_ids)

    # -- streams ----------------------------------------------------------------------------------
    def _streams_used_by(self, op_type: str) -> list:
        found: Dict[int, Any] = {}
        for g in self._graphs.values():
            for op in g._ops:
                if op.type == op_type:
                    found.setdefault(id(op.attrs["stream"]), op.attrs["stream"])
        return list(found.values())

    def get_all_d2h_streams(self) -> Set["DeviceToHostStream"]:
        """The device-to-host streams that a host_store op writes."""
        return set(self._streams_used_by("host_store"))

    def get_all_h2d_streams(self) -> Set["HostToDeviceStream"]:
        """The host-to-device streams that a host_load op reads."""
        return set(self._streams_used_by("host_load"))

    # -- run settings -----------------------------------------------------------------------------
    @property
    def num_host_transfers(self) -> int:
        """How many times each stream is read/written per ``session.run`` (batches per step x
        gradient accumulation). Host buffers get a leading axis of this size when it is > 1."""
        return self._num_host_transfers

    @num_host_transfers.setter
    def num_host_transfers(self, value: int) -> None:
        if int(value) != value or value < 1:
            raise ValueError(f"num_host_transfers must be a positive integer, not {value!r}.")
        if int(value) != getattr(self, "_num_host_transfers", int(value)):
            self._check_not_prepared("num_host_transfers")
        self._num_host_transfers = int(value)

    @property
    def replication_factor(self) -> int:
        """Number of replicas of the model (global, across instances)."""
        return self._replication_factor

    @replication_factor.setter
    def replication_factor(self, value: int) -> None:
        if isinstance(value, bool) or int(value) != value or value < 1:
            raise ValueError(f"replication_factor must be a positive integer, not {value!r}.")
        if int(value) != getattr(self, "_replication_factor", int(value)):
            self._check_not_prepared("replication_factor")
        self._replication_factor = int(value)

    @property
    def instance_replication_factor(self) -> int:
        """Number of replicas run by this instance: replication_factor, or this PopRun instance's
        replicas with ``replication='popdist'``."""
        if self._instance_replication_factor is not None:
            return min(self._instance_replication_factor, self._replication_factor)
        return self._replication_factor

    def replica_grouping(self, stride: int = 1, group_size: Optional[int] = None) -> ReplicaGrouping:
        """Group replicas: ``group_size`` replicas per group (default replication_factor // stride),
        consecutive members ``stride`` apart.

        For 8 replicas: ``(1, 2)`` -> assignment [0, 0, 1, 1, 2, 2, 3, 3]; ``(2, 4)`` ->
        [0, 1, 0, 1, 0, 1, 0, 1]; ``(4, 2)`` -> [0, 1, 2, 3, 0, 1, 2, 3]. A list instead of a
        stride is taken as an assignment (:meth:`replica_grouping_from_assignments`).
        """
        if isinstance(stride, (list, tuple)):
            return ReplicaGrouping._from_assignment(self, list(stride))
        return ReplicaGrouping._from_params(self, stride, group_size)

    def replica_grouping_from_assignments(self, assignment: List[int]) -> ReplicaGrouping:
        """Group replicas by an explicit group index per replica."""
        return ReplicaGrouping._from_assignment(self, assignment)

    # -- debugging --------------------------------------------------------------------------------
    def dot_checkpoint(self, check: str, save_dir: Optional[Union[Path, str]] = None) -> None:
        """Write the Ir's graphs (ops, tensors, edges) in Graphviz DOT format, as PopART's dot
        checkpoints do: ``<logDir>/<check>_r.dot`` for the main graph and ``<check>_<graph id>.dot``
        for each other graph with ops (session option ``separateCallOpPdfs``, on by default), or
        all in ``<check>_all.dot`` when it is off; ``firstDotOp`` / ``finalDotOp`` bound the ops drawn.

        ``save_dir`` becomes the session option ``logDir`` (so it holds for later checkpoints);
        without it the files go to ``logDir``, or the working directory when that is empty. A
        checkpoint is written when it is named in the session option ``dotChecks`` or in the
        ``POPART_DOT_CHECKS`` environment variable (colon-separated; ``ALL`` for every one); when
        neither names any, this call turns on all checkpoints (``dotChecks = {"ALL"}``), as PopXL does.
        """
        opts = self._pb_ir.getSessionOptions()
        if save_dir is not None:
            save_dir = Path(save_dir)
            save_dir.mkdir(parents=True, exist_ok=True)
            opts.logDir = str(save_dir)
        if os.environ.get("POPART_DOT_CHECKS") is None and not opts.dotChecks:
            opts.dotChecks = {"ALL"}
        self._write_dot_check(check)

    def _write_dot_check(self, check: str) -> None:
        """Write checkpoint `check` if the session option dotChecks or POPART_DOT_CHECKS names it
        (names compare in upper case, as PopART's; ALL names every one). A Session writes the
        checkpoint FINAL of the Ir it compiles."""
        opts = self._pb_ir.getSessionOptions()
        env = os.environ.get("POPART_DOT_CHECKS")
        wanted = {str(c).upper() for c in opts.dotChecks} | ({c.upper() for c in env.split(":") if c} if env else set())
        if "ALL" not in wanted and check.upper() not in wanted:
            return
        directory = Path(opts.logDir) if opts.logDir else Path(".")
        directory.mkdir(parents=True, exist_ok=True)
        from popxl._dot import dot_files
        for name, text in dot_files(self, check, opts).items():
            (directory / name).write_text(text)

    # -- identity -------------------------------------------------------------------------------
    def __hash__(self) -> int:
        return hash(self._id)

    def __eq__(self, other) -> bool:
        if not isinstance(other, Ir):  # PopXL's behaviour: comparing an Ir with anything else is an error
            raise TypeError(f"Value must be of type popxl.Ir. Type: {type(other)}. Value: {other}.")
        return self._id == other._id

    def __repr__(self) -> str:
        return f"Ir[id={self._id}]"
