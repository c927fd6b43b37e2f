"""The MCP tool `summarize`: a whole document summarised, its key points or its outline (two or three documents:
compared), cited and checked like `ask`. Its work is bounded like the app's: DOCCHAT_SUMMARY_MAX_CALLS model calls per
document at most (the server's model, or quotes without one), and at most MAX_COMPARED documents."""
from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Annotated, Any, Literal, Protocol

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from rag_core.answer.grounding.citations import citation_json
from rag_core.core.config import Settings
from rag_core.service.render import location_label

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.service.library import Library

MAX_COMPARED = 3


class LibraryUser(Protocol):
    """What the tool needs of the server's LibraryHolder (declared here: the server imports this module)."""

    def use(self) -> AbstractContextManager[Library]:
        """The open library for one call."""
        ...


def add_summary_tool(server: MCPServer, settings: Settings, holder: LibraryUser, use_llm: bool) -> None:
    """Offer `summarize` on `server` (read-only: it reads the library and may ask the model)."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def summarize(doc_ids: Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]], Field(
                      min_length=1, max_length=MAX_COMPARED,
                      description="One document id (from list_documents); two or three to compare them.")],
                  kind: Annotated[Literal["summary", "key_points", "outline"], Field(
                      description="A summary (default), the key points as a list, or the outline (headings with "
                                  "pages). Ignored when comparing.")] = "summary") -> dict[str, Any]:
        """Summarize a whole document from all of it (not only the passages nearest a question), with numbered
        citations [n] checked against the cited passages; with two or three ids, compare them side by side and
        list what each says on the topics they share.

        With the server's language model the document is read part by part within its context (a bounded number
        of calls; a long document's passages are sampled evenly, and "notice" says so); without one, the summary
        quotes the document's opening and one central sentence of each part ("quotes" mode). "coverage" says how
        much of each document the summary read and cites (quarters and sections)."""
        from rag_core.answer.summaries import Shape
        from rag_core.answer.summaries.start import start_summary

        ids = list(dict.fromkeys(doc_ids))
        shape = Shape.COMPARE if len(ids) > 1 else Shape(kind)
        with holder.use() as lib:
            known = {d.doc_id for d in lib.documents()}
            unknown = [d for d in ids if d not in known]
            if unknown:
                raise ToolError(f"No document with id “{unknown[0]}” is in the library; call list_documents for "
                                "the ids.")
            stream = start_summary(lib, ids, settings, shape, use_llm=use_llm)
            for _ in stream:
                pass
        ans = stream.answer
        assert ans is not None
        citations = [{**citation_json(c), "location": location_label(c.passage.chunk) or None} for c in ans.citations]
        return {"summary": ans.text, "mode": ans.mode, "citations": citations, "notice": ans.notice,
                "incomplete": ans.incomplete, "coverage": ans.extra.get("summary")}
