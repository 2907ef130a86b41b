"""The MCP server of agent-service's MCP tests (PyPI mcp<2, FastMCP).

python3 server.py                      -> stdio (a local_mcp package's server)
python3 server.py streamable-http PORT -> streamable HTTP at /mcp
python3 server.py sse PORT             -> legacy SSE at /sse
The key the tests configure is checked here and never echoed.
"""
import os
import sys

from mcp.server.fastmcp import Context, FastMCP

KEY = "Bearer k-" + "7f3a9c"

transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
mcp = FastMCP("calc", host="127.0.0.1", port=port)


@mcp.tool()
def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


@mcp.tool()
def fail(reason: str) -> str:
    """Always fails with the given reason."""
    raise ValueError(reason)


@mcp.tool()
def key_seen(ctx: Context) -> str:
    """Says whether the configured key arrived (never the key itself)."""
    request = getattr(ctx.request_context, "request", None)
    got = request.headers.get("authorization") if request is not None else None
    return "key: yes" if got == KEY else "key: no"


@mcp.tool()
async def slow(seconds: float) -> str:
    """Sleeps, then answers."""
    import asyncio

    await asyncio.sleep(seconds)
    return "slept"


@mcp.tool()
def write_note(text: str) -> str:
    """Writes note.txt in the working directory (the session's workspace)."""
    with open(os.path.join(os.getcwd(), "note.txt"), "w") as f:
        f.write(text)
    return "written"


if __name__ == "__main__":
    mcp.run(transport=transport)
