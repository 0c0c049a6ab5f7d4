"""Small work without a compile: a compile-time kernel runs its Python body while compiling it would cost more.

The compiler's own kernels (memory placement, copy-table and address builders, compute-set
scheduling) are Numba functions because a big program gives them millions of pieces and runs.
A small program gives them a few thousand, and on a new install compiling them costs seconds of
CPU each (placement alone about 5 s) for work that their plain Python body, run on the same NumPy
arrays, does in a fraction of that. `call(kernel, work, *args)` therefore runs the compiled kernel
when it is already compiled in this process, when the kernel cache holds it (loading it takes
milliseconds), or once the work given to its Python body in this process (counts of the items its
loops visit, this call's included) reaches `budget`, set per kernel so that the Python time stays
well below the compile it saves; otherwise it runs the Python body, whose calls to other Numba
functions run their Python bodies too. The choice depends only on the calls made and the cache,
never on time. Both give the same numbers: the kernels use int64 / bool arrays and integer arithmetic that
NumPy's scalars do alike, and tests/machine/test_interpreted.py runs each kernel both ways on the
same inputs. Only kernels written for this (no Numba-only intrinsics) go through `call`.
"""
from __future__ import annotations

import os
import types
from typing import Any, Callable

import numpy as np
from numba.core.dispatcher import Dispatcher

__all__ = ["BUDGET", "call", "compile_time_kernels", "python_body", "ready", "register"]

# Items of work an uncompiled kernel's Python body takes per process before the kernel is compiled:
# measured on the README's MLP, the bodies visit 140,000-270,000 items a second (placement: 38,000
# pieces a second) where the compiles they replace take 0.5-1 s of CPU each (placement 8-10 s).
BUDGET = 150_000

_bodies: dict[int, Callable] = {}
_spent: dict[int, int] = {}  # work given to each kernel's Python body so far
_registered: list = []  # (kernel, example arguments) of the kernels that go through `call`


def register(kernel: Dispatcher, *example_args: Any) -> None:
    """Declare a kernel that goes through `call`, with arguments of the types its callers pass
    (empty arrays will do): ipu/compile_ahead.py compiles it for those ahead of need."""
    _registered.append((kernel, example_args))


def compile_time_kernels() -> list:
    """(kernel, example arguments) of every registered kernel, in registration order."""
    return list(_registered)


def python_body(kernel: Dispatcher) -> Callable:
    """The kernel's Python function, with the Numba functions it calls replaced by theirs."""
    key = id(kernel)
    body = _bodies.get(key)
    if body is not None:
        return body
    f = kernel.py_func
    names = dict(f.__globals__)
    body = types.FunctionType(f.__code__, names, f.__name__, f.__defaults__, f.__closure__)
    _bodies[key] = body  # before the callees: a kernel calling itself finds its own body
    for name in f.__code__.co_names:
        g = names.get(name)
        if isinstance(g, Dispatcher):
            names[name] = python_body(g)
    return body


def ready(kernel: Dispatcher) -> bool:
    """Whether calling the kernel costs no compile: compiled in this process, or in the kernel
    cache (Numba's index of its cached versions exists)."""
    if kernel.overloads:
        return True
    cache = getattr(kernel, "_cache", None)
    index = getattr(getattr(cache, "_cache_file", None), "_index_path", None)
    return isinstance(index, str) and os.path.exists(index)


def call(kernel: Dispatcher, work: int, *args: Any, budget: int = BUDGET) -> Any:
    """kernel(*args), or its Python body while the work given to that stays under `budget` and
    the kernel is not ready (see the module docstring). Results are the same either way."""
    spent = _spent.get(id(kernel), 0) + int(work)
    if spent >= budget or ready(kernel):
        return kernel(*args)
    _spent[id(kernel)] = spent
    with np.errstate(over="ignore"):  # unsigned hashes wrap, as in the compiled kernel
        return python_body(kernel)(*args)
