"""Every MCP tool error as one sentence: the SDK's "Error executing tool …" prefix dropped, a pydantic report of
bad arguments rewritten as a sentence naming the arguments, an unknown tool answered with the tools there are, and
a crash turned into a sentence that leaves the crash's own text out (logged on one line; the traceback at DEBUG)."""
from __future__ import annotations

import logging
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.shared.exceptions import MCPError
from mcp.types import CallToolResult, InputRequiredResult
from pydantic import ValidationError

log = logging.getLogger(__name__)
WRITE_TOOLS = ("add_document", "import_wikipedia")  # offered only with --allow-writes


def _invalid_arguments(tool: str, e: ValidationError) -> str:
    """One sentence naming each argument pydantic rejected and why (never the rejected values)."""
    problems: dict[str, str] = {}
    for err in e.errors():
        where = ".".join(str(part) for part in err["loc"]) or "arguments"
        msg = err["msg"][:1].lower() + err["msg"][1:]
        problems.setdefault(where, f"“{where}”: {msg}")
    listed = "; ".join(list(problems.values())[:4])
    return f"The arguments of {tool} are not valid ({listed}); fix them and call {tool} again."


class DocChatMCPServer(MCPServer):
    """MCPServer whose every tool error reaches the model as the sentence the tool (or DocChat) wrote: the SDK's
    "Error executing tool …" prefix is dropped, a pydantic report becomes one sentence, and a crash becomes a sentence
    that leaves its text out, logged on one line (the traceback at DEBUG only)."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None
                        ) -> CallToolResult | InputRequiredResult:
        """Run a tool; any failure is a ToolError carrying one sentence."""
        try:
            return await super().call_tool(name, arguments, context)
        except MCPError:
            raise
        except UnexpectedToolError as e:
            crash = e.__cause__ or e
            log.error("The tool %s failed unexpectedly (%s)", name, type(crash).__name__)
            log.debug("The failure in %s", name, exc_info=crash)
            raise ToolError(f"The tool {name} could not finish because of an unexpected problem on the DocChat server "
                            f"({type(crash).__name__}); try again, and if it keeps happening, ask the user to look at "
                            "the server's log.") from None
        except ToolError as e:
            cause = e.__cause__
            if isinstance(cause, ValidationError):
                raise ToolError(_invalid_arguments(name, cause)) from cause
            if isinstance(cause, ToolError):
                raise ToolError(str(cause)) from None
            if str(e).startswith("Unknown tool"):
                tools = ", ".join(sorted(t.name for t in await self.list_tools()))
                why = (" (the tools that change the library are offered only when the server is started with "
                       "--allow-writes)" if name in WRITE_TOOLS else "")
                raise ToolError(f"Unknown tool: “{name[:80]}” is not a tool of this server{why}; its tools are "
                                f"{tools}.") from None
            raise ToolError(str(e).removeprefix(f"Error executing tool {name}: ")) from None
