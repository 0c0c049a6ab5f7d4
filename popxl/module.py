"""Base class for reusable pieces of a model built into graphs with ``Ir.create_graph``."""
from typing import TYPE_CHECKING, Iterable, Union

if TYPE_CHECKING:
    from popxl.tensor import Tensor

__all__ = ["Module"]


class Module:
    """Subclass and implement :meth:`build`. ``ir.create_graph(module, *args)`` makes a graph of
    ``module.build``; calling the module calls ``build`` in the current graph."""

    def __call__(self, *args, **kwargs) -> Union[None, "Tensor", Iterable["Tensor"]]:
        return self.build(*args, **kwargs)

    def build(self, *args, **kwargs) -> Union[None, "Tensor", Iterable["Tensor"]]:
        raise NotImplementedError("Your popxl.Module must implement the `build` method.")
