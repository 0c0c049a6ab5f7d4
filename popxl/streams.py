"""Host <-> device data streams. ``ops.host_load`` reads a host-to-device stream and
``ops.host_store`` writes a device-to-host stream; the Session feeds and collects them."""
from typing import TYPE_CHECKING, Iterable, Optional, Self, Tuple

from popxl import dtypes
from popxl._casts import integer_dims
from popxl.context import gcg, get_current_context
from popxl.tensor import TensorSpec

if TYPE_CHECKING:
    from popxl.ir import Ir

__all__ = ["Stream", "HostToDeviceStream", "DeviceToHostStream", "h2d_stream", "d2h_stream"]


class Stream:
    """A stream of tensors of one shape and dtype between the host and the IPU."""

    # set by _create (the constructor is closed to users)
    _ir: "Ir"
    _tensor_id: str
    _spec: TensorSpec
    _hash: int

    def __init__(self):
        raise RuntimeError("popxl streams cannot be constructed directly: use popxl.h2d_stream / d2h_stream.")

    @classmethod
    def _create(cls, ir: "Ir", tensor_id: str, shape: Tuple[int, ...], dtype: dtypes.dtype) -> Self:
        self = object.__new__(cls)
        self._ir = ir
        self._tensor_id = tensor_id
        self._spec = TensorSpec(shape, dtype)
        self._hash = hash((tensor_id, id(ir)))  # looked up a dozen times per Session.run
        return self

    @property
    def dtype(self) -> dtypes.dtype:
        return self._spec.dtype

    @property
    def shape(self) -> Tuple[int, ...]:
        return self._spec.shape

    @property
    def spec(self) -> TensorSpec:
        return self._spec

    @property
    def tensor_id(self) -> str:
        """Identifier of the stream, unique among the streams of the Ir."""
        return self._tensor_id

    @property
    def ir(self) -> "Ir":
        return self._ir

    def __hash__(self):
        return self._hash

    def __eq__(self, other) -> bool:
        return (isinstance(other, Stream) and type(self) is type(other)
                and self._tensor_id == other._tensor_id and self._ir is other._ir)

    def __repr__(self) -> str:
        return f"{type(self).__name__}[{self._tensor_id} {self.dtype} {self.shape}]"


class HostToDeviceStream(Stream):
    """A stream of data from the host to the IPU (read with ``ops.host_load``)."""


class DeviceToHostStream(Stream):
    """A stream of data from the IPU to the host (written with ``ops.host_store``)."""


def _make_stream(cls, shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str], default: str):
    ir = gcg().ir
    dtype = dtypes.dtype.as_dtype(dtype)
    shape = integer_dims(shape, f"{cls.__name__} {name or default!r}")
    if any(s < 0 for s in shape):
        raise ValueError(f"Stream shape cannot have negative dimensions: {shape}.")
    tensor_id = ir._unique_stream_id(get_current_context().name_scope_prefix + (name or default))
    stream = cls._create(ir, tensor_id, shape, dtype)
    ir._add_stream(stream)
    return stream


def h2d_stream(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None) -> HostToDeviceStream:
    """Create a host-to-device stream of tensors of ``shape`` and ``dtype``."""
    return _make_stream(HostToDeviceStream, shape, dtype, name, "h2d_stream")


def d2h_stream(shape: Iterable[int], dtype: dtypes.dtype, name: Optional[str] = None) -> DeviceToHostStream:
    """Create a device-to-host stream of tensors of ``shape`` and ``dtype``."""
    return _make_stream(DeviceToHostStream, shape, dtype, name, "d2h_stream")
