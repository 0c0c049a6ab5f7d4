"""PopTorch's exception classes.

`poptorch.Error` carries `type` (the component that raised it), `message` and `location`, as
PopTorch's do; `RecoverableError` adds `recovery_action` (what the IPU would need: on the simulator
nothing is ever reset, so it is only raised for conditions a user can fix and rerun);
`UnrecoverableError` is PopTorch's class for a device that must be taken offline, which a
simulated device never is. Errors found while capturing or translating a model are `Error` of type
"poptorch_py_error", PopTorch's type for errors raised in its Python layer.
"""
from __future__ import annotations


class Error(RuntimeError):
    """An error raised by PopTorch (`e.type`, `e.message`, `e.location`)."""

    def __init__(self, message: str = "", type: str = "poptorch_py_error", location: str = ""):  # noqa: A002
        super().__init__(f"'{type}': {message}" + (f"\nLocation: {location}" if location else ""))
        self.type = type
        self.message = message
        self.location = location


class RecoverableError(Error):
    """An error after which the program can go on once `recovery_action` is taken."""

    def __init__(self, message: str = "", type: str = "poplar_recoverable_runtime_error",  # noqa: A002
                 location: str = "", recovery_action: str = "NONE"):
        super().__init__(message, type, location)
        self.recovery_action = recovery_action


class UnrecoverableError(Error):
    """An error after which the device cannot be used (never raised by the simulator)."""

    def __init__(self, message: str = "", type: str = "poplar_unrecoverable_runtime_error", location: str = ""):  # noqa: A002
        super().__init__(message, type, location)


def createPoptorchError(msg: str) -> Error:  # noqa: N802 - PopTorch's name (poptorch._impl)
    return Error(msg)
