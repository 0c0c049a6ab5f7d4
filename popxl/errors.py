"""Exceptions raised by popxl."""

from ipu.errors import ApplicationRuntimeError

__all__ = ["UndefinedValue", "popart_exception", "poplar_exception", "poplar_runtime_error",
           "poplar_application_runtime_error"]


class UndefinedValue(Exception):
    """A value that has not been set (for example the IPU of a tensor nothing placed yet)."""


class popart_exception(RuntimeError):  # noqa: N801 - PopART's name
    """An error in the model, the options or the data given to PopART (a RuntimeError, as pybind
    maps popart::error). PopXL's C++ side raises it too; popart re-exports this class."""


class poplar_exception(RuntimeError):  # noqa: N801 - PopART's name
    """An error from the (simulated) device layer (Poplar). popart re-exports this hierarchy."""


class poplar_runtime_error(poplar_exception):  # noqa: N801
    """A failure while the program runs on the device."""


class poplar_application_runtime_error(poplar_runtime_error, ApplicationRuntimeError):  # noqa: N801
    """The program stopped itself while running on the (simulated) device: a device-side check
    failed, for example a log2 scale tensor outside [-32, 32) while the session option
    ``throwIfLog2ScaleTensorNotInRange`` is set. PopART raises it as
    ``popart.poplar_application_runtime_error``, which is this class."""
