"""PopART's log, written by the simulator's sessions: the same modules ("session", "devicex", ...),
levels (TRACE .. CRITICAL, OFF) and lines on standard error as PopART's C++ writes, for the
events the simulator has too (a compilation starting, an executable loaded from the cache,
weights moving between host and device).

The level of a module is what `popart.getLogger(module).setLevel` chose, else what
`popart.getLogger().setLevel` chose for all modules, else the POPART_LOG_LEVEL environment
variable read when a line is about to be written (a script or test may set it after importing),
else OFF, PopART's default.

Warnings of PopXL's Python code (`warn_popxl`, under module "popxl") are written whatever
POPART_LOG_LEVEL says, as PopXL's Python warnings reach standard error.
"""
from __future__ import annotations

import logging
import os
import sys
import time

__all__ = ["LEVELS", "set_level", "get_level", "enabled", "log", "warn_popxl"]

TRACE = 5
LEVELS = {"TRACE": TRACE, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
          "WARNING": logging.WARNING, "ERR": logging.ERROR, "ERROR": logging.ERROR, "CRITICAL": logging.CRITICAL,
          "OFF": logging.CRITICAL + 10}
_NAMES = {TRACE: "trace", logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warning",
          logging.ERROR: "error", logging.CRITICAL: "critical"}
logging.addLevelName(TRACE, "TRACE")

_ALL = ""
_chosen: dict = {}  # module ("" for all) -> level set by popart.getLogger(...).setLevel


class _Stderr(logging.Handler):
    """Writes to the current sys.stderr (tests and notebooks replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            sys.stderr.write(self.format(record) + "\n")
            sys.stderr.flush()
        except Exception:  # noqa: BLE001 - logging must never break the program
            self.handleError(record)


class _PopartFormat(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        t = time.localtime(record.created)
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", t) + f".{int(record.msecs):03d}"
        module = record.name.split(".", 1)[1] if "." in record.name else record.name
        return f"[{stamp}] [{record.name.split('.')[0]}:{module}] [{_NAMES.get(record.levelno, 'info')}] " \
               f"{record.getMessage()}"


_configured: set = set()  # the Python loggers this module gave a handler


def _logger(name: str) -> logging.Logger:
    top = name.split(".")[0]
    if top not in _configured:
        root = logging.getLogger(top)
        handler = _Stderr()
        handler.setFormatter(_PopartFormat())
        root.addHandler(handler)
        root.propagate = False
        root.setLevel(1)  # the module levels above decide; Python's levels pass everything
        _configured.add(top)
    return logging.getLogger(name)


def _parse(level) -> int:
    key = str(level).upper()
    if key not in LEVELS:
        raise ValueError(f"Unknown log level {level!r}; use one of {sorted(LEVELS)}")
    return LEVELS[key]


def set_level(module: str, level) -> None:
    """PopART's Logger.setLevel: `module` "" sets every module."""
    n = _parse(level)
    if module == _ALL:
        _chosen.clear()
    _chosen[module] = n


def get_level(module: str) -> int:
    if module in _chosen:
        return _chosen[module]
    if _ALL in _chosen:
        return _chosen[_ALL]
    env = os.environ.get("POPART_LOG_LEVEL", "").strip().upper()
    return LEVELS.get(env, LEVELS["OFF"])


def enabled(module: str, level: str) -> bool:
    return LEVELS[level] >= get_level(module)


def log(module: str, level: str, msg: str) -> None:
    """Write `msg` at `level` for PopART module `module` if that module's level lets it through."""
    if enabled(module, level):
        _logger(f"popart.{module}").log(LEVELS[level], msg)


def warn_popxl(msg: str) -> None:
    """A warning of PopXL's Python code (written whatever POPART_LOG_LEVEL says)."""
    _logger("popart.popxl").warning(msg)
