"""File names that are not UTF-8 (Latin-1 bytes, as on old archives and USB sticks) and odd UTF-8 ones (a line break,
right-to-left text, 255 bytes): added, listed, found, synced, re-read and removed like any other, through the library,
a linked folder, the CLI's --json and MCP; what is shown is UTF-8 (U+FFFD for the bytes that are not), the file is
still opened by its real name. Real files, the real model, the embedded store."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from mcp import Client
from mcp_helpers import run_async

from rag_core.adapters.mcp.server import LibraryHolder, build_server
from rag_core.service.folder_sync import Bucket, apply_change, chosen, diff_folder
from rag_core.service.library import Library
from rag_core.service.linked_folders import FolderLinks

pytestmark = [pytest.mark.remembered_vectors,
              pytest.mark.skipif(os.name == "nt", reason="Windows file names are UTF-16, never bytes")]

CAFE = b"caf\xe9.txt"  # Latin-1: not UTF-8
CAFE_SHOWN = "caf\ufffd.txt"
LONG = "\u00e9" * 125 + ".txt"  # 254 bytes of UTF-8 (Linux allows 255)
ODD = {"line\nbreak.txt": "line\ufffdbreak.txt", "\u200f\u05e9\u05dc\u05d5\u05dd.txt": "\u200f\u05e9\u05dc\u05d5\u05dd.txt",
       LONG: LONG}
TEXT = {CAFE: b"The cafe roasts its espresso beans from Ethiopia every Monday morning.\n",
        b"line\nbreak.txt": b"Lighthouse keepers once trimmed the lamp wicks every evening at dusk.\n",
        "\u200f\u05e9\u05dc\u05d5\u05dd.txt".encode(): b"Honey bees dance to show the hive where the flowers grow.\n",
        LONG.encode(): b"Volcanoes erupt when magma pressure pushes molten rock up to the surface.\n",
        b"r\xe9sum\xe9s/notes.md": b"# Notes\n\nThe glacier retreated four kilometres during the last century.\n"}


def _write(folder: Path, rel: bytes, data: bytes) -> str:
    """Write `data` under `folder` at the byte name `rel`; the name as Python sees it (surrogate escapes)."""
    path = os.path.join(os.fsencode(folder), rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return os.fsdecode(path)


def _utf8_json(value: object) -> str:
    """`value` as JSON that must be writable as UTF-8 (a lone surrogate raises)."""
    text = json.dumps(value, ensure_ascii=False)
    text.encode("utf-8")
    return text


@pytest.fixture
def lib(settings, embedder):
    library = Library(settings, embedder=embedder)
    yield library
    library.close()


def test_a_latin1_name_is_added_listed_found_and_deleted(lib, tmp_path):
    path = _write(tmp_path, CAFE, TEXT[CAFE])
    r = lib.ingest_path(Path(path))
    assert r.status == "added", r.error
    assert (r.title, Path(r.path).name) == ("caf\ufffd", CAFE_SHOWN)
    _utf8_json(r.as_json())
    [doc] = lib.documents()
    assert (doc.doc_id, doc.title, doc.file_name) == (r.doc_id, "caf\ufffd", CAFE_SHOWN)
    hits = lib.search("espresso beans from Ethiopia", k=3)
    assert hits and hits[0].chunk.doc_id == r.doc_id and hits[0].chunk.source.file_name == CAFE_SHOWN
    again = lib.ingest_path(Path(path))  # read again from its real name
    assert (again.status, again.doc_id) == ("unchanged", r.doc_id)
    lib.delete(r.doc_id)
    assert lib.documents() == [] and lib.search("espresso", k=3) == []


def test_odd_utf8_names_are_added_and_shown_safely(lib, tmp_path):
    for name, shown in ODD.items():
        r = lib.ingest_path(Path(_write(tmp_path, name.encode(), TEXT[name.encode()])))
        assert r.status == "added", (name, r.error)
        assert Path(r.path).name == shown and "\n" not in r.path
    titles = sorted(d.title for d in lib.documents())
    assert titles == sorted(Path(s).stem for s in ODD.values())
    assert lib.search("honey bees dance", k=1)[0].chunk.source.file_name == ODD["\u200f\u05e9\u05dc\u05d5\u05dd.txt"]


def test_a_linked_folder_with_latin1_names_syncs_rereads_and_removes(lib, settings, tmp_path):
    folder = tmp_path / "Stick"
    paths = {rel: _write(folder, rel, data) for rel, data in TEXT.items()}
    links = FolderLinks(settings)
    links.link(folder)
    diff = diff_folder(lib, links, folder)
    assert diff.counts()[Bucket.NEW] == len(TEXT) and not diff.notes
    shown = _utf8_json(diff.as_json())
    assert CAFE_SHOWN in shown and "r\ufffdsum\ufffds/notes.md" in shown
    results = [apply_change(lib, links, diff.folder, c) for c in chosen(diff)]
    assert [r.status for r in results] == ["added"] * len(TEXT), [r.error for r in results]
    _utf8_json([r.as_json() for r in results])
    assert json.loads((settings.library.data_dir / "linked_folders.json").read_bytes())  # the records: valid JSON
    again = diff_folder(lib, FolderLinks(settings), folder)  # the exact names survive the records' round trip
    assert again.counts()[Bucket.UNCHANGED] == len(TEXT) and not again.pending

    cafe = paths[CAFE]
    old = os.stat(cafe).st_mtime_ns
    with open(cafe, "wb") as f:
        f.write(b"The cafe now serves green tea from Japan in the afternoon.\n")
    os.utime(cafe, ns=(old + 2_000_000_000, old + 2_000_000_000))
    changed = diff_folder(lib, links, folder)
    assert [c.shown for c in changed.bucket(Bucket.CHANGED)] == [CAFE_SHOWN]
    [r] = [apply_change(lib, links, changed.folder, c) for c in chosen(changed, {CAFE_SHOWN})]  # picked as shown
    assert r.status == "added" and r.path == CAFE_SHOWN
    hit = lib.search("green tea from Japan", k=1)[0]
    assert hit.chunk.doc_id == r.doc_id and "green tea" in hit.chunk.text
    assert not any("espresso" in h.chunk.text for h in lib.search("espresso beans Ethiopia", k=5))

    os.remove(cafe)
    gone = diff_folder(lib, links, folder)
    assert [c.shown for c in gone.bucket(Bucket.REMOVED)] == [CAFE_SHOWN]
    [r] = [apply_change(lib, links, gone.folder, c) for c in chosen(gone)]
    assert r.status == "added" and r.doc_id not in {d.doc_id for d in lib.documents()}
    assert len(lib.documents()) == len(TEXT) - 1


def test_cli_json_is_utf8_for_latin1_names(cli, tmp_path):
    data = str(tmp_path / "data")
    path = _write(tmp_path / "in", CAFE, TEXT[CAFE])
    run = cli("ingest", path, "--json", "--data-dir", data)
    assert run.returncode == 0, run.stderr
    [added] = json.loads(run.stdout.encode("utf-8"))["results"]
    assert added["status"] == "added" and added["path"].endswith(CAFE_SHOWN) and added["title"] == "caf\ufffd"
    run = cli("list", "--json", "--data-dir", data)
    assert [d["title"] for d in json.loads(run.stdout.encode("utf-8"))["documents"]] == ["caf\ufffd"]
    run = cli("search", "espresso beans", "--json", "--data-dir", data)
    assert json.loads(run.stdout.encode("utf-8"))["hits"][0]["doc_id"] == added["doc_id"]
    run = cli("list", "--data-dir", data)
    assert "caf\ufffd" in run.stdout and run.stdout.encode("utf-8")

    folder = tmp_path / "Stick"
    _write(folder, b"r\xe9sum\xe9s/notes.md", TEXT[b"r\xe9sum\xe9s/notes.md"])
    run = cli("sync", str(folder), "--json", "--yes", "--data-dir", data)
    assert run.returncode == 0, run.stderr
    synced = json.loads(run.stdout.encode("utf-8"))
    assert synced["new"] == ["r\ufffdsum\ufffds/notes.md"] and synced["applied"][0]["status"] == "added"
    run = cli("sync", str(folder), "--data-dir", data)
    assert run.returncode == 0 and "Stick" in run.stdout and run.stdout.encode("utf-8")


def test_mcp_adds_lists_and_finds_a_latin1_name(settings, embedder, tmp_path):
    folder = tmp_path / "Stick"
    real = _write(folder, CAFE, TEXT[CAFE])
    holder = LibraryHolder(settings, idle_close_s=0, embedder=embedder)
    server = build_server(settings, holder, allow_writes=True, allow_dirs=(folder.resolve(),))
    shown = str(folder.resolve() / CAFE_SHOWN)  # what an agent sees and can send back: JSON holds only UTF-8

    async def body(c: Client) -> None:
        added = await c.call_tool("add_document", {"path": shown})
        assert not added.is_error, added.content
        assert added.structured_content["title"] == "caf\ufffd"
        listed = (await c.call_tool("list_documents", {})).structured_content
        assert [d["title"] for d in listed["documents"]] == ["caf\ufffd"]
        found = (await c.call_tool("search", {"query": "espresso beans from Ethiopia"})).structured_content
        assert found["passages"][0]["title"] == "caf\ufffd"
        missing = await c.call_tool("add_document", {"path": str(folder.resolve() / "caf\ufffd\ufffd.txt")})
        assert missing.is_error and "There is no file" in " ".join(getattr(x, "text", "") for x in missing.content)

    async def main() -> None:
        async with Client(server) as c:
            await body(c)

    try:
        run_async(main)
    finally:
        holder.close()
    assert os.path.exists(real)
