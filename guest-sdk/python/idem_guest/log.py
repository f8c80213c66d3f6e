"""Log lines to the host's run log (never hashed: logging does not change a
run's output digest). ``log.info("rows", n)`` joins its arguments like print.

Outside the sandbox (native tests) lines go to stderr when the environment
variable ``IDEM_GUEST_LOG`` is set, as in the Rust SDK.
"""

import os
import sys

__all__ = ["debug", "info", "warn", "warning", "error", "log", "DEBUG", "INFO", "WARN", "ERROR"]

DEBUG, INFO, WARN, ERROR = 0, 1, 2, 3
_NAMES = ("Debug", "Info", "Warn", "Error")

#: Set by the component glue to ``callable(level, message)``.
_sink = None


def log(level, *args, sep=" "):
    """Write one line at ``level`` (DEBUG, INFO, WARN or ERROR)."""
    message = sep.join(map(str, args))
    if _sink is not None:
        _sink(level, message)
    elif os.environ.get("IDEM_GUEST_LOG"):
        sys.__stderr__.write("[guest %s] %s\n" % (_NAMES[level], message))


def debug(*args, sep=" "):
    log(DEBUG, *args, sep=sep)


def info(*args, sep=" "):
    log(INFO, *args, sep=sep)


def warn(*args, sep=" "):
    log(WARN, *args, sep=sep)


warning = warn


def error(*args, sep=" "):
    log(ERROR, *args, sep=sep)
