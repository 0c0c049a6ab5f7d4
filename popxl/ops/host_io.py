"""Data movement between the IPU and the host (streams) or streaming memory (remote buffers)."""
from typing import Optional, Tuple, Union

import numpy as np

from popxl.context import op_debug_context
from popxl.graph import Graph
from popxl.remote_buffer import RemoteBuffer
from popxl.streams import DeviceToHostStream, HostToDeviceStream
from popxl.tensor import Tensor

from ._op_builder import create_op, single

__all__ = ["host_load", "host_store", "remote_load", "remote_load_", "remote_store", "multiply_tuple",
           "remote_code_load", "code_copy"]

_ISSUE_6 = "arrives with issue 6 (streaming memory)"


@op_debug_context
def host_load(h2d_stream: HostToDeviceStream, name: Optional[str] = None) -> Tensor:
    """Read the next tensor of ``h2d_stream`` from the host."""
    if not isinstance(h2d_stream, HostToDeviceStream):
        raise TypeError(f"host_load needs a HostToDeviceStream (popxl.h2d_stream), got {type(h2d_stream).__name__}.")
    if name is None:
        name = h2d_stream.tensor_id.split("/")[-1]
    return single("host_load", [], h2d_stream.shape, h2d_stream.dtype, {"stream": h2d_stream}, out_names=[name])


@op_debug_context
def host_store(d2h_stream: DeviceToHostStream, t: Tensor) -> None:
    """Send ``t`` to the host along ``d2h_stream``."""
    if not isinstance(d2h_stream, DeviceToHostStream):
        raise TypeError(f"host_store needs a DeviceToHostStream (popxl.d2h_stream), got {type(d2h_stream).__name__}.")
    if not isinstance(t, Tensor):
        raise TypeError(f"host_store: t must be a Tensor, got {type(t).__name__}.")
    if t.dtype != d2h_stream.dtype:
        raise ValueError(f"host_store: the dtype {t.dtype.name} of tensor {t.id} does not match the dtype "
                         f"{d2h_stream.dtype.name} of stream {d2h_stream.tensor_id}.")
    if t.shape != d2h_stream.shape:
        raise ValueError(f"host_store: the shape {t.shape} of tensor {t.id} does not match the shape "
                         f"{d2h_stream.shape} of stream {d2h_stream.tensor_id}.")
    create_op("host_store", [t], [], {"stream": d2h_stream})


def remote_load(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], name: Optional[str] = None) -> Tensor:
    """Load entry ``offset`` of ``remote_buffer``."""
    raise NotImplementedError(f"ops.remote_load {_ISSUE_6}.")


def remote_load_(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], t: Tensor) -> Tensor:
    """Load entry ``offset`` of ``remote_buffer`` into ``t``."""
    raise NotImplementedError(f"ops.remote_load_ {_ISSUE_6}.")


def remote_store(remote_buffer: RemoteBuffer, offset: Union[int, Tensor], t: Tensor) -> None:
    """Store ``t`` into entry ``offset`` of ``remote_buffer``."""
    raise NotImplementedError(f"ops.remote_store {_ISSUE_6}.")


def multiply_tuple(tup: Tuple) -> int:
    """The product of the entries of ``tup``."""
    return int(np.prod(tup, dtype=np.int64))


def remote_code_load(graph: Graph, destination: str) -> None:
    """Load the code of ``graph`` from streaming memory."""
    raise NotImplementedError(f"ops.remote_code_load {_ISSUE_6}.")


def code_copy(graph: Graph, source: str, destination: str) -> None:
    """Copy the code of ``graph`` between locations."""
    raise NotImplementedError(f"ops.code_copy {_ISSUE_6}.")
