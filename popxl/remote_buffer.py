"""Remote buffers: arrays of tensor-sized entries in streaming memory.

Buffers can be created and described now; the ops that use them (remote_load, remote_store,
remote variables) arrive with issue 6 (streaming memory).
"""
from typing import Tuple

import numpy as np

from popxl import dtypes
from popxl.context import gcg

__all__ = ["RemoteBuffer", "remote_buffer"]


class RemoteBuffer:
    """A buffer of ``entries`` tensors of shape ``tensor_shape`` and dtype ``tensor_dtype`` in
    streaming memory of the current Ir."""

    def __init__(self, tensor_shape: Tuple[int, ...], tensor_dtype: dtypes.dtype, entries: int) -> None:
        self._ir = gcg().ir
        self._remote_buffer_id = self._ir._next_remote_buffer_id()
        self._meta_shape: Tuple[int, ...] = ()
        self.set_remote_buffer_info(tensor_dtype, tensor_shape, entries)
        self._ir._remote_buffers.append(self)

    def set_remote_buffer_info(self, tensor_dtype: dtypes.dtype, tensor_shape: Tuple[int, ...],
                               entries: int) -> None:
        """Set the dtype, shape and number of entries of the buffer."""
        if int(entries) < 1:
            raise ValueError(f"A remote buffer needs at least one entry, not {entries}.")
        self._tensor_dtype = dtypes.dtype.as_dtype(tensor_dtype)
        self._tensor_shape = tuple(int(s) for s in tensor_shape)
        self._entries = int(entries)

    def validate_tensor_matches_buffer(self, t, num_shards: int = 1) -> None:
        """Raise ValueError unless ``t`` (a shard of ``num_shards``) has the buffer's shape and dtype."""
        shape = self._tensor_shape
        if num_shards > 1:
            nelms = int(np.prod(self._meta_shape or shape))
            shape = (-(-nelms // num_shards),)
        if t.shape != shape:
            raise ValueError(f"Tensor {t.id} has shape {t.shape}, which does not match the shape {shape} of "
                             f"RemoteBuffer[id={self._remote_buffer_id}].")
        if t.dtype != self._tensor_dtype:
            raise ValueError(f"Tensor {t.id} has dtype {t.dtype}, which does not match the dtype "
                             f"{self._tensor_dtype} of RemoteBuffer[id={self._remote_buffer_id}].")

    @property
    def remote_buffer_id(self) -> int:
        return self._remote_buffer_id

    @property
    def tensor_shape(self) -> Tuple[int, ...]:
        return self._tensor_shape

    @property
    def tensor_dtype(self) -> dtypes.dtype:
        return self._tensor_dtype

    @property
    def entries(self) -> int:
        return self._entries

    @entries.setter
    def entries(self, _entries: int) -> None:
        self.set_remote_buffer_info(self._tensor_dtype, self._tensor_shape, _entries)

    @property
    def meta_shape(self) -> Tuple[int, ...]:
        """Shape of the full tensor when the buffer holds replica shards (``()`` otherwise)."""
        return self._meta_shape

    @meta_shape.setter
    def meta_shape(self, shape: Tuple[int, ...]) -> None:
        self._meta_shape = tuple(int(s) for s in shape)

    def __hash__(self):
        return hash((self._remote_buffer_id, id(self._ir)))

    def __eq__(self, other) -> bool:
        return self is other

    def __repr__(self) -> str:
        return (f"RemoteBuffer[id={self._remote_buffer_id} shape={self._tensor_shape} "
                f"dtype={self._tensor_dtype} entries={self._entries}]")


def remote_buffer(tensor_shape: Tuple[int, ...], tensor_dtype: dtypes.dtype, entries: int = 1) -> RemoteBuffer:
    """Create a remote buffer of ``entries`` tensors of the given shape and dtype."""
    return RemoteBuffer(tensor_shape, tensor_dtype, entries)
