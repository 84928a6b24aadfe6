"""{{name}}: a skillhost skill in Python, built with `skillhost build`.

Each `@tool` function is a tool: its type hints give the input schema, its docstring the
descriptions. componentize-py runs the `Guest` class imported below.
"""

from typing import TypedDict

from skillhost import Guest, log, tool  # noqa: F401 - `Guest` must be importable from app


class Greeting(TypedDict):
    greeting: str


@tool(read_only=True, idempotent=True, examples=[{"name": "Ada"}])
def hello(name: str) -> Greeting:
    """Greet someone by name.

    Args:
        name: Who to greet.
    """
    log.debug(f"greeting {name}")
    return {"greeting": f"Hello, {name}!"}
