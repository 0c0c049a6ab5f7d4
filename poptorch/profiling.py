"""poptorch.profiling.Channel: PopTorch's host-side tracepoints. The simulator's profile of a model
is its popxl Session's (ipu-profile); a Channel times host calls and logs them at debug level."""
from __future__ import annotations

import contextlib
import functools
import time

from ._logging import logger


class Channel:
    def __init__(self, name: str):
        self._name = name

    @contextlib.contextmanager
    def tracepoint(self, name: str):
        t0 = time.perf_counter()
        try:
            yield
        finally:
            logger.debug("%s.%s: %.6f s", self._name, name, time.perf_counter() - t0)

    def instrument(self, obj, *methods):
        for m in methods:
            fn = getattr(obj, m)

            @functools.wraps(fn)
            def wrapper(*a, __fn=fn, __m=m, **k):
                with self.tracepoint(__m):
                    return __fn(*a, **k)
            setattr(obj, m, wrapper)
        return obj
