"""Drives `skillhost serve` (stdio) with the official MCP Python SDK (PyPI `mcp` 2.x) over
the skills built with the Python and JavaScript guest SDKs: the input and output schemas
an agent sees, and calls with nested, optional and enumerated input, a tool error and a
refused input.

Usage: sdk_client.py SKILLHOST SKILLS_DIR DATA_DIR

Prints one JSON line of facts; any failed check exits non-zero with the reason.
"""

import asyncio
import json
import sys

from mcp import Client, StdioServerParameters


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}", file=sys.stderr)
        sys.exit(1)


async def main(skillhost, skills, data):
    server = StdioServerParameters(command=skillhost, args=["--skills", skills, "--data-dir", data, "serve"])
    async with Client(server) as client:
        tools = {}
        for _ in range(600):
            listed = await client.list_tools()
            tools = {tool.name: tool for tool in listed.tools}
            if "py-sdk-example__trip" in tools and "sdk-example__hello" in tools:
                break
            await asyncio.sleep(0.1)
        check("py-sdk-example__trip" in tools and "sdk-example__hello" in tools, f"both SDK skills are listed: {sorted(tools)}")

        # Python: a list of dataclasses (one field optional), an Enum, a TypedDict output.
        trip = tools["py-sdk-example__trip"]
        places = trip.input_schema["properties"]["places"]
        place = places["items"]
        check(places["type"] == "array" and place["type"] == "object", f"places is a list of objects: {places}")
        check(place["required"] == ["city"], f"city is required, country optional: {place}")
        check("country" in place["properties"], f"country is a property: {place}")
        check(trip.input_schema["properties"]["pace"]["enum"] == ["slow", "fast"], f"pace is an enum: {trip.input_schema}")
        check(trip.input_schema["required"] == ["places"], f"only places is required: {trip.input_schema}")
        check(set(trip.output_schema["required"]) == {"stops", "route", "countries"}, f"the output schema: {trip.output_schema}")
        hello_py = tools["py-sdk-example__hello"]
        check(hello_py.input_schema["properties"]["tone"]["enum"] == ["plain", "warm"], f"a Literal is an enum: {hello_py.input_schema}")
        check(hello_py.input_schema["properties"]["name"]["description"] == "Who to greet.", f"docstring Args describe: {hello_py.input_schema}")

        # JavaScript: an optional enum and an optional list of objects.
        hello_js = tools["sdk-example__hello"]
        props = hello_js.input_schema["properties"]
        check(props["tone"]["enum"] == ["plain", "warm"], f"tone is an enum: {props}")
        check(props["places"]["items"]["properties"]["city"]["type"] == "string", f"places[].city: {props}")
        check(hello_js.input_schema["required"] == ["name"], f"only name is required: {hello_js.input_schema}")
        check(hello_js.output_schema["properties"]["greeting"]["type"] == "string", f"the output schema: {hello_js.output_schema}")

        answer = await client.call_tool("py-sdk-example__trip", {"places": [{"city": "Paris", "country": "France"}, {"city": "Turin"}], "pace": "fast"})
        check(not answer.is_error, f"trip answered: {answer}")
        check(answer.structured_content == {"stops": 2, "route": "Paris => Turin", "countries": ["France"]}, f"trip: {answer.structured_content}")
        refused = await client.call_tool("py-sdk-example__trip", {"places": [{"country": "France"}]})
        text = " ".join(c.text for c in refused.content if c.type == "text")
        check(refused.is_error and "places[0].city" in text, f"a missing nested field is named: {text}")

        answer = await client.call_tool("sdk-example__hello", {"name": "Ada", "tone": "warm", "places": [{"city": "London"}]})
        check(not answer.is_error and "London" in answer.structured_content["greeting"], f"hello (js): {answer}")
        failed = await client.call_tool("sdk-example__split", {"total": 10, "parts": 0})
        text = " ".join(c.text for c in failed.content if c.type == "text")
        check(failed.is_error and "cannot split into 0 parts" in text, f"a ToolError reaches the agent: {text}")
        print(json.dumps({"tools": len(tools), "trip": answer.structured_content}))


asyncio.run(main(*sys.argv[1:4]))
