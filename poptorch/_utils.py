"""Nested structures of tensors (tuples, lists, dicts, dataclasses registered with PyTorch's
pytree) flattened to lists and rebuilt."""
from __future__ import annotations

from typing import Any, Callable, List

import torch
from torch.utils import _pytree as pytree


def flattenTensorStructure(tensors) -> List[torch.Tensor]:  # noqa: N802 - PopTorch's name
    return [t for t in pytree.tree_leaves(tensors) if isinstance(t, torch.Tensor)]


def reconstructTensorStructure(structure, values, filter_fn: Callable[[Any], bool] = None):  # noqa: N802
    """`structure` with its tensors replaced, in order, by `values`."""
    leaves, spec = pytree.tree_flatten(structure)
    it = iter(values)
    out = [next(it) if isinstance(x, torch.Tensor) and (filter_fn is None or filter_fn(x)) else x for x in leaves]
    return pytree.tree_unflatten(out, spec)
