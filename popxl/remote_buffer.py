"""Remote buffers: arrays of tensor-sized entries in streaming memory.

``ops.remote_load`` / ``remote_load_`` / ``remote_store`` move one entry between the tiles and the
buffer; ``popxl.remote_variable`` puts a variable's value in an entry. The lowering gives every
buffer an ``ipu.RemoteBuffer`` (ipu/remote.py); the engine keeps it in host memory per replica.
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
        _check_entries(entries)
        self._ir = gcg().ir
        self._remote_buffer_id = self._ir._next_remote_buffer_id()
        self._meta_shape: Tuple[int, ...] = ()
        self.set_remote_buffer_info(tensor_dtype, tensor_shape, entries)
        self._ir._add_remote_buffer(self)

    def _replica_sharded(self, shard_over: int, grouping) -> None:
        """The buffer holds the shards of replica-sharded tensors (replica_sharded_buffer)."""
        self._shard_over = shard_over
        self._replica_grouping = grouping

    def set_remote_buffer_info(self, tensor_dtype: dtypes.dtype, tensor_shape: Tuple[int, ...],
                               entries: int) -> None:
        """Set the dtype, shape and number of entries of the buffer.

        Raises:
            ValueError: if ``entries`` is not a positive integer or the shape has a negative size.
            TypeError: if the shape is not a sequence of integers.
        """
        _check_entries(entries)
        self._tensor_dtype = dtypes.dtype.as_dtype(tensor_dtype)
        self._tensor_shape = _check_shape(tensor_shape)
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


def _check_entries(entries) -> None:
    if isinstance(entries, bool) or not isinstance(entries, (int, np.integer)) or entries < 1:
        raise ValueError(f"A remote buffer's entries must be a positive (non-zero) integer, got {entries!r}.")


def _check_shape(shape) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    try:
        out = tuple(int(s) for s in shape)
    except TypeError:
        raise TypeError(f"A remote buffer's tensor_shape must be a sequence of integers, got {shape!r}.") from None
    if any(s != d for s, d in zip(out, shape)):
        raise TypeError(f"A remote buffer's tensor_shape must be a sequence of integers, got {shape!r}.")
    if any(s < 0 for s in out):
        raise ValueError(f"A remote buffer's tensor_shape cannot have negative sizes: {out}.")
    return out


def remote_buffer(tensor_shape: Tuple[int, ...], tensor_dtype: dtypes.dtype, entries: int = 1) -> RemoteBuffer:
    """Create a remote buffer of ``entries`` tensors of the given shape and dtype."""
    return RemoteBuffer(tensor_shape, tensor_dtype, entries)
