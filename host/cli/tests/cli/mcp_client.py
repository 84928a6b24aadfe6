"""Drives `skillhost serve` with the official MCP Python SDK (PyPI `mcp` 2.x).

Usage: mcp_client.py SCENARIO MODE SKILLHOST SKILLS_DIR DATA_DIR [ARG]

MODE is `auto` (the SDK's default: `server/discover`, protocol 2026-07-28) or `legacy`
(the `initialize` handshake). Each scenario asserts what the MCP front must do and
prints one JSON line of facts for the Rust test; any failure exits non-zero with the
reason.
"""

import asyncio
import json
import os
import shutil
import sys
import time

import anyio
from mcp import Client, MCPError, StdioServerParameters, types


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def text_of(result):
    return "".join(getattr(block, "text", "") for block in result.content)


def value_of(result):
    """What the tool returned: its text read as JSON, or the text itself (a string value
    arrives as its own text, not quoted)."""
    text = text_of(result)
    try:
        return json.loads(text)
    except ValueError:
        return text


class Server:
    def __init__(self, mode, exe, skills, data, extra=()):
        self.mode = mode
        self.params = StdioServerParameters(
            command=exe,
            args=["--skills", skills, "--data-dir", data, "serve", *extra],
            env={"SKILLHOST_LOG": "warn", **{k: v for k, v in os.environ.items() if k in ("SKILLHOST_VENV", "PATH")}},
        )
        self.changes = 0
        self.elicitations = []
        self.answer = None

    async def on_message(self, message):
        method = getattr(getattr(message, "root", message), "method", None) or getattr(message, "method", None)
        if method == "notifications/tools/list_changed":
            self.changes += 1

    async def on_elicit(self, context, params):
        self.elicitations.append(params.message)
        if self.answer is None:
            return types.ErrorData(code=-32601, message="no elicitation in this test")
        return types.ElicitResult(action=self.answer[0], content=self.answer[1])

    def client(self, elicitation=False):
        return Ready(self, Client(
            self.params,
            mode=self.mode,
            message_handler=self.on_message,
            elicitation_callback=self.on_elicit if elicitation else None,
            read_timeout_seconds=60,
        ))


async def wait_ready(client, seconds=180):
    """Wait until every skill found at start has loaded: `serve` answers before its
    skills load, and `skill_list` names those still loading."""
    with anyio.fail_after(seconds):
        while True:
            listed = await client.call_tool("skill_list", {})
            if "loading" not in (listed.structured_content or {}):
                return
            await anyio.sleep(0.1)


class Ready:
    """A client session that starts once the server's skills have loaded (list changes
    seen while they loaded are not counted)."""

    def __init__(self, server, client):
        self.server = server
        self.inner = client

    async def __aenter__(self):
        client = await self.inner.__aenter__()
        await wait_ready(client)
        self.server.changes = 0
        return client

    async def __aexit__(self, *exc):
        return await self.inner.__aexit__(*exc)


async def basics(server, _arg):
    async with server.client() as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        for name in ["tool_search", "skill_list", "skill_search", "skill_get", "read_skill_resource", "limits__echo"]:
            check(name in tools, f"{name} not listed: {sorted(tools)}")
        echo = tools["limits__echo"]
        check(echo.annotations is not None and echo.annotations.read_only_hint, f"annotations lost: {echo.annotations}")
        check(echo.output_schema is None, f"echo declares no output schema: {echo.output_schema}")
        result = await client.call_tool("limits__echo", {"value": {"a": 1}})
        check(not result.is_error, f"echo failed: {text_of(result)}")
        check(json.loads(text_of(result)) == {"a": 1}, f"text: {text_of(result)}")

        slug = tools["text-tools__slugify"]
        check(slug.output_schema and slug.output_schema.get("type") == "object", f"output schema: {slug.output_schema}")
        result = await client.call_tool("text-tools__slugify", {"text": "Hello, World!"})
        check(not result.is_error, text_of(result))
        check(result.structured_content == {"text": "hello-world"}, f"structured: {result.structured_content}")

        failed = await client.call_tool("limits__fail", {"kind": "failed"})
        check(failed.is_error, "a tool failure must be an isError result")
        check("limits" in text_of(failed) and "fail" in text_of(failed), f"failure text: {text_of(failed)}")

        steps = []

        async def on_progress(progress, total, message):
            steps.append((progress, total, message))

        result = await client.call_tool("limits__progress", {"steps": 3}, progress_callback=on_progress)
        check(not result.is_error, text_of(result))
        # The host forwards at most one report per interval, but always the last one.
        done = [s[0] for s in steps]
        check(done and done == sorted(set(done)) and steps[-1] == (3, 3, "step 3"), f"progress: {steps}")

        try:
            await client.call_tool("limits__nope", {})
            fail("an unknown tool must be a JSON-RPC error")
        except MCPError as e:
            unknown = str(e)

        skills = (await client.call_tool("skill_list", {})).structured_content["skills"]
        check([s["name"] for s in skills] == ["limits", "text-tools"], f"skill_list: {skills}")
        print(json.dumps({"protocol": client.protocol_version, "tools": len(tools), "progress": steps[-1][0], "unknown": unknown}))


async def cancel(server, _arg):
    async with server.client() as client:
        await client.list_tools()
        with anyio.move_on_after(0.5):
            await client.call_tool("limits__spin", {})
            fail("spin returned")
        cancelled = time.monotonic()
        # The skill allows one call at a time: this one runs only once spin is stopped.
        result = await client.call_tool("limits__counter", {})
        freed = time.monotonic() - cancelled
        check(not result.is_error, text_of(result))
        print(json.dumps({"freed_ms": round(freed * 1000)}))


async def list_changed(server, wasm):
    skills_dir = server.params.args[1]
    async with server.client() as client:
        before = {t.name for t in (await client.list_tools()).tools}
        check("limits__echo" not in before, f"limits listed before it was dropped in: {sorted(before)}")
        if client.protocol_version >= "2026-07-28":
            async with client.listen(tools_list_changed=True) as events:
                shutil.copy(wasm, f"{skills_dir}/limits.wasm")
                with anyio.fail_after(20):
                    async for _event in events:
                        break
        else:
            shutil.copy(wasm, f"{skills_dir}/limits.wasm")
            with anyio.fail_after(20):
                while server.changes == 0:
                    await anyio.sleep(0.05)
        after = {t.name for t in (await client.list_tools()).tools}
        check("limits__echo" in after, f"limits not listed after list_changed: {sorted(after)}")
        print(json.dumps({"protocol": client.protocol_version, "tools": len(after)}))


async def deferred(server, _arg):
    async with server.client() as client:
        listed = (await client.list_tools()).tools
        check(len(listed) <= 10, f"deferred tools/list should stay small, got {len(listed)}")
        found = await client.call_tool("tool_search", {"query": "echo the value", "limit": 5})
        hits = found.structured_content["tools"]
        check(len(hits) == 5, f"tool_search: {hits}")
        scores = [h["score"] for h in hits]
        check(all(0.0 <= s <= 1.0 for s in scores) and scores == sorted(scores, reverse=True), f"scores: {scores}")
        check(hits[0]["name"].endswith("__echo"), f"best hit: {hits[0]}")
        check(all(h["loading_mode"] == "deferred" for h in hits), f"loading modes: {hits}")
        names = {t.name for t in (await client.list_tools()).tools}
        check(all(h["name"] in names for h in hits), "tools found by tool_search must be listed afterwards")
        result = await client.call_tool(hits[0]["name"], {"value": 7})
        check(not result.is_error and json.loads(text_of(result)) == 7, text_of(result))
        # A deferred tool called by its exact name works, and is activated.
        direct = "pack-17__counter"
        check(direct not in names, f"{direct} listed before use")
        result = await client.call_tool(direct, {})
        check(not result.is_error, text_of(result))
        names = {t.name for t in (await client.list_tools()).tools}
        check(direct in names, f"{direct} not activated by its first use")
        print(json.dumps({"listed": len(listed), "after": len(names), "top": hits[0]}))


async def approval(server, answer):
    server.answer = ("accept", {"approve": True}) if answer == "accept" else ("decline", None)
    async with server.client(elicitation=True) as client:
        result = await client.call_tool("gated__echo", {"value": "hi"})
        check(len(server.elicitations) == 1, f"elicitations: {server.elicitations}")
        check("gated" in server.elicitations[0] and "127.0.0.1" in server.elicitations[0], server.elicitations[0])
        if answer == "accept":
            check(not result.is_error, text_of(result))
            check(text_of(result) == "hi", text_of(result))
            again = await client.call_tool("gated__echo", {"value": "again"})
            check(not again.is_error and len(server.elicitations) == 1, "an approved skill must not ask again")
        else:
            check(result.is_error and "skillhost approve gated" in text_of(result), text_of(result))
        print(json.dumps({"protocol": client.protocol_version, "error": result.is_error, "asked": server.elicitations[0]}))


async def run_approval(server, _arg):
    """A run of a SKILL.md skill's script no human approved yet: the client is asked (the
    question lists the package its script declares, resolved), the yes installs it, and
    the run that asked imports it."""
    server.answer = ("accept", {"approve": True})
    async with server.client(elicitation=True) as client:
        result = await client.call_tool("skill_run", {"skill": "tiny", "command": ["python", "scripts/use.py"]})
        check(len(server.elicitations) == 1, f"elicitations: {server.elicitations}")
        asked = server.elicitations[0]
        check("tiny" in asked and "tinypkg==1.2.3" in asked, asked)
        check(not result.is_error, text_of(result))
        answer = result.structured_content
        check(answer["exit_code"] == 0 and answer["stdout"] == "tiny 1.2.3\n", f"{answer}")
        again = await client.call_tool("skill_run", {"skill": "tiny", "command": ["python", "scripts/use.py"]})
        check(not again.is_error and len(server.elicitations) == 1, "an approved skill must not ask again")
        print(json.dumps({"protocol": client.protocol_version, "asked": asked, "stdout": answer["stdout"]}))


async def no_elicitation(server, _arg):
    async with server.client(elicitation=False) as client:
        result = await client.call_tool("gated__echo", {"value": "hi"})
        check(result.is_error and "skillhost approve gated" in text_of(result), text_of(result))
        print(json.dumps({"error": text_of(result)}))


async def knowledge(server, outside):
    folder = f"{server.params.args[1]}/limits"
    async with server.client() as client:
        await client.list_tools()
        os.symlink("/etc", f"{folder}/link")
        os.symlink(outside, f"{folder}/secret-link")
        got = (await client.call_tool("skill_get", {"names": ["limits"], "max_tokens": 200})).structured_content
        skill = got["skills"][0]
        check("limits__echo" in skill["requires"]["tools"], f"requires: {skill['requires']}")
        check(skill["truncated"] and len(skill["instructions"]) <= 800, f"budget: {len(skill['instructions'])}")
        check("SKILL.md" in skill["resources"], f"resources: {skill['resources']}")
        full = await client.call_tool("read_skill_resource", {"skill": "limits", "path": "SKILL.md"})
        check(not full.is_error and full.structured_content["text"].startswith("---"), text_of(full))
        for path in ["../limits/skill.toml", "/etc/passwd", "link/passwd", "secret-link"]:
            refused = await client.call_tool("read_skill_resource", {"skill": "limits", "path": path})
            check(refused.is_error and "refused" in text_of(refused), f"{path}: {text_of(refused)}")
        resources = (await client.list_resources()).resources
        check([str(r.uri) for r in resources] == ["skill://limits/SKILL.md"], f"resources: {resources}")
        read = await client.read_resource("skill://limits/SKILL.md")
        check(read.contents[0].text == full.structured_content["text"], "resource and read_skill_resource differ")
        found = (await client.call_tool("skill_search", {"query": "limits"})).structured_content["skills"]
        check(found and found[0]["name"] == "limits", f"skill_search: {found}")
        print(json.dumps({"instructions": len(skill["instructions"])}))


async def agent_skills(server, marker):
    """SKILL.md frontmatter, references/scripts/assets as resources, the L1 directory
    (instructions and the skills_directory prompt) and a skill pack, over MCP. `marker`
    is the file the skill's script would create if anything ran it."""
    async with server.client() as client:
        instructions = client.instructions or ""
        check("Skills (read one with skill_get" in instructions, f"instructions: {instructions!r}")
        # Instructions load at once and are in the directory from the start; `limits` is
        # listed for the first time (its component runs to list its tools) and may still
        # be loading when the server answers: then the instructions say so.
        for line in ["- core--login-basic: Standard website login without SSO.", "- notes: How we write release notes"]:
            check(line in instructions, f"{line!r} not in the instructions: {instructions!r}")
        check("- limits: " in instructions or "Still loading: limits" in instructions, f"limits is neither listed nor loading: {instructions!r}")
        check("core--no-steps" not in instructions, "a broken pack file is not in the directory")

        resources = {str(r.uri): r for r in (await client.list_resources()).resources}
        expected = {
            "skill://limits/SKILL.md": "text/markdown",
            "skill://limits/references/api.md": "text/markdown",
            "skill://limits/scripts/run.sh": "text/x-shellscript",
            "skill://limits/assets/logo.png": "image/png",
            "skill://notes/SKILL.md": "text/markdown",
            "skill://core--login-basic/SKILL.md": "text/markdown",
        }
        for uri, mime in expected.items():
            check(uri in resources and resources[uri].mime_type == mime, f"{uri} ({mime}) in {sorted(resources)}")
        check("skill://limits/notes.txt" not in resources and "skill://limits/skill.toml" not in resources,
              f"only SKILL.md and references/, scripts/, assets/ are listed: {sorted(resources)}")
        api = await client.read_resource("skill://limits/references/api.md")
        check(api.contents[0].text == "# API\nCall echo.\n", f"{api}")
        script = await client.read_resource("skill://limits/scripts/run.sh")
        check(script.contents[0].text.startswith("#!/bin/sh"), f"{script}")
        check(not os.path.exists(marker), "reading a script must never run it")
        logo = await client.read_resource("skill://limits/assets/logo.png")
        check(getattr(logo.contents[0], "blob", None) == "iVBORw0KGgr/AA==", f"binary assets are base64 blobs: {logo}")
        for uri in ["skill://limits/../limits/skill.toml", "skill://limits/references/../../x", "skill://nope/SKILL.md"]:
            try:
                await client.read_resource(uri)
                fail(f"{uri} was read")
            except MCPError as e:
                check("refused" in str(e) or "no skill" in str(e), f"{uri}: {e}")

        got = (await client.call_tool("skill_get", {"names": ["limits", "core--login-basic"]})).structured_content
        limits, login = got["skills"]
        check(limits["license"] == "Apache-2.0" and limits["metadata"] == {"author": "ada"}, f"{limits}")
        check(limits["allowed_tools"] == ["Read", "Grep"] and limits["compatibility"] == "needs nothing", f"{limits}")
        check(login["pack"] == {"name": "core", "version": "1.0.0", "seed_name": "pack.core.login_basic"}, f"{login}")
        check("1. Navigate to the login page." in login["instructions"], login["instructions"])
        found = (await client.call_tool("skill_search", {"query": "log into a website with a password"})).structured_content
        check(found["skills"] and found["skills"][0]["name"] == "core--login-basic", f"pack skills are searchable: {found}")

        prompts = (await client.list_prompts()).prompts
        check([p.name for p in prompts] == ["skills_directory"], f"{prompts}")
        small = await client.get_prompt("skills_directory", {"budget": "40"})
        text = small.messages[0].content.text
        check(len(text) <= 160 and "- limits\n" in text, f"budget 40 (160 bytes): names only: {len(text)} bytes: {text!r}")
        full = await client.get_prompt("skills_directory")
        directory = full.messages[0].content.text
        check("- limits: " in directory, f"the loaded skill is in the directory: {directory!r}")
        listed = [line for line in instructions.split("\n\n", 1)[1].splitlines() if line.startswith("- ")]
        check(all(line in directory for line in listed), f"the instructions' directory is the prompt's: {listed!r} vs {directory!r}")
        try:
            await client.get_prompt("skills_directory", {"budget": "lots"})
            fail("a bad budget was accepted")
        except MCPError as e:
            check("whole number" in str(e), str(e))
        print(json.dumps({"protocol": client.protocol_version, "resources": len(resources), "directory_bytes": len(text)}))


async def sandboxed(server, _arg):
    async with server.client() as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        for name in ["sandbox-probe__echo", "sandbox-probe__hang", "time-server__get_current_time"]:
            check(name in tools, f"{name} not listed: {sorted(tools)}")
        echo = await client.call_tool("sandbox-probe__echo", {"text": "hi"})
        check(not echo.is_error and "hi" in text_of(echo), text_of(echo))
        now = await client.call_tool("time-server__get_current_time", {"timezone": "UTC"})
        check(not now.is_error and "UTC" in text_of(now), text_of(now))
        with anyio.move_on_after(1.0):
            await client.call_tool("sandbox-probe__hang", {})
            fail("hang returned")
        cancelled = time.monotonic()
        again = await client.call_tool("sandbox-probe__echo", {"text": "after"})
        check(not again.is_error and "after" in text_of(again), text_of(again))
        print(json.dumps({"protocol": client.protocol_version, "next_call_ms": round((time.monotonic() - cancelled) * 1000)}))


async def http(server, url):
    """`skillhost serve --http` with the token `sesame` (the stdio server is not used)."""
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    client = httpx2.AsyncClient(headers={"Authorization": "Bearer sesame"}, timeout=30)
    async with Client(streamable_http_client(url, http_client=client), mode=server.mode) as session:
        await wait_ready(session)
        tools = {t.name for t in (await session.list_tools()).tools}
        check("limits__echo" in tools, f"tools over HTTP: {sorted(tools)}")
        result = await session.call_tool("limits__echo", {"value": 5})
        check(not result.is_error and json.loads(text_of(result)) == 5, text_of(result))
        print(json.dumps({"protocol": session.protocol_version, "tools": len(tools)}))


SCENARIOS = {f.__name__: f for f in [http, sandboxed, basics, cancel, list_changed, deferred, approval, run_approval, no_elicitation, knowledge, agent_skills]}


# --- forge (skill_create / skill_update / rollback), appended by the forge's tests ---

GREETER_TOML = """name = "greeter"
version = "0.1.0"
description = "Greets people by name"

[[capabilities.files]]
path = "."
mode = "rw"
"""

GREETER_LIB = """use skillhost_sdk::prelude::*;

#[derive(Deserialize, JsonSchema)]
struct Input { name: String }

/// Greet someone by name.
#[tool]
fn greet(input: Input) -> Result<String, ToolError> {
    Ok(format!("Hello, {}!", input.NAME))
}

skillhost_sdk::skill!(greet);
"""


def forge_client(server):
    """A client that waits for builds: a first Rust build compiles the SDK's dependencies."""
    return Ready(server, Client(server.params, mode=server.mode, message_handler=server.on_message,
                                elicitation_callback=server.on_elicit, read_timeout_seconds=900))


def rollback(server, name):
    exe, args = server.params.command, server.params.args
    import subprocess
    out = subprocess.run([exe, *args[:4], "rollback", name], capture_output=True, text=True)
    check(out.returncode == 0, f"skillhost rollback {name}: {out.stderr}")


async def call_until(client, tool, args, expected):
    """Call until the hot reload serves `expected` (each call may ask for approval)."""
    with anyio.fail_after(30):
        while True:
            result = await client.call_tool(tool, args)
            check(not result.is_error, text_of(result))
            if value_of(result) == expected:
                return
            await anyio.sleep(0.1)


async def forge_rust(server, _arg):
    server.answer = ("accept", {"approve": True})
    async with forge_client(server) as client:
        tools = {t.name for t in (await client.list_tools()).tools}
        check({"skill_create", "skill_update"} <= tools, f"forge tools not listed: {sorted(tools)}")
        broken = await client.call_tool("skill_create", {"name": "greeter", "language": "rust",
                                                          "files": {"skill.toml": GREETER_TOML, "src/lib.rs": GREETER_LIB}})
        check(broken.is_error, f"a compile error must fail: {text_of(broken)}")
        report = json.loads(text_of(broken))
        errors = [d for d in report["failure"]["diagnostics"] if d["level"] == "error"]
        check(errors and errors[0]["file"] == "src/lib.rs" and errors[0]["line"] == 9, f"diagnostics: {report}")
        check(report["attempt"] == 1 and report["max_attempts"] == 3 and not report["last_attempt"], f"attempts: {report}")

        fixed = GREETER_LIB.replace("input.NAME", "input.name")
        started = time.monotonic()
        progress = []

        async def on_progress(done, total, message):
            progress.append(message)

        created = await client.call_tool("skill_create", {
            "name": "greeter", "language": "rust", "files": {"skill.toml": GREETER_TOML, "src/lib.rs": fixed},
            "tests": [{"tool": "greet", "input": {"name": "Ada"}, "expect": "Hello, Ada!"}],
        }, progress_callback=on_progress)
        check(not created.is_error, text_of(created))
        facts = created.structured_content
        check(facts["state"] == "pending_review" and facts["tools"] == ["greeter__greet"], f"created: {facts}")
        check(facts["tests_passed"] == 1 and "skillhost approve greeter" in facts["next"], f"created: {facts}")
        await call_until(client, "greeter__greet", {"name": "Ada"}, "Hello, Ada!")
        check(len(server.elicitations) == 1 and "greeter" in server.elicitations[0], f"elicitations: {server.elicitations}")
        create_ms = round((time.monotonic() - started) * 1000)

        started = time.monotonic()
        howdy_toml = GREETER_TOML + '\n[[tests]]\ntool = "greet"\ninput = { name = "Ada" }\nexpect = "Howdy, Ada!"\n'
        updated = await client.call_tool("skill_update", {"name": "greeter", "files": {
            "src/lib.rs": fixed.replace("Hello", "Howdy"), "skill.toml": howdy_toml}})
        check(not updated.is_error, text_of(updated))
        check(updated.structured_content["state"] == "needs_reapproval", f"updated: {updated.structured_content}")
        await call_until(client, "greeter__greet", {"name": "Ada"}, "Howdy, Ada!")
        update_ms = round((time.monotonic() - started) * 1000)
        check(len(server.elicitations) == 2, f"the update is approved again: {server.elicitations}")

        source = await client.call_tool("read_skill_resource", {"skill": "greeter", "path": "source/src/lib.rs"})
        check(not source.is_error and "Howdy" in source.structured_content["text"], text_of(source))

        rollback(server, "greeter")
        await call_until(client, "greeter__greet", {"name": "Ada"}, "Hello, Ada!")
        print(json.dumps({"protocol": client.protocol_version, "create_to_callable_ms": create_ms,
                          "update_to_callable_ms": update_ms, "progress": progress, "timings": facts["timings_ms"]}))


SHOUTER_TOML = """name = "shouter"
version = "0.1.0"
description = "Repeats text loudly"

[server]
command = "python"
args = ["server.py"]

[[capabilities.files]]
path = "."
mode = "rw"
"""

SHOUTER = """from fastmcp import FastMCP

mcp = FastMCP("shouter")


@mcp.tool()
def shout(text: str) -> str:
    \"\"\"Repeat text in capitals.\"\"\"
    return text.upper() + "SUFFIX"


if __name__ == "__main__":
    mcp.run()
"""


async def forge_python(server, _arg):
    server.answer = ("accept", {"approve": True})
    async with forge_client(server) as client:
        started = time.monotonic()
        created = await client.call_tool("skill_create", {"name": "shouter", "language": "python", "files": {
            "skill.toml": SHOUTER_TOML, "server.py": SHOUTER.replace("SUFFIX", "")},
            "tests": [{"tool": "shout", "input": {"text": "hi"}, "expect": "HI"}]})
        check(not created.is_error, text_of(created))
        check(created.structured_content["state"] == "pending_review", f"created: {created.structured_content}")
        await call_until(client, "shouter__shout", {"text": "hi"}, "HI")
        create_ms = round((time.monotonic() - started) * 1000)
        bad = await client.call_tool("skill_update", {"name": "shouter", "files": {"run.sh": "curl evil"}})
        check(bad.is_error and "run.sh" in text_of(bad) and "allow list" in text_of(bad), text_of(bad))
        updated = await client.call_tool("skill_update", {"name": "shouter", "files": {
            "server.py": SHOUTER.replace("SUFFIX", "!"),
            "skill.toml": SHOUTER_TOML + '\n[[tests]]\ntool = "shout"\ninput = { text = "hi" }\nexpect = "HI!"\n'}})
        check(not updated.is_error, text_of(updated))
        await call_until(client, "shouter__shout", {"text": "hi"}, "HI!")
        rollback(server, "shouter")
        await call_until(client, "shouter__shout", {"text": "hi"}, "HI")
        print(json.dumps({"protocol": client.protocol_version, "create_to_callable_ms": create_ms,
                          "elicitations": len(server.elicitations)}))


SCENARIOS.update({f.__name__: f for f in [forge_rust, forge_python]})


async def forge_suggest(server, _arg):
    """`serve --suggest-missing`: repeated searches that miss become suggestions, and a
    skill failing most of its calls is flagged in skill_list."""
    server.params.args.append("--suggest-missing")
    async with server.client() as client:
        for query in ["convert currency to euros", "currency convert euros", "convert the currency rates to euros"]:
            found = (await client.call_tool("tool_search", {"query": query})).structured_content
            check(found.get("no_good_match") is True, f"{query}: {found}")
        suggestions = found.get("consider_creating", [])
        check(len(suggestions) == 1 and "currency" in suggestions[0] and "3 times" in suggestions[0], f"{found}")
        for _ in range(5):
            await client.call_tool("limits__fail", {"kind": "failed"})
        skills = (await client.call_tool("skill_list", {})).structured_content["skills"]
        limits = [s for s in skills if s["name"] == "limits"][0]
        check("failed 5 of its last 5 calls" in limits.get("failing", ""), f"{limits}")
        print(json.dumps({"suggestion": suggestions[0], "failing": limits["failing"]}))


SCENARIOS.update({f.__name__: f for f in [forge_suggest]})


async def call_one(server, request):
    """Call one tool, `{"tool": NAME, "arguments": {...}}`, once the skills have loaded;
    print what it returned."""
    request = json.loads(request)
    async with server.client() as client:
        result = await client.call_tool(request["tool"], request["arguments"])
        check(not result.is_error, f"{request['tool']} failed: {text_of(result)}")
        print(json.dumps({"value": value_of(result)}))


SCENARIOS.update({f.__name__: f for f in [call_one]})


def main():
    scenario, mode, exe, skills, data = sys.argv[1:6]
    arg = sys.argv[6] if len(sys.argv) > 6 else None
    extra = ["--no-elicitation"] if scenario == "no_elicitation" else []
    server = Server(mode, exe, skills, data, extra)
    asyncio.run(SCENARIOS[scenario](server, arg))


if __name__ == "__main__":
    main()
