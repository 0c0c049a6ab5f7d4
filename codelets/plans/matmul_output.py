"""A product's output stored in the order of the plan's cells: each tile's share contiguous.

poplin creates a convolution's activations channel-grouped (createOutput / createInput: an
[N][C/g][H][W][g] variable, the NCHW tensor a dimShuffle view of it), so the block of channels and
positions a tile computes lies at consecutive addresses. Stored in NCHW order the same block is
one run per channel per image: every element-wise pass over the activation (batch norm, the
non-linearity, their gradients) then takes a vertex per run, and every exchange of it a message.

Here the output of a matmul-lowered product is a variable whose storage is the plan's output
cells in tile order (each tile's elements in the product's canonical [G, M, N] order: a run of
output positions per channel), and the caller's tensor (NCHW for a convolution) is a view of it.
Tiles and bytes per tile are those of mapping_for_output; only the order within a tile changes.
Element-wise ops clone this layout (popxl/lowering/layouts.py).
"""
from __future__ import annotations

from typing import Callable

import numpy as np

import ipu
from ipu.tensor import TEMPORARY

from .matmul_build import _owner_canonical, _owner_serial, choose_plan
from .matmul_plan import MatMulPlan, _canon_c, canonical_problem


def output_in_cells(graph: ipu.Graph, name: str, shape, dtype, a: ipu.Tensor, b: ipu.Tensor,
                    product_view: Callable, plan: MatMulPlan | None = None, debug: str = ""
                    ) -> tuple[ipu.Tensor, MatMulPlan]:
    """A tensor of `shape` for the product a @ b, stored in the plan's cell order, and the plan.

    product_view(t) turns a tensor of `shape` (or an index array) into the view of it that
    a @ b writes (what build_matmul is given as `out`)."""
    shape = tuple(int(d) for d in shape)
    numel = int(np.prod(shape, dtype=np.int64))
    var = graph.add_variable(name, (numel,), dtype, TEMPORARY, debug=debug)
    probe = np.arange(numel, dtype=np.int64).reshape(shape)
    dst = product_view(probe)
    plan = choose_plan(graph, a, b, var.reshape(dst.shape), plan)
    if numel == 0:
        return var.reshape(shape), plan
    owner = (_owner_serial(plan) if plan.sub is not None else _owner_canonical(plan)).reshape(-1)
    element = _canon_c(dst, canonical_problem(a.shape, b.shape)).reshape(-1)  # of each canonical output
    order = np.argsort(owner, kind="stable")  # storage: the canonical outputs by tile, in order
    tiles = owner[order]
    brk = np.flatnonzero(tiles[1:] != tiles[:-1]) + 1
    starts = np.concatenate(([0], brk))
    var.set_tile_runs(tiles[starts], np.diff(np.append(starts, numel)))
    position = np.empty(numel, np.int64)
    position[element[order]] = np.arange(numel, dtype=np.int64)
    return ipu.Tensor(var, position.reshape(shape), shape), plan
