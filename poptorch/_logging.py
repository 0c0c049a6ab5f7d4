"""PopTorch's logger ("poptorch"), its level from POPTORCH_LOG_LEVEL or setLogLevel."""
import logging
import os

logger = logging.getLogger("poptorch")

_LEVELS = {"TRACE": logging.DEBUG, "DEBUG": logging.DEBUG, "INFO": logging.INFO, "WARN": logging.WARNING,
           "ERR": logging.ERROR, "OFF": logging.CRITICAL + 10}


def setLogLevel(level) -> None:  # noqa: N802
    """TRACE, DEBUG, INFO, WARN, ERR or OFF (or an int logging level)."""
    if isinstance(level, int):
        logger.setLevel(level)
        return
    name = str(level).upper()
    if name not in _LEVELS:
        raise ValueError(f"Unknown log level {level!r}: use one of {sorted(_LEVELS)}")
    logger.setLevel(_LEVELS[name])


if os.environ.get("POPTORCH_LOG_LEVEL"):
    try:
        setLogLevel(os.environ["POPTORCH_LOG_LEVEL"])
    except ValueError:
        pass
