"""Tests of {{name}}: `skillhost test` runs them in the sandbox, then checks the MCP
handshake. They call the server in memory with FastMCP's client."""

import asyncio

from fastmcp import Client

from server import mcp


def call(tool, arguments):
    async def run():
        async with Client(mcp) as client:
            return await client.call_tool(tool, arguments)

    return asyncio.run(run())


def test_hello_greets_by_name():
    assert call("hello", {"name": "Ada"}).data == {"greeting": "Hello, Ada!"}
