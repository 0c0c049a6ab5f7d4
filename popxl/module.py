"""Base class for reusable pieces of a model built into graphs with ``Ir.create_graph``."""
from typing import Iterable, Union

__all__ = ["Module"]


class Module:
    """Subclass and implement :meth:`build`. ``ir.create_graph(module, *args)`` makes a graph of
    ``module.build``; calling the module calls ``build`` in the current graph."""

    def __call__(self, *args, **kwargs) -> Union[None, "Tensor", Iterable["Tensor"]]:  # noqa: F821
        return self.build(*args, **kwargs)

    def build(self, *args, **kwargs) -> Union[None, "Tensor", Iterable["Tensor"]]:  # noqa: F821
        raise NotImplementedError("Your popxl.Module must implement the `build` method.")
