"""Host helpers for the seed tensors random ops take (two uint32 words of one uint64)."""
from typing import Tuple

import numpy as np

__all__ = ["create_seeds", "uint64_to_two_uint32", "two_uint32_to_uint64"]

_MAX_UINT64 = 2**64 - 1


def create_seeds(seed: int, offset: int = 0, batches_per_step: int = 1, gradient_accumulation_factor: int = 1,
                 replicas: int = 1) -> np.ndarray:
    """Draw ``batches_per_step * gradient_accumulation_factor * replicas`` seed tensors from ``seed``.

    Each seed is a uint64 split into (most significant, least significant) uint32 words. The result
    has shape (batches_per_step, gradient_accumulation_factor, replicas, 2) with size-1 axes removed.
    """
    n = batches_per_step * gradient_accumulation_factor * replicas
    draws = np.random.default_rng(seed + offset).integers(0, _MAX_UINT64, endpoint=True, dtype=np.uint64, size=n)
    words = np.stack([(draws >> np.uint64(32)).astype(np.uint32),
                      (draws & np.uint64(0xFFFFFFFF)).astype(np.uint32)], axis=-1)
    return np.squeeze(words.reshape(batches_per_step, gradient_accumulation_factor, replicas, 2))


def uint64_to_two_uint32(num: int) -> Tuple[int, int]:
    """Split a uint64 into its (most significant, least significant) 32-bit halves."""
    num = int(num)
    if num < 0 or num > _MAX_UINT64:
        raise ValueError(f"Number is negative or cannot be represented as a uint64: {num}")
    return num >> 32, num & 0xFFFFFFFF


def two_uint32_to_uint64(a: int, b: int) -> int:
    """Join a most significant word ``a`` and a least significant word ``b`` into a uint64."""
    a, b = int(a), int(b)
    if not (0 <= a <= 0xFFFFFFFF and 0 <= b <= 0xFFFFFFFF):
        raise ValueError(f"Either `a` or `b` are negative or cannot be represented as a uint32: {a}, {b}")
    return (a << 32) | b
