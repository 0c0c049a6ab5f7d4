"""Typing helpers."""
from typing import NewType, TypeVar

T = TypeVar("T")

__all__ = ["NewAliasAnnotation"]


def NewAliasAnnotation(name: str, tp: T) -> T:
    """Make a distinct alias of ``tp`` for use in annotations.

    Type checkers treat the alias as ``tp``; at run time it is its own object, so code can tell
    ``x: TensorByRef`` from ``x: Tensor`` by the identity of the annotation.
    """
    return NewType(name, tp)  # type: ignore[return-value]  # the alias is to pass for tp itself
