"""Whether the SDK runs inside a component, and the host's services either way.

Inside a component built by componentize-py the generated ``wit_world`` bindings and
the ``componentize_py_runtime`` module exist; ``IN_COMPONENT`` is then true and logging
and progress go to the host's ``host`` interface. Anywhere else (a skill's native unit
tests) they go to stderr, so the same code runs under plain CPython.
"""

from __future__ import annotations

import sys
from typing import Optional

try:  # Only a component has the runtime module (the bindings ship a .pyi stub of it).
    import componentize_py_runtime  # noqa: F401
    from wit_world.imports import host as _host

    IN_COMPONENT = True
except ImportError:
    _host = None
    IN_COMPONENT = False

LEVELS = ("trace", "debug", "info", "warn", "error")


def log(level: str, message: str) -> None:
    """Writes one line to the host log (stderr natively) at ``level``, one of ``LEVELS``."""
    if level not in LEVELS:
        raise ValueError(f"unknown log level {level!r}: use one of {', '.join(LEVELS)}")
    message = str(message)
    if _host is not None:
        _host.log(getattr(_host.Level, level.upper()), message)
    else:
        print(f"[{level}] {message}", file=sys.stderr)


def progress(done: int, total: Optional[int] = None, message: Optional[str] = None) -> None:
    """Reports ``done`` out of ``total`` units (unknown when ``None``) with an optional message.

    Goes to the host's ``progress`` (stderr natively); calling it never fails the tool.
    """
    done = max(0, int(done))
    total = None if total is None else max(0, int(total))
    message = None if message is None else str(message)
    if _host is not None:
        _host.progress(done, total, message)
    else:
        shown = f"{done}/{total}" if total is not None else f"{done}"
        print(f"[progress] {shown}" + (f" {message}" if message else ""), file=sys.stderr)
