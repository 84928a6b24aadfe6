"""A stdio MCP server written against the protocol alone (standard library only), for
skillhost's adversarial tests: unlike an SDK, it sends whatever it is told to, so it can
break the output schema it declares. It also names a tool in camelCase, as many
third-party servers do, and answers `page` as mcp-server-fetch does (plain text that is
not JSON) with an image beside it. A `tools.json` beside it, written by a test, replaces
the tools it lists (say, with descriptions that hold terminal controls).
"""
import json
import os
import sys

COUNT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}

TOOLS = [
    {
        "name": "count",
        "description": "Count things; `mode` picks how the answer lies.",
        "inputSchema": {
            "type": "object",
            "properties": {"mode": {"type": "string"}},
            "required": ["mode"],
        },
        "outputSchema": COUNT_SCHEMA,
    },
    {
        "name": "page",
        "description": "A page's text, not JSON, and a picture of it.",
        "inputSchema": {"type": "object", "properties": {}},
    },
    {
        "name": "addNumbers",
        "description": "Add two numbers.",
        "inputSchema": {
            "type": "object",
            "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
            "required": ["a", "b"],
        },
    },
]

# What `page` answers: text that is not JSON (quotes and a newline included) and a
# 1x1 PNG.
PAGE = [
    {"type": "text", "text": 'Content type text/html cannot be simplified to markdown:\n<p class="x">"hi"</p>'},
    {
        "type": "image",
        "mimeType": "image/png",
        "data": "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==",
    },
]

# What `count` answers in each mode: (structuredContent or None, text content).
ANSWERS = {
    "honest": ({"count": 3}, '{"count": 3}'),
    "wrong_type": ({"count": "many"}, '{"count": "many"}'),
    "missing_field": ({"total": 3}, '{"total": 3}'),
    "not_an_object": ([1, 2, 3], "[1, 2, 3]"),
    "text_not_json": (None, "three, more or less"),
}


def call(name, arguments):
    if name == "count":
        structured, text = ANSWERS[arguments["mode"]]
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        if structured is not None:
            result["structuredContent"] = structured
        return result
    if name == "page":
        return {"content": PAGE, "isError": False}
    if name == "addNumbers":
        total = arguments["a"] + arguments["b"]
        return {"content": [{"type": "text", "text": json.dumps(total)}], "isError": False}
    return None


def listed_tools():
    override = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tools.json")
    if os.path.exists(override):
        with open(override, encoding="utf-8") as f:
            return json.load(f)
    return TOOLS


def answer(message):
    method, params = message.get("method"), message.get("params") or {}
    if method == "initialize":
        return {
            "protocolVersion": params.get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "raw-server", "version": "0.1.0"},
        }, None
    if method == "ping":
        return {}, None
    if method == "tools/list":
        return {"tools": listed_tools()}, None
    if method == "tools/call":
        result = call(params.get("name"), params.get("arguments") or {})
        if result is None:
            return None, {"code": -32602, "message": f"unknown tool {params.get('name')}"}
        return result, None
    return None, {"code": -32601, "message": f"method not found: {method}"}


def main():
    for line in sys.stdin:
        if not line.strip():
            continue
        message = json.loads(line)
        if "id" not in message:
            continue  # a notification: nothing to answer
        result, error = answer(message)
        reply = {"jsonrpc": "2.0", "id": message["id"]}
        if error is None:
            reply["result"] = result
        else:
            reply["error"] = error
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
