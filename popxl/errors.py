"""Exceptions raised by popxl."""

__all__ = ["UndefinedValue"]


class UndefinedValue(Exception):
    """A value that has not been set (for example the IPU of a tensor nothing placed yet)."""
