"""Errors of the simulated machine. Each says what is wrong and how to fix it."""

__all__ = ["CompileError", "IpuError", "MappingError", "OutOfMemoryError", "StreamError"]


class IpuError(Exception):
    """Base of the simulator's errors."""


class MappingError(IpuError, ValueError):
    """A tensor is not mapped to tiles, or is mapped where it cannot be used."""


class CompileError(IpuError, ValueError):
    """A program cannot be compiled for the target (bad connection, unmapped tensor, ...)."""


class OutOfMemoryError(IpuError, MemoryError):
    """Tile memory overflowed. `report` holds the per-tile breakdown of the worst tiles (and what
    owns the bytes of the worst one); `categories` the memory categories that fill them."""

    def __init__(self, message: str, report=None, categories=None):
        super().__init__(message)
        self.report = report
        self.categories = list(categories or [])


class StreamError(IpuError, ValueError):
    """A host stream is not connected, or its buffer does not fit."""


class ApplicationRuntimeError(IpuError, RuntimeError):
    """The running program stopped itself: a device-side check failed (Poplar's
    poplar::application_runtime_error, which PopART/PopXL surface as
    `poplar_application_runtime_error`)."""
