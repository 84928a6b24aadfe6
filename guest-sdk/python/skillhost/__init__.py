"""skillhost guest SDK for Python: write a skill's tools as plain typed functions.

    from skillhost import tool, ToolError, files, http, log, progress, Guest

    @tool(read_only=True, examples=[{"name": "Ada"}])
    def hello(name: str) -> dict:
        \"\"\"Greet someone by name.

        Args:
            name: Who to greet.
        \"\"\"
        return {"greeting": f"Hello, {name}!"}

``app.py`` must import ``Guest`` (componentize-py looks for a class ``Guest`` in module
``app``); it implements the ``skillhost:skill`` world's ``guest`` interface over every
``@tool``. Input is checked against the type hints before the call; the output is always a
JSON object (a non-object return value ``v`` is sent as ``{"result": v}``).

Outside a component (plain CPython, for unit tests) everything works the same: ``Guest()``
runs the functions directly, ``log``/``progress`` write to stderr, and ``files`` reads the
directory set with ``files.with_data_dir(path)``.

Outbound HTTP: ``http.get``/``http.post``/``http.request`` go over ``wasi:http`` through
the host's egress gate, for a skill whose skill.toml asks for hosts (``skillhost build``
then builds it against the world that imports ``wasi:http``); a host the grant refuses is
``ToolError.denied`` naming it. Python's own sockets are refused in the sandbox.
"""

from . import files, http, log
from ._runtime import IN_COMPONENT, progress
from ._tool import Annotations, Guest, ToolInfo, registered, tool
from .errors import ToolError

__all__ = ["tool", "ToolError", "files", "http", "log", "progress", "Guest", "Annotations", "ToolInfo", "registered", "IN_COMPONENT"]
