"""The MCP server end to end: the official SDK's own client spawns `python -m rag_core mcp` over stdio (and once over
streamable HTTP) against a real library on disk, filled first with a real fixture file by the real embedding model.

Each spawn loads the embedding model in its own process (~5-10 s on a busy 2-core machine), so the spawns are few
and each test checks several things on one server.
"""
from __future__ import annotations

import json
import logging
import os
import socket
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import free_port, run_async, server_env  # tests/ is on the path (pytest.ini)
from wiki_server import FIXTURES as WIKI_FIXTURES  # tests/ is on the path (pytest.ini)
from wiki_server import WikiReplayServer

from rag_core.answer.notices import NOTICE_NO_LLM
from rag_core.core.config import Settings
from rag_core.core.errors import LibraryBusy
from rag_core.service.library import Library

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "tests" / "fixtures" / "documents"
CAPITALS = DOCS / "eu_capitals.md"
READ_TOOLS = {"search", "ask", "summarize", "list_documents", "get_passage", "library_changes"}
WRITE_TOOLS = {"add_document", "import_wikipedia"}
pytestmark = pytest.mark.slow








def run_client(data_dir: Path, flags: list[str], body: Callable[[Client], Awaitable[None]], errlog: Path,
               **env: str) -> None:
    """Spawn `python -m rag_core mcp FLAGS` with the SDK's stdio client and run `body` against it."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "rag_core", "mcp", *flags], cwd=str(ROOT),
                                   env=server_env(data_dir, **env))

    async def main() -> None:
        with errlog.open("w", encoding="utf-8") as err:
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=120) as client:
                await body(client)

    run_async(main)


def one_sentence(message: str) -> None:
    """A tool error as the model sees it: one friendly sentence (or two short ones), not the SDK's "Error executing
    tool …" wrapper, a pydantic report or a traceback."""
    assert not message.startswith("Error executing tool"), message
    assert "Traceback" not in message and "\n" not in message and "validation error" not in message, message
    assert message[0].isupper() or message[0] in "“`", message
    assert message.rstrip().endswith((".", ")")), message


async def call(client: Client, tool: str, args: dict[str, Any] | None = None) -> tuple[bool, Any]:
    """(is_error, structured result or the error text)."""
    r = await client.call_tool(tool, args or {})
    if r.is_error:
        return True, " ".join(getattr(c, "text", "") for c in r.content)
    assert r.structured_content is not None
    text = getattr(r.content[0], "text", "")
    assert json.loads(text) == r.structured_content  # unstructured clients get the same JSON as text
    return False, r.structured_content


@pytest.fixture(scope="module")
def filled(tmp_path_factory, embedder) -> Path:
    """A data folder holding eu_capitals.md (closed again, so a spawned server can open it)."""
    data = tmp_path_factory.mktemp("mcp") / "data"
    lib = Library(Settings(data_dir=data), embedder=embedder)
    try:
        assert lib.ingest_path(CAPITALS).status == "added"
    finally:
        lib.close()
    return data


@pytest.fixture
def protocol_log(caplog):
    """Anything the client could not parse as a protocol message (a stray line on the server's stdout)."""
    caplog.set_level(logging.WARNING, logger="mcp")
    yield caplog
    bad = [r.getMessage() for r in caplog.records if "parse" in r.getMessage().lower()]
    assert not bad, bad


def test_read_tools_bad_arguments_and_a_library_in_use(filled, embedder, tmp_path, protocol_log):
    """One server: first the app holds the library (a clear error), then every read tool and bad arguments, then
    the server lets the library go after --idle-close seconds without calls, so the app can open it again."""
    text = CAPITALS.read_text(encoding="utf-8")
    settings = Settings(data_dir=filled)
    state: dict[str, Any] = {"app": Library(settings, embedder=embedder)}  # stands for the running DocChat app

    async def body(c: Client) -> None:
        tools = {t.name: t for t in (await c.list_tools()).tools}  # listing needs no library
        assert set(tools) == READ_TOOLS  # the write tools are not even listed without --allow-writes
        bad, message = await call(c, "search", {"query": "Paris"})
        assert bad
        for words in ("in use by another DocChat process", "stop the DocChat app", "QDRANT_URL",
                      "copy of the data folder"):
            assert words in message, message
        state["app"].close()  # the app stops: the next call opens the library
        for t in tools.values():
            assert t.description and len(t.description) > 60 and t.input_schema["type"] == "object"
        search_schema = tools["search"].input_schema
        assert search_schema["required"] == ["query"]
        assert search_schema["properties"]["k"]["maximum"] == 50 and search_schema["properties"]["k"]["default"] == 5
        assert "description" in search_schema["properties"]["doc_ids"]
        assert tools["get_passage"].input_schema["required"] == ["doc_id", "char_start", "char_end"]

        bad, docs = await call(c, "list_documents")
        assert not bad
        (doc,) = docs["documents"]
        assert (doc["title"], doc["kind"], doc["chunks"] > 1, doc["license"]) == (
            "Capitals of the European Union", "md", True, None)

        bad, found = await call(c, "search", {"query": "Which river flows through Lisbon?", "k": 2})
        assert not bad and len(found["passages"]) == 2
        top = found["passages"][0]
        assert "Lisbon" in top["text"] and top["doc_id"] == doc["doc_id"] and top["section"].endswith("Portugal")
        assert text[top["char_start"]:top["char_end"]] == top["text"]  # offsets index the original file
        assert isinstance(top["score"], float) and top["n"] == 1

        bad, scoped = await call(c, "search", {"query": "Lisbon", "doc_ids": [doc["doc_id"]], "k": 1})
        assert not bad and scoped["passages"][0]["doc_id"] == doc["doc_id"]

        bad, passage = await call(c, "get_passage", {"doc_id": doc["doc_id"], "char_start": top["char_start"],
                                                     "char_end": top["char_end"]})
        assert not bad and passage["text"] == top["text"]
        assert passage["after"] == text[top["char_end"]:top["char_end"] + len(passage["after"])]
        assert passage["before"] == text[top["char_start"] - len(passage["before"]):top["char_start"]]
        assert passage["before"] and passage["after"] and len(passage["before"]) <= 400

        bad, ans = await call(c, "ask", {"question": "What is the capital of France?"})
        assert not bad and ans["mode"] == "quotes" and "Paris" in ans["answer"]
        assert "The AI model that writes answers is not available" in ans["notice"]  # so these are quotes
        assert ans["citations"] and all(x["status"] == "verified" for x in ans["citations"])
        cited = ans["citations"][0]
        assert cited["quote"] in text and "[1]" in ans["answer"]

        # Bad arguments: an error result the model can read, naming what is wrong; the server keeps serving.
        for tool, args, words in [
                ("search", {"query": "Paris", "k": 500}, ["k", "less than or equal to 50"]),
                ("search", {}, ["query", "required"]),
                ("search", {"query": 42}, ["query", "string"]),
                ("search", {"query": "   "}, ["query is empty"]),
                ("search", {"query": "Paris", "doc_ids": ["no-such-doc"]}, ["no-such-doc", "list_documents"]),
                ("ask", {"question": "Paris?", "doc_ids": "not-a-list"}, ["doc_ids", "list"]),
                ("get_passage", {"doc_id": "nope", "char_start": 0, "char_end": 5}, ["nope", "list_documents"]),
                ("get_passage", {"doc_id": doc["doc_id"], "char_start": 50, "char_end": 10}, ["greater than"]),
                ("get_passage", {"doc_id": doc["doc_id"], "char_start": -1, "char_end": 10}, ["char_start"]),
                ("get_passage", {"doc_id": doc["doc_id"], "char_start": 10**6, "char_end": 10**6 + 1},
                 ["past its end"]),
                ("get_passage", {"doc_id": doc["doc_id"], "char_start": 0, "char_end": 10**6}, ["at most"]),
                ("add_document", {"path": str(CAPITALS)}, ["Unknown tool"]),
                ("search", {"query": "x" * 5000}, ["query", "2000"])]:
            bad, message = await call(c, tool, args)
            assert bad, (tool, args)
            assert all(w.lower() in message.lower() for w in words), (tool, args, message)
            one_sentence(message)
        assert (await call(c, "list_documents"))[1] == docs

        # After --idle-close seconds without calls the server lets go, so the app can start again...
        deadline = time.monotonic() + 15
        while True:
            try:
                state["app"] = Library(settings, embedder=embedder)
                break
            except LibraryBusy:
                assert time.monotonic() < deadline, "the server never closed the idle library"
                await anyio.sleep(0.3)
        bad, message = await call(c, "list_documents")  # ...and then it is the server that has to wait
        assert bad and "QDRANT_URL" in message

    try:
        run_client(filled, ["--idle-close", "1"], body, tmp_path / "stderr.txt")
    finally:
        state["app"].close()
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text(encoding="utf-8")


def test_write_tools_only_with_the_flag(tmp_path, protocol_log):
    data = tmp_path / "data"
    adams = json.loads((WIKI_FIXTURES / "redirect_query-fv2_adams-douglas.json").read_text(encoding="utf-8"))
    summary = json.loads((WIKI_FIXTURES / "rest_page-summary_douglas-adams.json").read_text(encoding="utf-8"))
    adams["query"]["pages"][0]["extract"] = summary["extract"]  # plain text, as in test_wikipedia.adams_body

    async def body(c: Client) -> None:
        assert {t.name for t in (await c.list_tools()).tools} == READ_TOOLS | WRITE_TOOLS
        bad, added = await call(c, "add_document", {"path": str(CAPITALS)})
        assert not bad and added["status"] == "added" and added["chunks"] > 1
        assert (await call(c, "add_document", {"path": str(CAPITALS)}))[1]["status"] == "unchanged"
        for path, words in [("relative/file.md", ["absolute path"]),
                            (str(tmp_path / "missing.pdf"), ["missing.pdf"]),
                            (str(tmp_path), ["folder"]),
                            (f"{DOCS}/../../../../../../../../etc/passwd", ["outside the folders"]),
                            (str(ROOT / "README.md"), ["outside the folders", "--allow-dir"]),
                            (f"{DOCS}/eu_capitals.md\x00.pdf", ["control character"])]:
            bad, message = await call(c, "add_document", {"path": path})
            assert bad and all(w in message for w in words), message
            one_sentence(message)

        bad, imported = await call(c, "import_wikipedia", {"title": "Adams, Douglas", "lang": "en"})
        assert not bad, imported
        assert (imported["status"], imported["title"], imported["license"]) == ("added", "Douglas Adams",
                                                                                 "CC BY-SA 4.0")
        assert imported["url"].startswith("https://en.wikipedia.org/wiki/")
        bad, message = await call(c, "import_wikipedia", {"title": "Python", "lang": "en/../x"})
        assert bad and "language" in message

        bad, found = await call(c, "search", {"query": "Hitchhiker's Guide to the Galaxy author", "k": 1})
        hit = found["passages"][0]
        assert (hit["kind"], hit["license"]) == ("wikipedia", "CC BY-SA 4.0")
        assert hit["url"].startswith("https://en.wikipedia.org/wiki/") and hit["revision_id"]
        listed = (await call(c, "list_documents"))[1]["documents"]
        assert {d["kind"] for d in listed} == {"md", "wikipedia"}

        bad, ans = await call(c, "ask", {"question": "Which river flows through Lisbon?"})
        assert not bad and ans["mode"] == "quotes" and "Tagus" in ans["answer"]
        assert ans["notice"] == NOTICE_NO_LLM  # --no-llm: quotes by choice, no model asked

    with WikiReplayServer() as wiki:
        wiki.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams)
        run_client(data, ["--allow-writes", "--allow-dir", str(DOCS), "--allow-dir", str(tmp_path), "--no-llm"], body,
                   tmp_path / "stderr.txt",
                   DOCCHAT_WIKIPEDIA_API=wiki.url_template, DOCCHAT_WIKIPEDIA_CONTACT="docchat-tests@example.invalid",
                   DOCCHAT_WIKIPEDIA_BACKOFF_S="0.02")
    assert "Traceback" not in (tmp_path / "stderr.txt").read_text(encoding="utf-8")


def test_streamable_http_on_localhost(filled, tmp_path):
    port = free_port()
    env = {**os.environ, **server_env(filled)}
    with (tmp_path / "out.txt").open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "rag_core", "mcp", "--http", "--port", str(port)],
                                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, (tmp_path / "out.txt").read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.2)

        async def main() -> None:
            async with Client(f"http://127.0.0.1:{port}/mcp") as c:
                assert {t.name for t in (await c.list_tools()).tools} == READ_TOOLS
                bad, message = await call(c, "get_passage", {"doc_id": "x", "char_start": 9, "char_end": 3})
                assert bad and "greater than" in message

        run_async(main)
    finally:
        proc.terminate()
        proc.wait(timeout=20)


@pytest.mark.slow
def test_idle_close_never_fails_a_call_in_flight(filled, embedder):
    """In process (the SDK's in-memory transport): calls spaced just over the idle time race the idle close (a
    close takes ~0.2 s), yet all succeed, and each close really lets go of the embedded library."""
    from rag_core.adapters.mcp.server import LibraryHolder, build_server

    settings = Settings(data_dir=filled)
    holder = LibraryHolder(settings, idle_close_s=0.02, embedder=embedder)
    server = build_server(settings, holder, use_llm=False)
    holder.start()
    doc_id = ""
    errors: list[str] = []

    async def one(c: Client, i: int) -> None:
        await anyio.sleep(0.06 * i)
        tool, args = [("search", {"query": "Lisbon", "k": 1}), ("list_documents", {}),
                      ("get_passage", {"doc_id": doc_id, "char_start": 0, "char_end": 40})][i % 3]
        bad, out = await call(c, tool, args)
        if bad:
            errors.append(out)

    async def main() -> None:
        nonlocal doc_id
        async with Client(server) as c:
            doc_id = (await call(c, "list_documents"))[1]["documents"][0]["doc_id"]
            for _ in range(2):
                async with anyio.create_task_group() as tg:
                    for i in range(30):
                        tg.start_soon(one, c, i)
                deadline = time.monotonic() + 30  # idle: the watcher closes the library (slow on a busy machine)...
                while holder._lib is not None:
                    assert time.monotonic() < deadline, "the idle library was never closed"
                    await anyio.sleep(0.02)
                with holder._lock:  # the close runs under the lock, after _lib is set to None
                    pass
                Library(settings, embedder=embedder).close()  # ...so another process (here: this one) can open it

    try:
        run_async(main)
    finally:
        holder.close()
    assert not errors, errors[:3]


def in_memory(body: Callable[[Client], Awaitable[None]], server: Any) -> None:
    """Run `body` against `server` through the SDK's in-memory transport (the real protocol, no spawn)."""
    async def main() -> None:
        async with Client(server) as c:
            await body(c)

    run_async(main)


def test_add_document_reads_only_regular_files_inside_the_allowed_folders(embedder, tmp_path, caplog):
    """An agent steered by an injected document must not pull other files into the library: paths climbing out
    with "..", links leading out, /proc and /dev, pipes, folders and other file kinds are refused with a sentence,
    before anything is opened; the file that is allowed is added."""
    from rag_core.adapters.mcp.files import allowed_dirs
    from rag_core.adapters.mcp.server import LibraryHolder, build_server

    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text("# Secret\n\nThe launch code of the pumping station is 7731-0000.\n", encoding="utf-8")
    notes = allowed / "notes.md"
    notes.write_text("# Notes\n\nThe pumping station was inspected by the water board in April.\n", encoding="utf-8")
    (allowed / "escape.md").symlink_to(secret)  # a link inside that leads out
    (allowed / "sub" / "same.md").symlink_to(notes)  # a link that stays inside is fine
    (allowed / "folder.md").mkdir()
    (allowed / "key").write_text("not a document kind\n", encoding="utf-8")
    settings = Settings(data_dir=tmp_path / "data")
    holder = LibraryHolder(settings, idle_close_s=0, embedder=embedder)
    server = build_server(settings, holder, allow_writes=True, use_llm=False, allow_dirs=allowed_dirs([allowed]))
    refused = [(f"{allowed}/sub/../../outside/secret.md", "outside the folders"),
               (f"{allowed}/sub/../../../../../../../../etc/passwd", "outside the folders"),
               (str(secret), "outside the folders"),
               (str(allowed / "escape.md"), "link that leads outside"),
               (str(allowed / "folder.md"), "folder"),
               (str(allowed / "key"), "file type"),
               (str(allowed / "missing.md"), "no file"),
               (f"{notes}\x00.pdf", "control character"),
               ("notes.md", "absolute path")]
    if hasattr(os, "mkfifo"):
        os.mkfifo(allowed / "pipe.md")  # nobody ever writes to it: opening it for reading would hang
        refused.append((str(allowed / "pipe.md"), "named pipe"))
    if sys.platform.startswith("linux"):
        refused += [("/proc/self/maps", "system file"), ("/dev/zero", "system file")]

    async def body(c: Client) -> None:
        for path, words in refused:
            bad, message = await call(c, "add_document", {"path": path})
            assert bad and words in message, (path, message)
            one_sentence(message)
        assert (await call(c, "list_documents"))[1]["documents"] == []  # nothing was read, nothing added
        bad, added = await call(c, "add_document", {"path": str(notes)})
        assert not bad and added["status"] == "added" and added["path"] == str(notes.resolve())
        bad, again = await call(c, "add_document", {"path": str(allowed / "sub" / "same.md")})
        assert not bad and again["status"] == "unchanged"
        found = (await call(c, "search", {"query": "pumping station launch code", "k": 5}))[1]["passages"]
        assert found and not any("7731" in p["text"] for p in found)

    caplog.set_level(logging.DEBUG)
    try:
        in_memory(body, server)
    finally:
        holder.close()
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.INFO], "a traceback was logged"


def test_add_document_without_allowed_folders_and_system_folders(tmp_path):
    """No --allow-dir: no local file at all, and the sentence says how to allow one. Even with "/" allowed, /proc,
    /sys and /dev stay out. No library is opened for a refused path."""
    from rag_core.adapters.mcp.files import allowed_dirs
    from rag_core.adapters.mcp.server import LibraryHolder, build_server

    settings = Settings(data_dir=tmp_path / "data")
    holder = LibraryHolder(settings, idle_close_s=0)
    (tmp_path / "a.md").write_text("# A\n\nsome text\n", encoding="utf-8")
    none = build_server(settings, holder, allow_writes=True, allow_dirs=())
    everything = build_server(settings, holder, allow_writes=True, allow_dirs=allowed_dirs([Path("/")]))

    async def refuse_all(c: Client) -> None:
        bad, message = await call(c, "add_document", {"path": str(tmp_path / "a.md")})
        assert bad and "--allow-dir" in message and "restart" in message, message
        one_sentence(message)

    async def refuse_system(c: Client) -> None:
        for path in ("/proc/self/maps", "/proc/self/environ", "/sys/kernel/uevent_helper", "/dev/null"):
            if os.path.lexists(path):
                bad, message = await call(c, "add_document", {"path": path})
                assert bad and "system file" in message, (path, message)

    in_memory(refuse_all, none)
    if sys.platform.startswith("linux"):
        in_memory(refuse_system, everything)
    assert holder._lib is None  # nothing needed the library


def test_every_tool_error_is_one_sentence(tmp_path, caplog):
    """Bad arguments and a crash inside a tool: a sentence for the model, no SDK wrapper, no traceback in the log
    and nothing of the crash's own text (it may hold paths or data)."""
    from rag_core.adapters.mcp.server import LibraryHolder, build_server

    class Broken(LibraryHolder):
        def use(self):  # type: ignore[override]
            raise RuntimeError("internal detail /home/me/secret")

    settings = Settings(data_dir=tmp_path / "data")
    server = build_server(settings, Broken(settings, idle_close_s=0), allow_writes=True, allow_dirs=())

    async def body(c: Client) -> None:
        for tool, args, words in [("list_documents", {}, ["list_documents", "unexpected"]),
                                  ("search", {"query": "x"}, ["search", "unexpected"]),
                                  ("search", {"query": "x", "k": 0}, ["“k”", "greater than or equal to 1"]),
                                  ("search", {"k": "many"}, ["“query”", "required", "“k”", "integer"]),
                                  ("get_passage", {"doc_id": "d"}, ["“char_start”", "“char_end”"]),
                                  ("import_wikipedia", {"title": ""}, ["“title”", "at least 1"]),
                                  ("no_such_tool", {}, ["no_such_tool", "list_documents"])]:
            bad, message = await call(c, tool, args)
            assert bad and all(w in message for w in words), (tool, message)
            assert "internal detail" not in message
            one_sentence(message)

    caplog.set_level(logging.DEBUG)
    in_memory(body, server)
    assert not [r for r in caplog.records if r.exc_info and r.levelno >= logging.INFO], "a traceback was logged"
    assert any("RuntimeError" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
