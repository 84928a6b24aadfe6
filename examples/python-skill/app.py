"""py-words: word statistics, a skillhost skill written in Python.

`skillhost build examples/python-skill` turns this module into a component of the
`skillhost:skill` world with componentize-py. `Guest` implements the world's `guest`
interface; `host` is the world's `host` import (log, progress).
"""

import json
import os
import re
from collections import Counter

from componentize_py_types import Err
from wit_world import exports
from wit_world.imports import host
from wit_world.imports.types import (
    Annotations,
    CallError_Denied,
    CallError_Failed,
    CallError_InvalidInput,
    CallError_UnknownTool,
    Tool,
)

# Where the grant in skill.toml puts the skill's data dir.
DATA = "/data"

READ_ONLY = Annotations(read_only=True, destructive=False, idempotent=True, open_world=False)

STATS_SCHEMA = {
    "type": "object",
    "properties": {
        "words": {"type": "integer"},
        "lines": {"type": "integer"},
        "chars": {"type": "integer"},
        "top": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"word": {"type": "string"}, "count": {"type": "integer"}},
                "required": ["word", "count"],
            },
        },
    },
    "required": ["words", "lines", "chars", "top"],
}

TOOLS = [
    Tool(
        name="word_count",
        description="Count the words, lines and characters of a text and list its most frequent words.",
        input_schema=json.dumps({
            "type": "object",
            "properties": {
                "text": {"type": "string", "description": "The text to measure."},
                "top": {"type": "integer", "minimum": 0, "maximum": 100, "default": 3,
                        "description": "How many of the most frequent words to list."},
            },
            "required": ["text"],
        }),
        output_schema=json.dumps(STATS_SCHEMA),
        annotations=READ_ONLY,
        examples=[json.dumps({"text": "the cat and the hat", "top": 1})],
    ),
    Tool(
        name="read_note",
        description="Read a text file from the skill's data directory and measure it like word_count.",
        input_schema=json.dumps({
            "type": "object",
            "properties": {"path": {"type": "string", "description": "The file, relative to the data directory."}},
            "required": ["path"],
        }),
        output_schema=None,
        annotations=READ_ONLY,
        examples=[json.dumps({"path": "todo.txt"})],
    ),
]


def stats(text, top=3):
    words = re.findall(r"[\w']+", text.lower())
    ranked = sorted(Counter(words).items(), key=lambda item: (-item[1], item[0]))
    return {
        "words": len(words),
        "lines": len(text.splitlines()),
        "chars": len(text),
        "top": [{"word": w, "count": c} for w, c in ranked[:top]],
    }


def word_count(args):
    text, top = args.get("text"), args.get("top", 3)
    if not isinstance(text, str):
        raise Err(CallError_InvalidInput("`text` must be a string"))
    if not isinstance(top, int) or isinstance(top, bool) or not 0 <= top <= 100:
        raise Err(CallError_InvalidInput("`top` must be an integer from 0 to 100"))
    return stats(text, top)


def read_note(args):
    path = args.get("path")
    if not isinstance(path, str) or not path:
        raise Err(CallError_InvalidInput("`path` must be a non-empty string"))
    # Joined as given: the sandbox, not this code, decides what can be opened.
    full = os.path.join(DATA, path)
    host.log(host.Level.DEBUG, f"reading {full}")
    try:
        with open(full, encoding="utf-8") as f:
            text = f.read()
    except (PermissionError, FileNotFoundError, NotADirectoryError) as e:
        if os.path.normpath(full).startswith(DATA + "/") and os.path.isdir(DATA) and isinstance(e, FileNotFoundError):
            raise Err(CallError_Failed(f"no note `{path}` in the data directory"))
        raise Err(CallError_Denied(f"cannot read `{path}` ({e.strerror}): only files in the data directory can be read"))
    except UnicodeDecodeError:
        raise Err(CallError_Failed(f"`{path}` is not UTF-8 text"))
    return {"path": path, "text": text, **stats(text)}


HANDLERS = {"word_count": word_count, "read_note": read_note}


class Guest(exports.Guest):
    """The skill's tools and how to run them."""

    def tools(self):
        return TOOLS

    def call(self, tool, input):
        handler = HANDLERS.get(tool)
        if handler is None:
            raise Err(CallError_UnknownTool(tool))
        try:
            args = json.loads(input)
        except ValueError as e:
            raise Err(CallError_InvalidInput(f"the input is not JSON: {e}"))
        if not isinstance(args, dict):
            raise Err(CallError_InvalidInput("the input must be a JSON object"))
        try:
            return json.dumps(handler(args))
        except Err:
            raise
        except Exception as e:
            # Anything else raised would abort the instance: report it as a failure.
            raise Err(CallError_Failed(f"{type(e).__name__}: {e}"))
