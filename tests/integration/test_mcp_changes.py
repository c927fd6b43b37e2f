"""The MCP tool `library_changes`: read-only, only linked folders, the same buckets as `docchat sync --dry-run`;
through the SDK's in-memory transport (the real protocol, no spawn)."""
from __future__ import annotations

import json
import shutil
from typing import Any

from mcp import Client
from mcp_helpers import run_async

from rag_core.adapters.mcp.server import LibraryHolder, build_server
from rag_core.service.folder_sync import apply_change, chosen, diff_folder
from rag_core.service.library import Library
from rag_core.service.linked_folders import FolderLinks


async def _call(c: Client, tool: str, args: dict[str, Any] | None = None) -> tuple[bool, Any]:
    r = await c.call_tool(tool, args or {})
    if r.is_error:
        return True, " ".join(getattr(x, "text", "") for x in r.content)
    return False, r.structured_content


def test_library_changes_lists_each_linked_folder_and_changes_nothing(settings, embedder, tmp_path):
    folder = tmp_path / "Reports"
    folder.mkdir()
    (folder / "keeper.txt").write_text("The lighthouse keeper lights the lamp each evening for the ships.")
    (folder / "bees.md").write_text("# Bees\n\nHoney bees dance to show the hive where the flowers grow.")
    other = tmp_path / "Gone"
    other.mkdir()
    lib = Library(settings, embedder=embedder)
    links = FolderLinks(settings)
    links.link(folder)
    links.link(other)
    for c in chosen(diff_folder(lib, links, folder), {"keeper.txt"}):
        apply_change(lib, links, str(folder), c)
    (folder / "keeper.txt").write_text("The lighthouse keeper now writes every ship in a ledger.")
    (folder / "new.txt").write_text("A brand new note about the harbour.")
    shutil.rmtree(other)
    lib.close()
    records = (settings.library.data_dir / "linked_folders.json").read_bytes()
    holder = LibraryHolder(settings, idle_close_s=0, embedder=embedder)
    server = build_server(settings, holder)

    async def body(c: Client) -> None:
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert tools["library_changes"].annotations.read_only_hint is True
        bad, got = await _call(c, "library_changes")
        assert not bad, got
        reports, gone = got["folders"]
        assert reports["counts"] == {"new": 2, "changed": 1, "removed": 0, "unchanged": 0, "wikipedia": 0}
        assert (reports["new"], reports["changed"]) == (["bees.md", "new.txt"], ["keeper.txt"])
        assert reports["summary"] == "3 files changed in Reports"
        assert "is not there any more" in gone["error"] and "Gone" in gone["error"]
        bad, one = await _call(c, "library_changes", {"folder": str(folder)})
        assert not bad and [f["folder"] for f in one["folders"]] == [str(folder)]
        bad, message = await _call(c, "library_changes", {"folder": "/etc"})
        assert bad and "is not a linked folder" in message

    async def main() -> None:
        async with Client(server) as c:
            await body(c)

    try:
        run_async(main)
    finally:
        holder.close()
    assert (settings.library.data_dir / "linked_folders.json").read_bytes() == records  # nothing written
    lib = Library(settings, embedder=embedder)
    try:
        assert [d.file_name for d in lib.documents()] == ["keeper.txt"]
    finally:
        lib.close()
    assert json.loads(records)["folders"][0]["path"] == str(folder)
