"""The host buffers of a run, as PopXL checks them (popxl.Session._verify_io_shape and friends).

A stream of shape S is fed by an array of shape (num_host_transfers, replicas) + S, each leading
dimension left out when it is 1. PopXL's own checks are looser than that in two ways, and Graphcore's
code relies on them: the num_host_transfers dimension may be longer than needed (only its first
num_host_transfers entries are used), and an array whose data dimensions squeeze to nothing (all of
size 1) is accepted whatever their number. The texts of the errors are PopXL's.
"""
from __future__ import annotations

from typing import Tuple

import numpy as np

from .streams import HostToDeviceStream


def extra_input_dims(ir) -> Tuple[int, ...]:
    """(num_host_transfers, this instance's replicas), each only when it is > 1."""
    dims: Tuple[int, ...] = ()
    if ir.num_host_transfers > 1:
        dims += (ir.num_host_transfers,)
    if ir.instance_replication_factor > 1:
        dims += (ir.instance_replication_factor,)
    return dims


def _kind(stream) -> str:
    return "input" if isinstance(stream, HostToDeviceStream) else "output"


def verify_io_shape(ir, stream, arr: np.ndarray) -> None:
    """Raise PopXL's ValueError when `arr` cannot feed (or receive) `stream`."""
    kind = _kind(stream)
    shape = tuple(stream.shape)
    full = extra_input_dims(ir) + shape
    repl_index = data_index = 0
    if ir.num_host_transfers > 1:
        repl_index += 1
        data_index += 1
        if arr.ndim == 0 or arr.shape[0] < ir.num_host_transfers:
            got = arr.shape[0] if arr.ndim else "none"
            raise ValueError(
                f"Dimension 0 ({got}) for the array provided for {kind} stream {stream.tensor_id} is not "
                f"large enough.\nIt should be at least of size num_host_transfers = {ir.num_host_transfers}")
    if ir.instance_replication_factor > 1:
        data_index += 1
        got = arr.shape[repl_index] if arr.ndim > repl_index else "none"
        if got != ir.instance_replication_factor:
            raise ValueError(
                f"Dimension {repl_index} ({got}) for the array provided for {kind} stream {stream.tensor_id} "
                f"is the wrong size.\nIt should be of size replication_factor = {ir.instance_replication_factor}")
    if arr.squeeze().shape[data_index:] == ():
        return  # only dimensions of size 1 are left: PopXL does not compare them
    if tuple(arr.shape[data_index:]) != shape:
        raise ValueError(
            f"Shape mismatch for {kind} stream {stream.tensor_id}:\nStream shape = {shape}, therefore expected "
            f"full global batch shape {full}. Got array shape = {arr.shape}")


def validate_io_streams(ir, buffers, expected) -> None:
    """Exactly the expected streams, each with an array of a shape `verify_io_shape` accepts."""
    given, wanted = set(buffers), set(expected)
    kind = _kind(next(iter(given or wanted))) if given or wanted else "input"
    if given != wanted:
        unexpected = {str(s) for s in given - wanted}
        missing = {str(s) for s in wanted - given}
        raise ValueError(f"Unexpected/Missing {kind}.\n  Unexpected: {unexpected}\n  Missing: {missing}")
    for s, arr in buffers.items():
        verify_io_shape(ir, s, np.asarray(arr))


def fit_to_stream(ir, stream, arr: np.ndarray) -> np.ndarray:
    """An array PopXL accepts for `stream`, as the exact (leading dims + stream shape) array the
    engine takes: a longer num_host_transfers dimension is cut to its first entries, and dimensions
    of size 1 are dropped or added. Raises PopXL's error for an array it refuses."""
    want = extra_input_dims(ir) + tuple(stream.shape)
    if arr.shape == want:
        return arr
    verify_io_shape(ir, stream, arr)
    if ir.num_host_transfers > 1 and arr.shape[0] > ir.num_host_transfers:
        arr = arr[:ir.num_host_transfers]
    if arr.shape != want and arr.size == int(np.prod(want)):
        arr = arr.reshape(want)
    if arr.shape != want:  # a squeezed-away layout whose sizes still do not add up
        raise ValueError(
            f"Shape mismatch for {_kind(stream)} stream {stream.tensor_id}:\nStream shape = {tuple(stream.shape)}, "
            f"therefore expected full global batch shape {want}. Got array shape = {arr.shape}")
    return arr
