"""Drives `skill_run` of skillhost's MCP front with the official MCP Python SDK (PyPI
`mcp` 2.x) over streamable HTTP.

Usage: mcp_run.py MODE URL TOKEN APPROVED PENDING

MODE is `auto` (`server/discover`) or `legacy` (`initialize`). Lists the tools and checks
`skill_run`'s input and output schemas (valid JSON Schema, the fields an agent fills and
reads); runs APPROVED's `scripts/plot.py` with one input file as text and one as base64,
the script writing a text report and a PNG it builds with zlib and struct; checks the
structured answer against the output schema (the SDK does too), the report inlined with
its SHA-256 (hashlib), the PNG as an `image` content block whose base64 decodes to bytes
with the listed SHA-256 and whose pixels are the base64 input's bytes, the binary input
as a resource link read back with resources/read; then runs PENDING (never approved) and checks the refusal.
Prints one JSON line of facts; any failure exits non-zero with the reason.

`mcp_run.py big MODE URL TOKEN SKILL MIB` instead runs SKILL's `scripts/size.sh in.bin`
with MIB MiB of random bytes as base64 (under the 16 MiB input cap, over rmcp's default
body limit) and checks the script saw every byte, within a bounded time.
"""

import asyncio
import base64
import hashlib
import json
import struct
import sys
import zlib

import httpx2
import jsonschema
from mcp import Client, types
from mcp.client.streamable_http import streamable_http_client

NOTES = "Quarterly notes: é, ✓ and 3 rows.\n"
# A 2×2 RGB image's pixels, row by row: what the script paints.
PIXELS = bytes([255, 0, 0, 0, 255, 0, 0, 0, 255, 255, 255, 255])


def fail(message):
    print(f"FAIL: {message}", file=sys.stderr)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


def png_pixels(data):
    """The RGB rows of a PNG of 8-bit truecolour with filter 0, each chunk's CRC checked."""
    check(data.startswith(b"\x89PNG\r\n\x1a\n"), "not a PNG signature")
    at, idat, header = 8, b"", None
    while at < len(data):
        (length,) = struct.unpack(">I", data[at : at + 4])
        kind, body = data[at + 4 : at + 8], data[at + 8 : at + 8 + length]
        (crc,) = struct.unpack(">I", data[at + 8 + length : at + 12 + length])
        check(zlib.crc32(kind + body) == crc, f"bad CRC in chunk {kind!r}")
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            idat += body
        at += 12 + length
    width, height, depth, colour = header[:4]
    check((depth, colour) == (8, 2), f"not 8-bit RGB: {header}")
    raw = zlib.decompress(idat)
    stride = 1 + 3 * width
    rows = [raw[r * stride : (r + 1) * stride] for r in range(height)]
    check(all(row[0] == 0 for row in rows), "a row is filtered")
    return width, height, b"".join(row[1:] for row in rows)


def sha256(data):
    return hashlib.sha256(data).hexdigest()


async def main(mode, url, token, approved, pending):
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=120)
    async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=120) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        check("skill_run" in tools, f"skill_run is not listed: {sorted(tools)}")
        tool = tools["skill_run"]
        input_schema, output_schema = tool.input_schema, tool.output_schema
        check(output_schema is not None, "skill_run lists no output schema")
        for which, schema in [("input", input_schema), ("output", output_schema)]:
            try:
                jsonschema.validators.validator_for(schema).check_schema(schema)
            except jsonschema.SchemaError as e:
                fail(f"the {which} schema is no valid JSON Schema: {e.message}")
        props = input_schema["properties"]
        check(props["command"]["type"] == "array" and props["command"]["items"]["type"] == "string", f"command: {props['command']}")
        check((props["command"].get("minItems"), props["command"].get("maxItems")) == (1, 256), f"command bounds: {props['command']}")
        item = props["inputs"]["items"]
        if "$ref" in item:
            item = input_schema["$defs"][item["$ref"].rsplit("/", 1)[-1]]
        check(set(item["properties"]) == {"path", "text", "base64", "executable"}, f"an input file: {item}")
        validate_input = jsonschema.validators.validator_for(input_schema)(input_schema)
        arguments = {
            "skill": approved,
            "command": ["python", "scripts/plot.py", "notes.txt", "data/pixels.bin"],
            "inputs": [
                {"path": "notes.txt", "text": NOTES},
                {"path": "data/pixels.bin", "base64": base64.b64encode(PIXELS).decode()},
            ],
        }
        check(validate_input.is_valid(arguments), "our arguments break the input schema")
        check(not validate_input.is_valid({"skill": approved, "command": []}), "an empty command passes the input schema")
        check(not validate_input.is_valid({"skill": approved, "command": ["x"], "grant": "all"}), "an unknown field passes")

        result = await client.call_tool("skill_run", arguments)
        texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
        check(not result.is_error, f"skill_run failed: {texts}")
        answer = result.structured_content
        check(answer is not None, "no structuredContent")
        jsonschema.validators.validator_for(output_schema)(output_schema).validate(answer)
        check(answer["exit_code"] == 0, f"exit code {answer['exit_code']}: {answer['stderr']}")
        files = {f["path"]: f for f in answer["files"]}
        check(sorted(files) == ["again.sh", "chart.png", "data/pixels.out", "report.txt"], f"files: {sorted(files)}")
        check(answer["unchanged_inputs"] == ["data/pixels.bin", "notes.txt"], f"unchanged inputs: {answer['unchanged_inputs']}")
        check([p for p, f in sorted(files.items()) if f["executable"]] == ["again.sh"], f"executables: {files}")

        report = files["report.txt"]
        expected = f"{NOTES.upper()}pixels {sha256(PIXELS)}\n"
        check(report["returned"] == "inline" and report["text"] == expected, f"report: {report}")
        check(report["sha256"] == sha256(report["text"].encode()), f"report sha256 {report['sha256']}")
        check(report["size"] == len(expected.encode()), f"report size {report['size']}")

        images = [c for c in result.content if isinstance(c, types.ImageContent)]
        check(len(images) == 1, f"{len(images)} image blocks")
        chart = files["chart.png"]
        check(chart["returned"] == "image" and "text" not in chart, f"chart: {chart}")
        check(images[0].mime_type == "image/png", f"mime type {images[0].mime_type}")
        png = base64.b64decode(images[0].data, validate=True)
        check(sha256(png) == chart["sha256"] and len(png) == chart["size"], "the image is not the listed file")
        width, height, pixels = png_pixels(png)
        check((width, height, pixels) == (2, 2, PIXELS), f"the image's pixels: {width}x{height} {pixels.hex()}")

        links = [c for c in result.content if isinstance(c, types.ResourceLink)]
        binary = files["data/pixels.out"]
        check(binary["returned"] == "resource", f"{binary}")
        check([str(link.uri) for link in links] == [binary["uri"]], f"the binary output is linked: {links}")
        read = await client.read_resource(binary["uri"])
        blobs = [base64.b64decode(c.blob) for c in read.contents if isinstance(c, types.BlobResourceContents)]
        check(blobs == [PIXELS], f"the binary output read back as a resource: {read}")
        chart_read = await client.read_resource(chart["uri"])
        chart_blobs = [base64.b64decode(c.blob) for c in chart_read.contents if isinstance(c, types.BlobResourceContents)]
        check(chart_blobs == [png], "the image is readable as a resource too")

        refused = await client.call_tool("skill_run", {"skill": pending, "command": ["python", "scripts/plot.py"]})
        refusal = " ".join(c.text for c in refused.content if isinstance(c, types.TextContent))
        check(refused.is_error, f"the pending skill ran: {refused}")
        print(json.dumps({
            "protocol": client.protocol_version,
            "input_properties": sorted(props),
            "input_required": sorted(input_schema.get("required", [])),
            "output_properties": sorted(output_schema["properties"]),
            "output_required": sorted(output_schema.get("required", [])),
            "file_properties": sorted(
                (output_schema["$defs"]["FileAnswer"] if "$defs" in output_schema else output_schema["properties"]["files"]["items"])[
                    "properties"
                ]
            ),
            "files": {path: {k: v for k, v in f.items() if k != "text"} for path, f in files.items()},
            "stdout": answer["stdout"],
            "png": png.hex(),
            "refusal": refusal,
        }))


async def big(mode, url, token, skill, mib):
    import os
    import time

    import anyio

    payload = os.urandom(int(float(mib) * (1 << 20)))
    arguments = {
        "skill": skill,
        "command": ["sh", "scripts/size.sh", "in.bin"],
        "inputs": [{"path": "in.bin", "base64": base64.b64encode(payload).decode()}],
    }
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=150)
    async with Client(streamable_http_client(url, http_client=http), mode=mode, read_timeout_seconds=150) as client:
        started = time.monotonic()
        try:
            with anyio.fail_after(170):
                result = await client.call_tool("skill_run", arguments)
        except TimeoutError:
            fail(f"skill_run with {mib} MiB of input got no answer in 170 s")
        texts = " ".join(c.text for c in result.content if isinstance(c, types.TextContent))
        check(not result.is_error, f"skill_run failed: {texts}")
        answer = result.structured_content
        digest = sha256(payload)
        check(answer["exit_code"] == 0, f"the run: {answer}")
        check(answer["stdout"] == f"{len(payload)}\n{digest}\n", f"the script saw other bytes: {answer['stdout']!r} {answer['stderr']!r}")
        print(json.dumps({"input_bytes": len(payload), "message_bytes": len(json.dumps(arguments)), "seconds": round(time.monotonic() - started, 2)}))


if __name__ == "__main__":
    if sys.argv[1] == "big":
        asyncio.run(big(*sys.argv[2:7]))
    else:
        asyncio.run(main(*sys.argv[1:6]))
