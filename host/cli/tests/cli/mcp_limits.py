"""Sends `skillhost serve` (stdio) a `skill_run` whose input is under the documented cap
but whose message is longer than rmcp's stdio line limit, with the official MCP Python
SDK (PyPI `mcp` 2.x).

Usage: mcp_limits.py MODE SKILLHOST SKILLS_DIR DATA_DIR SKILL MIB

MODE is `auto` (`server/discover`) or `legacy` (`initialize`). Runs SKILL's
`scripts/size.sh in.bin` with MIB MiB of random bytes as `in.bin` (base64, as the tool's
schema says), checks that the script saw every byte (its size and SHA-256 on stdout) and
that the answer lists the file with the same digest, then checks that the session still
answers. The whole exchange is bounded: a request that is never answered fails here
rather than hanging the test. Prints one JSON line of facts; any failure exits non-zero
with the reason.
"""

import base64
import hashlib
import json
import os
import sys
import time

import anyio
from mcp import Client, StdioServerParameters


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


async def main(mode, exe, skills, data, skill, mib):
    params = StdioServerParameters(
        command=exe,
        args=["--skills", skills, "--data-dir", data, "serve"],
        env={"SKILLHOST_LOG": "warn", **{k: v for k, v in os.environ.items() if k in ("SKILLHOST_VENV", "PATH")}},
    )
    payload = os.urandom(int(float(mib) * (1 << 20)))
    encoded = base64.b64encode(payload).decode()
    arguments = {"skill": skill, "command": ["sh", "scripts/size.sh", "in.bin"], "inputs": [{"path": "in.bin", "base64": encoded}]}
    message_bytes = len(json.dumps(arguments))
    async with Client(params, mode=mode, read_timeout_seconds=150) as client:
        started = time.monotonic()
        try:
            with anyio.fail_after(170):
                result = await client.call_tool("skill_run", arguments)
        except TimeoutError:
            fail(f"skill_run with {mib} MiB of input ({message_bytes} bytes of arguments) got no answer in 170 s")
        seconds = time.monotonic() - started
        texts = " ".join(getattr(c, "text", "") for c in result.content)
        check(not result.is_error, f"skill_run failed: {texts}")
        answer = result.structured_content
        check(answer is not None and answer["exit_code"] == 0, f"the run: {answer}")
        digest = hashlib.sha256(payload).hexdigest()
        check(answer["stdout"] == f"{len(payload)}\n{digest}\n", f"the script saw other bytes: {answer['stdout']!r} {answer['stderr']!r}")
        # The input, left as it came, is named and not sent back (the script's own line
        # above says it saw every byte).
        check(answer["unchanged_inputs"] == ["in.bin"] and answer["files"] == [], f"files: {answer['files']} {answer['unchanged_inputs']}")
        with anyio.fail_after(30):
            tools = (await client.list_tools()).tools
        check(any(t.name == "skill_run" for t in tools), "the session answers after the large call")
        print(json.dumps({"input_bytes": len(payload), "message_bytes": message_bytes, "seconds": round(seconds, 2)}))


if __name__ == "__main__":
    anyio.run(main, *sys.argv[1:7])
