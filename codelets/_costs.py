"""Shared pieces of the poplibs-style cost models."""
from __future__ import annotations

import numpy as np


def worker_split(n, atom: int, workers: int = 6):
    """How a popops supervisor vertex splits n elements over its workers (poplibs
    popopsCycleEstimators.cpp): every worker takes `count` elements in whole 64-bit atoms, `final`
    = n % workers elements are left over, and worker number `rem` does the leftovers."""
    n = np.asarray(n, np.int64)
    count = (n // workers // atom) * atom
    final = n % workers
    rem = (n // workers) % workers + -(-final // atom)
    return count, final, rem


def vector_loop(n, vector: int, cycles_per_vector: int, overhead: int = 0):
    """overhead + ceil(n / vector) x cycles_per_vector: poplibs basicOpLoopCycles."""
    n = np.asarray(n, np.int64)
    return overhead + -(-n // vector) * cycles_per_vector


def supervisor_elementwise(n, vector: int, cycles_per_vector: int, worker_overhead: int,
                           supervisor_overhead: int, workers: int = 6):
    """A supervisor vertex that spreads n elements over `workers` contexts in vectors:
    supervisor_overhead + workers x (worker_overhead + ceil(ceil(n / workers) / vector) x cycles).
    Shape of poplibs' BinaryOp1DSupervisor / UnaryOp1DSupervisor estimators."""
    n = np.asarray(n, np.int64)
    per_worker = -(-n // workers)
    return supervisor_overhead + workers * (worker_overhead + -(-per_worker // vector) * cycles_per_vector)
