"""Shared pieces of the poplibs-style cost models."""
from __future__ import annotations

from typing import NamedTuple

import numpy as np


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


# ------------------------------------------------------------------------------------------------
# popops element-wise estimators (poplibs SDK 3.x: lib/popops/popopsCycleEstimators.cpp, the tables
# of lib/popops/popopsCycleEstimators.hpp and lib/popops/PerformanceEstimation.cpp)

# basicOpSupervisorOverhead(): "common supervisor overhead" of a popops MultiVertex (UnaryOp1D,
# BinaryOp1D, BroadcastScalar1D ...): 11 cycles (PerformanceEstimation.cpp).
SUPERVISOR_OVERHEAD = 11


def ceil_div(a, b):
    a = np.asarray(a, np.int64)
    return -(-a // b)


def vector_width(t) -> int:
    """Target::getVectorWidth(type): elements of `t` in one 64-bit vector (2 float/int, 4 half,
    8 bool/char)."""
    return max(1, 8 // t.itemsize)


class OpPerf(NamedTuple):
    """One entry of popops' op cost tables: poplibs' OpPerformanceInfo struct."""

    cycles_per_loop: int
    natural_vector_width: bool  # a loop handles one vector of the type's natural width
    loop_unroll_factor: int  # elements per loop when not natural (0: one element per loop)


def op_perf_table(entries: dict) -> dict:
    """A cost table written as poplibs writes it, {key: (cyclesPerLoop, naturalVectorWidth,
    loopUnrollFactor)}, with OpPerf entries."""
    return {key: OpPerf(*value) for key, value in entries.items()}


def perf_loop_cycles(n, perf: OpPerf, vw: int, overhead: int, basic_loop: bool = False):
    """Inner-loop cycles for n elements of a popops op table entry:

    - natural: ceil(n / vectorWidth) loops of (cyclesPerLoop + overhead) cycles (binary ops,
      iceil); unary ops go through basicOpLoopCycles, which multiplies before it divides:
      (cyclesPerLoop + overhead) x (n + vectorWidth - 1) / vectorWidth in integers (basic_loop);
    - unroll >= 1: ceil(n / unroll) loops of cyclesPerLoop cycles, no overhead added;
    - neither (unroll == 0): one element per loop, cyclesPerLoop + overhead.

    Source: binaryOpInnerLoopCycles / unaryOpInnerLoopCycles / basicOpLoopCycles in
    popopsCycleEstimators.cpp and PerformanceEstimation.cpp.
    """
    cpl, natural, unroll = perf.cycles_per_loop, perf.natural_vector_width, perf.loop_unroll_factor
    n = np.asarray(n, np.int64)
    if natural:
        if basic_loop:
            return (cpl + overhead) * (n + vw - 1) // vw
        return ceil_div(n, vw) * (cpl + overhead)
    if unroll > 0:
        return ceil_div(n, unroll) * cpl
    return n * (cpl + overhead)


def type_key(t) -> str:
    """The poplibs type name used to index the op tables."""
    return {"float32": "float", "float16": "half", "int32": "int", "uint32": "uint", "bool": "bool",
            "int16": "short", "uint16": "ushort", "int8": "schar", "uint8": "uchar"}[t.name]
