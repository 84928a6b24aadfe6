"""{{name}}: a skillhost skill in Python, built with `skillhost build`.

componentize-py turns this module into a component of the `skillhost:skill` world: the
`Guest` class below implements its `guest` interface. Each call runs in a fresh instance.
"""

import json

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import Annotations, CallError_Failed, CallError_InvalidInput, CallError_UnknownTool, Tool

HELLO = Tool(
    name="hello",
    description="Greet someone by name.",
    input_schema=json.dumps({
        "type": "object",
        "properties": {"name": {"type": "string", "description": "Who to greet."}},
        "required": ["name"],
    }),
    output_schema=json.dumps({
        "type": "object",
        "properties": {"greeting": {"type": "string"}},
        "required": ["greeting"],
    }),
    annotations=Annotations(read_only=True, destructive=False, idempotent=True, open_world=False),
    examples=[json.dumps({"name": "Ada"})],
)


def hello(args):
    name = args.get("name") if isinstance(args, dict) else None
    if not isinstance(name, str):
        raise Err(CallError_InvalidInput("`name` must be a string"))
    host.log(host.Level.DEBUG, f"greeting {name}")
    return {"greeting": f"Hello, {name}!"}


class Guest(exports.Guest):
    """The skill's tools and how to run them."""

    def tools(self):
        return [HELLO]

    def call(self, tool, input):
        if tool != "hello":
            raise Err(CallError_UnknownTool(tool))
        try:
            args = json.loads(input)
        except ValueError as e:
            raise Err(CallError_InvalidInput(f"the input is not JSON: {e}"))
        try:
            return json.dumps(hello(args))
        except Err:
            raise
        except Exception as e:
            # Anything else raised would abort the instance: report it as a failure.
            raise Err(CallError_Failed(f"{type(e).__name__}: {e}"))
