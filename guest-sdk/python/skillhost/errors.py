"""Errors a tool reports to its caller.

A tool raises :class:`ToolError` to say why it produced no output; the SDK turns it
into the world's ``call-error`` variant:

* ``ToolError.invalid_input(msg)``: the input was not valid (name the field and why);
* ``ToolError.failed(msg)``: the tool ran and failed (say what failed);
* ``ToolError.denied(msg)``: the tool was refused something it needs (a file, a host);
  name what was refused so a human can decide to grant it.

Any other exception escaping a tool becomes ``failed`` with ``TypeName: message``.
"""

from __future__ import annotations

#: The kinds of ``call-error`` in the ``skillhost:skill`` world, as the SDK names them.
KINDS = ("invalid-input", "failed", "denied", "unknown-tool")


class ToolError(Exception):
    """Why a tool call did not produce an output: a ``kind`` and a message for the caller."""

    def __init__(self, kind: str, message: str):
        if kind not in KINDS:
            raise ValueError(f"unknown ToolError kind {kind!r}: use one of {', '.join(KINDS)}")
        super().__init__(message)
        self.kind = kind
        self.message = message

    @classmethod
    def invalid_input(cls, message: str) -> "ToolError":
        """The input was not valid for the tool; the message says which field and why."""
        return cls("invalid-input", message)

    @classmethod
    def failed(cls, message: str) -> "ToolError":
        """The tool ran and failed; the message says what failed."""
        return cls("failed", message)

    @classmethod
    def denied(cls, message: str) -> "ToolError":
        """The tool was refused something it needs; the message names what was refused."""
        return cls("denied", message)

    @classmethod
    def unknown_tool(cls, name: str) -> "ToolError":
        """No tool of that name exists in this skill (raised by the SDK's dispatcher)."""
        return cls("unknown-tool", name)

    def __repr__(self) -> str:
        return f"ToolError({self.kind!r}, {self.message!r})"

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"
