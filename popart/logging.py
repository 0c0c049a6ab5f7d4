"""popart.getLogger(name): PopART's per-module loggers ("ir", "devicex", "session", ...), as
Python loggers under "popart.<name>"; levels take PopART's names (TRACE, DEBUG, INFO, WARN,
ERR, CRITICAL, OFF). POPART_LOG_LEVEL sets the default level, as in PopART."""
from __future__ import annotations

import logging as _logging
import os

_LEVELS = {"TRACE": 5, "DEBUG": _logging.DEBUG, "INFO": _logging.INFO, "WARN": _logging.WARNING,
           "WARNING": _logging.WARNING, "ERR": _logging.ERROR, "ERROR": _logging.ERROR,
           "CRITICAL": _logging.CRITICAL, "OFF": _logging.CRITICAL + 10}


class Logger:
    def __init__(self, name: str):
        self._logger = _logging.getLogger(f"popart.{name}" if name else "popart")
        env = os.environ.get("POPART_LOG_LEVEL")
        if env and env.upper() in _LEVELS:
            self._logger.setLevel(_LEVELS[env.upper()])

    def setLevel(self, level: str) -> None:  # noqa: N802 - PopART's name
        key = str(level).upper()
        if key not in _LEVELS:
            raise ValueError(f"Unknown log level {level!r}; use one of {sorted(_LEVELS)}")
        self._logger.setLevel(_LEVELS[key])

    def getLevel(self) -> str:  # noqa: N802
        lv = self._logger.getEffectiveLevel()
        return min(_LEVELS, key=lambda k: abs(_LEVELS[k] - lv))

    def debug(self, msg: str) -> None:
        self._logger.debug(msg)

    def info(self, msg: str) -> None:
        self._logger.info(msg)

    def warn(self, msg: str) -> None:
        self._logger.warning(msg)

    def error(self, msg: str) -> None:
        self._logger.error(msg)


def getLogger(name: str = "all") -> Logger:  # noqa: N802
    return Logger("" if name == "all" else name)
