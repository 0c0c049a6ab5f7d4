"""Data movement between the IPU and the host (streams) or streaming memory (remote buffers)."""
from typing import Optional, Tuple, Union

import numpy as np

from popxl import dtypes
from popxl.context import gcg, op_debug_context
from popxl.graph import Graph
from popxl.remote_buffer import RemoteBuffer
from popxl.streams import DeviceToHostStream, HostToDeviceStream
from popxl.tensor import Tensor, constant

from ._op_builder import create_op, single, not_a_tensor
from .misc import init

__all__ = ["host_load", "host_store", "remote_load", "remote_load_", "remote_store", "multiply_tuple",
           "remote_code_load", "code_copy"]


def _check_stream_ir(stream, what: str) -> None:
    ir = gcg().ir
    if stream.ir is not ir:
        raise ValueError(f"{what}: stream {stream.tensor_id!r} was created in another popxl.Ir (Ir {stream.ir.id}) "
                         f"than the graph being built (Ir {ir.id}); create the stream with popxl.h2d_stream / "
                         "popxl.d2h_stream inside this Ir's graph.")


@op_debug_context
def host_load(h2d_stream: HostToDeviceStream, name: Optional[str] = None) -> Tensor:
    """Read the next tensor of ``h2d_stream`` from the host."""
    if not isinstance(h2d_stream, HostToDeviceStream):
        raise TypeError(f"host_load needs a HostToDeviceStream (popxl.h2d_stream), got {type(h2d_stream).__name__}.")
    _check_stream_ir(h2d_stream, "host_load")
    if name is None:
        name = h2d_stream.tensor_id.split("/")[-1]
    return single("host_load", [], h2d_stream.shape, h2d_stream.dtype, {"stream": h2d_stream}, out_names=[name])


@op_debug_context
def host_store(d2h_stream: DeviceToHostStream, t: Tensor) -> None:
    """Send ``t`` to the host along ``d2h_stream``."""
    if not isinstance(d2h_stream, DeviceToHostStream):
        raise TypeError(f"host_store needs a DeviceToHostStream (popxl.d2h_stream), got {type(d2h_stream).__name__}.")
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "host_store")
    _check_stream_ir(d2h_stream, "host_store")
    if t.dtype != d2h_stream.dtype:
        raise ValueError(f"host_store: the dtype {t.dtype.name} of tensor {t.id} does not match the dtype "
                         f"{d2h_stream.dtype.name} of stream {d2h_stream.tensor_id}.")
    if t.shape != d2h_stream.shape:
        raise ValueError(f"host_store: the shape {t.shape} of tensor {t.id} does not match the shape "
                         f"{d2h_stream.shape} of stream {d2h_stream.tensor_id}.")
    create_op("host_store", [t], [], {"stream": d2h_stream})


def _check_buffer(remote_buffer, what: str) -> None:
    if not isinstance(remote_buffer, RemoteBuffer):
        raise TypeError(f"{what} needs a popxl.RemoteBuffer (popxl.remote_buffer), got {type(remote_buffer).__name__}.")
    if remote_buffer._ir is not gcg().ir:
        raise ValueError(f"{what}: RemoteBuffer[id={remote_buffer.remote_buffer_id}] belongs to another Ir.")


def _offset_tensor(offset, what: str) -> Tensor:
    """The entry index as a tensor: ints become a uint32 constant named ``offset`` (as PopXL does)."""
    if isinstance(offset, Tensor):
        if not offset.dtype.is_int:
            raise TypeError(f"{what}: the offset tensor {offset.id} must have an integer dtype, not {offset.dtype}.")
        if offset.nelms != 1:
            raise ValueError(f"{what}: the offset tensor {offset.id} must hold one element (rank 0), "
                             f"it has shape {offset.shape}.")
        return offset
    if isinstance(offset, bool) or not isinstance(offset, (int, np.integer)):
        raise TypeError(f"{what}: offset must be an int or an integer Tensor, got {offset!r}.")
    if offset < 0:
        raise ValueError(f"{what}: offset must be >= 0, got {offset}.")
    return constant(int(offset), dtypes.uint32, name="offset")


@op_debug_context
def remote_load(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], name: Optional[str] = None) -> Tensor:
    """Load entry ``offset`` (an int or a one-element integer tensor) of ``remote_buffer`` from
    streaming memory into a new tensor of the buffer's shape and dtype.

    Nothing orders a remote_load after a remote_store of the same entry except the schedule: use
    ``popxl.in_sequence()`` when it matters.
    """
    _check_buffer(remote_buffer, "remote_load")
    off = _offset_tensor(offset, "remote_load")
    if name is None:
        name = f"id_{remote_buffer.remote_buffer_id}_offset_{off.name}"
    meta = remote_buffer.meta_shape or None
    t = init(remote_buffer.tensor_shape, remote_buffer.tensor_dtype, name + "_remote_load", "undef", meta_shape=meta)
    remote_buffer.validate_tensor_matches_buffer(t)
    return single("remote_load", [t, off], t.shape, t.dtype, {"remote_buffer": remote_buffer},
                  out_names=[name + "_remote_loaded"], input_names=["t", "offset"],
                  out_meta_shapes=[remote_buffer.meta_shape])


@op_debug_context
def remote_load_(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], t: Tensor) -> Tensor:
    """Load entry ``offset`` of ``remote_buffer`` into ``t`` (in place); returns ``t``'s alias."""
    _check_buffer(remote_buffer, "remote_load_")
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "remote_load_")
    off = _offset_tensor(offset, "remote_load_")
    remote_buffer.validate_tensor_matches_buffer(t)
    return single("remote_load", [t, off], t.shape, t.dtype, {"remote_buffer": remote_buffer},
                  out_names=["remote_load_inplace_out"], input_names=["t", "offset"], modified=[0],
                  aliases={0: 0}, out_meta_shapes=[t.meta_shape])


@op_debug_context
def remote_store(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], t: Tensor) -> None:
    """Store ``t`` into entry ``offset`` (an int or a one-element integer tensor) of
    ``remote_buffer`` in streaming memory. ``t`` must have the buffer's shape and dtype."""
    _check_buffer(remote_buffer, "remote_store")
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "remote_store")
    off = _offset_tensor(offset, "remote_store")
    remote_buffer.validate_tensor_matches_buffer(t)
    create_op("remote_store", [t, off], [], {"remote_buffer": remote_buffer}, input_names=["t", "offset"])


def multiply_tuple(tup: Tuple) -> int:
    """The product of the entries of ``tup``."""
    return int(np.prod(tup, dtype=np.int64))


CODE_LOCATIONS = ("executable", "compute_buffer", "io_buffer")


@op_debug_context
def remote_code_load(graph: Graph, destination: str) -> None:
    """Load the code of ``graph`` from streaming memory into ``destination``.

    Only ``"executable"`` (executable memory of the tiles) is supported, as in PopXL. A graph that
    is loaded somewhere keeps its code in streaming memory: the code occupies tile memory from a
    load until the last call before the next load (a call before any load means it was live from
    the start). Put the load and the calls in ``popxl.in_sequence()``; consecutive loads merge into
    one transfer.

    Raises:
        ValueError: if ``graph`` is the graph the op is created in.
        NotImplementedError: for ``"compute_buffer"``, ``"io_buffer"`` or any other destination.
    """
    g = gcg()
    if not isinstance(graph, Graph):
        raise TypeError(f"remote_code_load needs a popxl.Graph, got {type(graph).__name__}.")
    if graph.ir is not g.ir:
        raise ValueError(f"remote_code_load: graph {graph.id} belongs to another Ir.")
    if g == graph:
        raise ValueError(f"remote_code_load can't load the code of the graph it is in ({g._label}): load a "
                         "called graph's code before the call, from the graph that calls it.")
    if destination != "executable":
        raise NotImplementedError(f"remote_code_load to destination {destination!r} (graph {graph.id}) is not "
                                  "supported; only 'executable' is.")
    create_op("remote_code_load", [], [], {"graph": graph, "destination": destination})


def code_copy(graph: Graph, source: str, destination: str) -> None:
    """Copy the code of ``graph`` between locations on the chip. Not implemented (nor in PopXL).

    Raises:
        NotImplementedError: always.
    """
    raise NotImplementedError("ops.code_copy is not implemented (PopXL does not implement it either).")
