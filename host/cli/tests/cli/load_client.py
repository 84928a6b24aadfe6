"""Load and faults against `skillhost serve --http`, with the official MCP Python SDK.

Usage: load_client.py URL SKILLS_DIR CALLS TAG [--killed]

TAG prefixes the ledger lines of this run, so runs never share an id.

Opens 10 streamable-HTTP sessions and starts CALLS tool calls at once across them:
6 in 10 to a wasm skill (`limits__echo`), 3 in 10 to a sandboxed FastMCP skill
(`probe-load__append`, which appends the call's id to a ledger file), 1 in 10 to a wasm
skill whose skill.toml is rewritten (hot reload) five times during the run. Meanwhile
other skills crash their sandboxed server, hang past their deadline and spin past it.

Prints one JSON line of facts. Without `--killed` any lost, failed or crossed call
fails the run; with it (the host is killed mid-run) calls may fail, and the facts say
which ids succeeded so the test can hold them against the ledger.
"""

import asyncio
import json
import os
import sys
import time

import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

SESSIONS = 10
# When each call was answered (monotonic seconds).
answered = []


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


def plan(i, tag):
    """The tool, arguments and expected answer of call `i`."""
    kind = i % 10
    if kind < 6:
        return "limits__echo", {"value": i}, lambda out: json.loads(out) == i
    if kind < 9:
        line = f"{tag}{i}"
        return "probe-load__append", {"path": "/data/ledger", "line": line}, lambda out: json.loads(out) == {"line": line}
    return "reloaded__echo", {"value": i}, lambda out: json.loads(out) == i


async def one(session, i, tag, outcome):
    tool, args, expected = plan(i, tag)
    try:
        result = await asyncio.wait_for(session.call_tool(tool, args), 120)
    except BaseException as e:  # noqa: BLE001 - every failure is counted, none hidden
        outcome[i] = ("exception", f"{tool}: {type(e).__name__}: {e}")
        return
    out = text_of(result)
    answered.append(time.monotonic())
    if len(answered) == 1:
        print("first answer", file=sys.stderr, flush=True)
    if result.is_error:
        outcome[i] = ("error", f"{tool}: {out}")
    elif not expected(out):
        outcome[i] = ("crossed", f"{tool} {args} answered {out}")
    else:
        outcome[i] = ("ok", tool)


async def faults(session, errors):
    """Crashes, hangs and spins in other skills while the load runs."""
    calls = [("probe-fault__crash", {"code": 3})] * 3 + [("probe-fault__hang", {})] * 2 + [("limits-fault__spin", {})] * 3
    results = await asyncio.gather(*(session.call_tool(t, a) for t, a in calls), return_exceptions=True)
    for (tool, _), result in zip(calls, results):
        if isinstance(result, BaseException):
            errors.append(f"{tool}: {type(result).__name__}: {result}")
        elif not result.is_error:
            errors.append(f"{tool} succeeded: {text_of(result)}")


async def reloads(skills):
    manifest = os.path.join(skills, "reloaded", "skill.toml")
    original = open(manifest).read()
    for n in range(5):
        await asyncio.sleep(0.3)
        with open(manifest + ".tmp", "w") as f:
            f.write(original.replace("description = \"", f"description = \"(revision {n}) ", 1))
        os.replace(manifest + ".tmp", manifest)


async def main():
    url, skills, calls, tag = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    killed = "--killed" in sys.argv
    outcome = {}
    fault_errors = []
    started = time.monotonic()
    try:
        async with contextlib_sessions(url) as sessions:
            print("started", file=sys.stderr, flush=True)
            started = time.monotonic()
            work = [one(sessions[i % SESSIONS], i, tag, outcome) for i in range(calls)]
            if not killed:
                work += [faults(sessions[0], fault_errors), reloads(skills)]
            await asyncio.gather(*work)
    except BaseException as e:  # noqa: BLE001 - a killed host tears the sessions down
        if not killed:
            raise
        print(f"sessions ended: {type(e).__name__}: {e}", file=sys.stderr)
    elapsed = time.monotonic() - started
    for i in range(calls):
        outcome.setdefault(i, ("unanswered", "no answer before the sessions ended"))
    counts = {}
    for status, _ in outcome.values():
        counts[status] = counts.get(status, 0) + 1
    problems = [f"{i}: {detail}" for i, (status, detail) in sorted(outcome.items()) if status != "ok"]
    facts = {
        "calls": calls,
        "answered": len(outcome),
        "counts": counts,
        "seconds": round(elapsed, 2),
        "first_answer_s": round(min(answered) - started, 2) if answered else None,
        "median_answer_s": round(sorted(answered)[len(answered) // 2] - started, 2) if answered else None,
        "ok_appends": sorted(f"{tag}{i}" for i, (s, t) in outcome.items() if s == "ok" and t == "probe-load__append"),
        "fault_calls_that_did_not_fail": fault_errors if not killed else [],
        "problems": problems[:20],
    }
    print(json.dumps(facts))


class contextlib_sessions:
    """SESSIONS MCP sessions over streamable HTTP, entered and left together."""

    def __init__(self, url):
        self.url = url
        self.clients = []

    async def __aenter__(self):
        sessions = []
        for _ in range(SESSIONS):
            http = httpx2.AsyncClient(timeout=120, limits=httpx2.Limits(max_connections=200, max_keepalive_connections=50),
                                      headers={"Authorization": f"Bearer {os.environ['SKILLHOST_MCP_TOKEN']}"})
            client = Client(streamable_http_client(self.url, http_client=http), read_timeout_seconds=120)
            self.clients.append(client)
            sessions.append(await client.__aenter__())
        return sessions

    async def __aexit__(self, *exc):
        for client in self.clients:
            try:
                await client.__aexit__(None, None, None)
            except BaseException:  # noqa: BLE001 - a killed host cannot end its sessions
                pass
        return False


if __name__ == "__main__":
    asyncio.run(main())
