"""{{name}}: a skillhost server skill: an MCP server (FastMCP) that the host runs in its
sandbox with the managed Python, speaking MCP over stdio. Its network goes through the
host's egress proxy, to the hosts skill.toml allows only.
"""

from fastmcp import FastMCP

mcp = FastMCP("{{name}}")


@mcp.tool(annotations={"readOnlyHint": True, "idempotentHint": True})
def hello(name: str) -> dict:
    """Greet someone by name."""
    return {"greeting": f"Hello, {name}!"}


if __name__ == "__main__":
    mcp.run()
