"""Files in the directories the skill was granted.

A skill asks for directories in its ``skill.toml``::

    [[capabilities.files]]
    path = "."      # relative to the skill's data directory
    mode = "ro"     # or "rw"

The host pre-opens each granted directory at ``DATA_DIR`` (``/data``, for ``path = "."``)
or below it (``path = "reports"`` is ``/data/reports``); nothing else exists for the
skill. The helpers take paths *relative to* the data directory, refuse absolute paths and
``..``, and turn the sandbox's refusals into ``ToolError.denied`` errors that name the path
and the ``[[capabilities.files]]`` grant that is missing.

For anything they do not cover, resolve the path with :func:`path` and use ``open``
yourself; :func:`io_error` gives the same messages.

Outside a component (a skill's native unit tests) ``with_data_dir(dir)`` points the
helpers at a directory: called alone it sets it, used as ``with files.with_data_dir(dir):``
it restores the previous one on leaving the block.
"""

from __future__ import annotations

import errno
import os
import posixpath
from typing import List, Optional, Union

from . import _runtime
from .errors import ToolError

#: Where the skill's data directory is mounted inside the sandbox.
DATA_DIR = "/data"

_test_data_dir: Optional[str] = None
# Refusals by the sandbox: permission, read-only, or a path no pre-opened directory covers
# (WASI's ENOTCAPABLE is 76).
_REFUSALS = {errno.EACCES, errno.EPERM, errno.EROFS, getattr(errno, "ENOTCAPABLE", 76), 76}


class with_data_dir:
    """Points the helpers at ``directory`` (native tests only; the sandbox's is ``/data``).

    ``files.with_data_dir(d)`` sets it until changed; ``with files.with_data_dir(d):``
    sets it for the block and restores the previous one after.
    """

    def __init__(self, directory: Union[str, os.PathLike]):
        global _test_data_dir
        if _runtime.IN_COMPONENT:
            raise RuntimeError(f"with_data_dir is for native tests: inside a component the data directory is {DATA_DIR}")
        self._previous = _test_data_dir
        _test_data_dir = os.path.abspath(os.fspath(directory))

    def __enter__(self) -> str:
        return _data_dir()

    def __exit__(self, *exc) -> None:
        global _test_data_dir
        _test_data_dir = self._previous


def _data_dir() -> str:
    return _test_data_dir if _test_data_dir is not None else DATA_DIR


def path(relative: str) -> str:
    """Resolves ``relative`` inside the data directory (``""`` and ``"."`` are the directory).

    Absolute paths and paths using ``..`` are refused with ``ToolError.denied``: a tool's
    input often comes from an agent, and the path is checked here before the sandbox
    checks it again.
    """
    relative = os.fspath(relative)
    if relative.startswith("/") or relative.startswith("\\"):
        raise ToolError.denied(
            f"path `{relative}` is absolute: give a path relative to the skill's data directory ({DATA_DIR})"
        )
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise ToolError.denied(
            f"path `{relative}` uses `..`: paths are relative to the skill's data directory and cannot leave it"
        )
    return posixpath.join(_data_dir(), *parts) if parts else _data_dir()


def _granted(full: str) -> bool:
    """Whether a directory above ``full``, up to the data directory, is visible: the sandbox
    shows only granted directories, so with no grant covering it not even the data directory exists."""
    root = _data_dir()
    current = posixpath.dirname(full)
    while current == root or current.startswith(root.rstrip("/") + "/"):
        if os.path.isdir(current):
            return True
        if current == root:
            break
        current = posixpath.dirname(current)
    return False


def io_error(relative: str, write: bool, error: OSError) -> ToolError:
    """Turns an ``OSError`` on ``relative`` into a :class:`ToolError` that names it.

    Refusals by the sandbox become ``denied`` with a hint about the ``[[capabilities.files]]``
    grant the skill needs (``mode = "rw"`` when ``write``); a missing file is ``failed``.
    """
    shown = relative or "."
    reason = error.strerror or str(error)
    if isinstance(error, PermissionError) or error.errno in _REFUSALS:
        mode = ' with mode = "rw"' if write else ""
        return ToolError.denied(
            f"access to `{shown}` in the data directory was refused ({reason}): the skill needs "
            f"a [[capabilities.files]] grant covering it{mode} in skill.toml"
        )
    if isinstance(error, FileNotFoundError) or error.errno == errno.ENOENT:
        try:
            full = path(relative)
        except ToolError as e:
            return e
        if not _granted(full):
            directory = posixpath.dirname(shown.strip("/")) or "."
            mode = "rw" if write else "ro"
            return ToolError.denied(
                f"`{shown}` is outside the skill's granted files: no [[capabilities.files]] grant covers "
                f"{full}; add one to skill.toml ([[capabilities.files]] path = \"{directory}\" mode = \"{mode}\"), "
                "rebuild the skill and approve it again"
            )
        return ToolError.failed(f"`{shown}` does not exist in the data directory")
    return ToolError.failed(f"`{shown}`: {reason}")


def read_bytes(relative: str) -> bytes:
    """Reads a file's bytes."""
    full = path(relative)
    try:
        with open(full, "rb") as f:
            return f.read()
    except OSError as e:
        raise io_error(relative, False, e) from None


def read_text(relative: str, encoding: str = "utf-8") -> str:
    """Reads a text file (UTF-8 unless ``encoding`` says otherwise)."""
    data = read_bytes(relative)
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as e:
        raise ToolError.failed(f"`{relative}` is not {encoding} text: {e}") from None


def write(relative: str, contents: Union[str, bytes]) -> None:
    """Writes a file (text as UTF-8), creating its parent directories and replacing any file there."""
    full = path(relative)
    data = contents.encode("utf-8") if isinstance(contents, str) else bytes(contents)
    try:
        if not os.path.isdir(_data_dir()):
            # The data directory is the sandbox's to show (it does when a grant covers any of
            # it); creating it would hide a missing grant in native tests.
            raise FileNotFoundError(errno.ENOENT, "No such file or directory", full)
        parent = posixpath.dirname(full)
        if parent and not os.path.isdir(parent):
            os.makedirs(parent, exist_ok=True)
        with open(full, "wb") as f:
            f.write(data)
    except OSError as e:
        raise io_error(relative, True, e) from None


def list(relative_dir: str = ".") -> List[str]:  # noqa: A001 - mirrors the Rust SDK's `files::list`
    """Lists the names in a directory, sorted; directories end with ``/``."""
    full = path(relative_dir)
    try:
        names = []
        with os.scandir(full) as entries:
            for entry in entries:
                names.append(entry.name + "/" if entry.is_dir() else entry.name)
    except OSError as e:
        raise io_error(relative_dir, False, e) from None
    return sorted(names)
