"""popart.getLogger(name): PopART's per-module loggers ("session", "devicex", "ir", ...) and
levels (TRACE, DEBUG, INFO, WARN, ERR, CRITICAL, OFF). The log itself is popxl's (popxl/_logging.py,
through the frontend seam popxl/_frontends.py): the
simulator's sessions write PopART's lines there; POPART_LOG_LEVEL sets the default level."""
from __future__ import annotations

from popxl._frontends import LOG_LEVELS as _LEVELS
from popxl._frontends import get_log_level, log, set_log_level


class Logger:
    def __init__(self, name: str):
        self._module = name

    def setLevel(self, level: str) -> None:  # noqa: N802 - PopART's name
        set_log_level(self._module, level)

    def getLevel(self) -> str:  # noqa: N802
        lv = get_log_level(self._module)
        return min(_LEVELS, key=lambda k: abs(_LEVELS[k] - lv))

    def _log(self, level: str, msg: str) -> None:
        log(self._module or "popart", level, msg)

    def trace(self, msg: str) -> None:
        self._log("TRACE", msg)

    def debug(self, msg: str) -> None:
        self._log("DEBUG", msg)

    def info(self, msg: str) -> None:
        self._log("INFO", msg)

    def warn(self, msg: str) -> None:
        self._log("WARN", msg)

    def error(self, msg: str) -> None:
        self._log("ERR", msg)

    def critical(self, msg: str) -> None:
        self._log("CRITICAL", msg)


def getLogger(name: str = "all") -> Logger:  # noqa: N802
    return Logger("" if name == "all" else name)
