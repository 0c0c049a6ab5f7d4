"""Random ops. Every random op takes a seed tensor of shape (2,) and dtype uint32 (see
``popxl.random_seed.create_seeds`` and ``ops.split_random_seed``)."""
from typing import Iterable, Tuple

from popxl import dtypes
from popxl._casts import integer_dims
from popxl.context import op_debug_context
from popxl.tensor import Tensor, constant

from ._op_builder import single, not_a_tensor
from ._shapes import broadcast_shapes, check_float, check_seed

__all__ = ["random_uniform", "random_normal", "create_random_seed", "split_random_seed", "dropout",
           "shaped_dropout"]


def _random(op_type: str, seed_tensor: Tensor, shape, dtype, attrs) -> Tensor:
    check_seed(op_type, seed_tensor)
    dtype = dtypes.dtype.as_dtype(dtype)
    if dtype not in (dtypes.float16, dtypes.float32):
        raise TypeError(f"{op_type}: dtype must be float16 or float32, not {dtype.name}.")
    shape = integer_dims(shape, op_type)
    return single(op_type, [seed_tensor], shape, dtype, attrs, input_names=["seed_tensor"])


@op_debug_context
def random_uniform(seed_tensor: Tensor, shape: Tuple[int, ...], low: float = 0.0, high: float = 1.0,
                   dtype: dtypes.dtype = dtypes.float32):
    """Samples of the uniform distribution on ``[low, high)``."""
    if not float(low) < float(high):
        raise ValueError(f"random_uniform: low ({low}) must be less than high ({high}).")
    return _random("random_uniform", seed_tensor, shape, dtype, {"low": float(low), "high": float(high)})


@op_debug_context
def random_normal(seed_tensor: Tensor, shape: Tuple[int, ...], mean: float = 0.0, std: float = 1.0,
                  dtype: dtypes.dtype = dtypes.float32):
    """Samples of the normal distribution with ``mean`` and standard deviation ``std``."""
    if float(std) < 0:
        raise ValueError(f"random_normal: std must be >= 0, got {std}.")
    return _random("random_normal", seed_tensor, shape, dtype, {"mean": float(mean), "std": float(std)})


@op_debug_context
def create_random_seed(seed: Tensor, modifier: Tensor) -> Tensor:
    """A new seed derived from ``seed`` (shape (2,), uint32) and the scalar ``modifier``."""
    check_seed("create_random_seed", seed)
    if not isinstance(modifier, Tensor):
        modifier = constant(modifier, dtypes.uint32, "modifier")
    if modifier.nelms != 1 or not modifier.dtype.is_int:
        raise ValueError(f"create_random_seed: modifier must be an integer scalar, got {modifier}.")
    return single("create_random_seed", [seed, modifier], (2,), dtypes.uint32, input_names=["seed", "modifier"],
                  out_names=["modified_seed"])


def split_random_seed(seed: Tensor, n: int = 2) -> Tuple[Tensor, ...]:
    """``n`` new seeds from ``seed``: ``create_random_seed(seed, i)`` for i in 0..n-1."""
    return tuple(create_random_seed(seed, constant(i, dtypes.uint32)) for i in range(int(n)))


@op_debug_context
def dropout(t: Tensor, seed_tensor: Tensor, p: float):
    """Zero each element of ``t`` with probability ``p`` and scale the others by ``1 / (1 - p)``."""
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "dropout")
    check_float("dropout", t)
    check_seed("dropout", seed_tensor)
    if not 0.0 <= float(p) < 1.0:
        raise ValueError(f"dropout: p must be in [0, 1), got {p}.")
    return single("dropout", [t, seed_tensor], t.shape, t.dtype, {"ratio": float(p)},
                  input_names=["t", "seed_tensor"])


@op_debug_context
def shaped_dropout(t: Tensor, seed_tensor: Tensor, shape: Iterable[int], ratio: float) -> Tensor:
    """Dropout with one mask of ``shape`` broadcast over ``t``."""
    if not isinstance(t, Tensor):
        raise not_a_tensor("t", t, "shaped_dropout")
    check_float("shaped_dropout", t)
    check_seed("shaped_dropout", seed_tensor)
    shape = integer_dims(shape, "shaped_dropout")
    if broadcast_shapes(shape, t.shape, what="shaped_dropout mask and input") != t.shape:
        raise ValueError(f"shaped_dropout: the mask shape {shape} must broadcast to the input shape {t.shape}.")
    if not 0.0 <= float(ratio) < 1.0:
        raise ValueError(f"shaped_dropout: ratio must be in [0, 1), got {ratio}.")
    return single("shaped_dropout", [t, seed_tensor], t.shape, t.dtype, {"shape": shape, "ratio": float(ratio)},
                  input_names=["t", "seed_tensor"])
