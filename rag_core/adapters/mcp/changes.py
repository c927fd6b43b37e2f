"""The MCP tool `library_changes` (read-only): what linking would change, for every folder linked to the library.

It compares each linked folder with the library exactly as the Library page and `docchat sync --dry-run` do, and
writes nothing: not the library, not the folders' records. Only folders the user linked are looked at, so an agent
cannot make DocChat read another folder.
"""
from __future__ import annotations

from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from rag_core.adapters.mcp.summaries import LibraryUser
from rag_core.core.config import Settings
from rag_core.core.errors import FolderSyncError

MAX_NAMES = 200  # file names listed per bucket (the counts are always whole)


def add_changes_tool(server: MCPServer, settings: Settings, holder: LibraryUser) -> None:
    """Offer `library_changes` on `server`."""

    @server.tool(annotations=ToolAnnotations(read_only_hint=True, open_world_hint=False))
    def library_changes(folder: Annotated[str | None, Field(None, max_length=4096, description=(
            "One linked folder's path; leave out for every linked folder."))] = None) -> dict[str, Any]:
        """Which files of the user's linked folders differ from the library: counts and names of new, changed and
        removed files (unchanged ones counted), and a sentence for each file that could not be read. Nothing is
        changed; the user applies changes in DocChat's Library page or with `docchat sync`."""
        from rag_core.service.folder_sync import diff_folder
        from rag_core.service.linked_folders import FolderLinks

        links = FolderLinks(settings)
        linked = links.all()
        if folder is not None:
            wanted = links.find(folder)
            if wanted is None:
                raise ToolError(f"“{folder}” is not a linked folder; leave out `folder` to see every linked one.")
            linked = [wanted]
        out: list[dict[str, Any]] = []
        with holder.use() as lib:
            for link in linked:
                try:
                    diff = diff_folder(lib, links, link.path, remember=False)
                except FolderSyncError as e:
                    out.append({"folder": link.path, "error": str(e)})
                    continue
                shown = diff.as_json()
                for bucket in ("new", "changed", "removed"):
                    shown[bucket] = shown[bucket][:MAX_NAMES]
                out.append({**shown, "summary": diff.summary()})
        return {"folders": out, "note": None if linked else "No folder is linked to the library yet."}
