"""Connects to `skillhost serve` as an agent's MCP client would on its first start: the
official MCP Python SDK (PyPI `mcp` 2.x), a read timeout of 30 s on every request (the
handshake included, and it is never retried), then a tool list and one call each of a
wasm tool and a Python component's tool. A call answered with an error or not answered
within the timeout (a skill still loading) is made again after the next
`notifications/tools/list_changed`, or a second without one, as a client would.

Usage: startup_client.py MODE SKILLHOST SKILLS_DIR DATA_DIR

MODE is `legacy` (the `initialize` handshake) or `auto` (the SDK's default:
`server/discover`, falling back to `initialize`). Prints one JSON line of facts; any
failure exits non-zero with the reason.
"""

import json
import os
import sys
import time
from contextlib import AsyncExitStack

import anyio
from mcp import Client, StdioServerParameters

# The client's own timeout for each request: what agents' clients give a server.
READ_TIMEOUT = 30
# A guard against a server that never gets there: the calls give up after this.
GIVE_UP = 300

WASM_TOOL = ("text-tools__slugify", {"text": "Hello, World!"})
PYTHON_TOOL = ("py-words__word_count", {"text": "the cat and the hat", "top": 1})


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


def value_of(result):
    if result.structured_content is not None:
        return result.structured_content
    try:
        return json.loads(text_of(result))
    except ValueError:
        return text_of(result)


class Changes:
    """Counts `notifications/tools/list_changed`."""

    def __init__(self):
        self.count = 0

    async def on_message(self, message):
        method = getattr(getattr(message, "root", message), "method", None) or getattr(message, "method", None)
        if method == "notifications/tools/list_changed":
            self.count += 1

    async def after(self, seen, seconds):
        """Wait until a change past `seen` arrives, or `seconds` pass."""
        with anyio.move_on_after(seconds):
            while self.count <= seen:
                await anyio.sleep(0.05)


async def call_until_ok(client, changes, started, tool, args):
    """Call until the call succeeds; the result and every failed attempt."""
    failures = []
    while True:
        seen = changes.count
        try:
            result = await client.call_tool(tool, args)
            if not result.is_error:
                return result, failures
            failures.append(f"isError: {text_of(result)[:300]}")
        except Exception as e:  # noqa: BLE001 - a timeout or an error answer: try again
            failures.append(f"{type(e).__name__}: {str(e)[:300]}")
        if time.monotonic() - started > GIVE_UP:
            fail(f"{tool} did not succeed within {GIVE_UP} s; attempts: {failures}")
        await changes.after(seen, 1.0)


async def main(mode, exe, skills, data):
    passed = ("SKILLHOST_VENV", "PATH", "SKILLHOST_MODEL_DIR")
    params = StdioServerParameters(
        command=exe,
        args=["--skills", skills, "--data-dir", data, "serve"],
        env={"SKILLHOST_LOG": "warn", **{k: v for k, v in os.environ.items() if k in passed}},
    )
    changes = Changes()
    client = Client(params, mode=mode, message_handler=changes.on_message, read_timeout_seconds=READ_TIMEOUT)
    facts = {"mode": mode}
    started = time.monotonic()
    async with AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(client)
        except Exception as e:  # noqa: BLE001 - the handshake's failure is the test's
            fail(f"the {mode} handshake failed {time.monotonic() - started:.1f} s after spawning skillhost serve "
                 f"(the client's read timeout is {READ_TIMEOUT} s): {type(e).__name__}: {e!r}")
        facts["handshake_s"] = round(time.monotonic() - started, 3)
        facts["protocol"] = client.protocol_version

        tools = [t.name for t in (await client.list_tools()).tools]
        for name in ["tool_search", "skill_list"]:
            if name not in tools:
                fail(f"{name} not listed: {tools}")
        facts["first_list"] = len(tools)

        result, failures = await call_until_ok(client, changes, started, *WASM_TOOL)
        if value_of(result) != {"text": "hello-world"}:
            fail(f"slugify answered {value_of(result)!r}")
        facts["wasm_call_s"] = round(time.monotonic() - started, 3)
        facts["wasm_failed_attempts"] = failures

        result, failures = await call_until_ok(client, changes, started, *PYTHON_TOOL)
        counted = value_of(result)
        if not isinstance(counted, dict) or counted.get("words") != 5:
            fail(f"word_count answered {counted!r}")
        facts["python_call_s"] = round(time.monotonic() - started, 3)
        facts["python_failed_attempts"] = failures

        facts["list_changed"] = changes.count
        print(json.dumps(facts))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:5])
