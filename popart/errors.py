"""The exceptions PopART scripts catch.

`popart_exception` is what PopART raises for a bad model, bad options or bad data (it is a
RuntimeError, as pybind maps popart::error); `poplar_exception` and its subclasses come from the
device side. `OutOfMemoryException` is raised by `prepareDevice` when the program does not fit
in tile memory; it carries the simulator's memory report.
"""
from __future__ import annotations


from popxl.errors import popart_exception  # noqa: E402 - one class, raised by popxl too


class popart_internal_exception(popart_exception):  # noqa: N801
    """An inconsistency inside the PopART frontend (a bug: please report it)."""


# The device-side errors are popxl's (popxl/errors.py), so a PopXL script's
# `except popart.poplar_application_runtime_error` catches what popxl.Session raises (a float8
# log2 scale out of range, ...).
from popxl.errors import poplar_application_runtime_error, poplar_exception, poplar_runtime_error  # noqa: E402,F401


class OutOfMemoryException(popart_exception):
    """The compiled program does not fit in the tiles' memory.

    `getSummaryReport()` gives the memory report of the worst tiles (the simulator's
    `ipu.OutOfMemoryError` message); `getProfilePath()` is where a profile was written, if one was.
    """

    def __init__(self, e):
        super().__init__(str(e))
        self._error = e
        self._profile_path = ""

    def getSummaryReport(self) -> str:  # noqa: N802 - PopART's name
        return str(self._error)

    def getProfilePath(self) -> str:  # noqa: N802
        return self._profile_path
