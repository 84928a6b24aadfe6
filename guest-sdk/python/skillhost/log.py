"""Logging to the host log, tagged by the host with the skill and tool.

``log.debug/info/warn/error(message)`` (and ``trace``) write one line each. The host caps
how much a call may log; past the cap lines are dropped and one notice says how many.
Outside a component (native tests) the lines go to stderr as ``[level] message``.
"""

from __future__ import annotations

from ._runtime import log as _log


def trace(message: str) -> None:
    """Fine-grained detail."""
    _log("trace", message)


def debug(message: str) -> None:
    """Detail useful when debugging a skill."""
    _log("debug", message)


def info(message: str) -> None:
    """Normal progress."""
    _log("info", message)


def warn(message: str) -> None:
    """Something unexpected that the skill handled."""
    _log("warn", message)


def error(message: str) -> None:
    """Something failed."""
    _log("error", message)
