"""add_document confined for real (issue 37 item 1): no file at all without --allow-dir, and with one only regular
files whose real path is inside it. Driven through the official `mcp` client (`stdio_client` + `ClientSession`)
against `python -m rag_core mcp …` as a subprocess, as a new user's assistant would; the swaps between check and
open (TOCTOU) and the system folders with "/" allowed run against the in-process server (the SDK's in-memory
transport), where the swap can be timed exactly. Every refusal checks its sentence and that the library gained no
document.
"""
from __future__ import annotations

import os
import shutil
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import run_async, server_env  # tests/ is on the path (pytest.ini)

from rag_core.adapters.mcp import files
from rag_core.adapters.mcp.files import NO_FOLDER_ALLOWED, allowed_dirs
from rag_core.core.config import Settings
from rag_core.ingest import folder_confine

ROOT = Path(__file__).resolve().parents[2]
SECRET = "The launch code of the pumping station is 7731-0000."
NOTES = "The pumping station was inspected by the water board in April."
CALL_LIMIT_S = 20.0  # a refusal (a FIFO included) must come back well within this, even on a busy machine
POSIX_FILES = pytest.mark.skipif(os.name != "posix", reason="symbolic links and FIFOs as POSIX systems make them")
pytestmark = pytest.mark.slow






class Session:
    """The official client's session, with a call that gives (is_error, text or structured result, seconds)."""

    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def call(self, tool: str, args: dict[str, Any] | None = None) -> tuple[bool, Any, float]:
        started = time.monotonic()
        with anyio.fail_after(CALL_LIMIT_S):
            r = await self.session.call_tool(tool, args or {})
        took = time.monotonic() - started
        if r.is_error:
            return True, " ".join(getattr(c, "text", "") for c in r.content), took
        return False, r.structured_content, took

    async def documents(self) -> list[dict[str, Any]]:
        bad, out, _ = await self.call("list_documents")
        assert not bad, out
        return out["documents"]


def over_stdio(data: Path, flags: list[str], body: Callable[[Session], Awaitable[None]], errlog: Path) -> None:
    """Spawn `python -m rag_core mcp FLAGS` with the official stdio client and run `body` on its session."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "rag_core", "mcp", *flags], cwd=str(ROOT),
                                   env=server_env(data))

    async def main() -> None:
        with errlog.open("w", encoding="utf-8") as err:
            async with stdio_client(params, errlog=err) as (read, write), \
                    ClientSession(read, write, read_timeout_seconds=120) as session:
                await session.initialize()
                await body(Session(session))

    run_async(main)


def one_sentence(message: str) -> None:
    """A refusal as the model sees it: one friendly sentence (a refusal of ingest's kind may add a short second one
    with the fix), never the SDK's wrapper, a pydantic report or a traceback."""
    assert not message.startswith("Error executing tool"), message
    assert "Traceback" not in message and "\n" not in message and "validation error" not in message, message
    assert message[0].isupper() or message[0] in "“`", message
    assert message.rstrip().endswith((".", ")")), message


@pytest.fixture
def tree(tmp_path) -> Iterator[dict[str, Path]]:
    """allowed/ (notes.md, a folder sub/) beside outside/ (secret.md): what an assistant may and may not read."""
    allowed, outside = tmp_path / "allowed", tmp_path / "outside"
    (allowed / "sub").mkdir(parents=True)
    outside.mkdir()
    (outside / "secret.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    (allowed / "notes.md").write_text(f"# Notes\n\n{NOTES}\n", encoding="utf-8")
    yield {"allowed": allowed, "outside": outside, "secret": outside / "secret.md", "notes": allowed / "notes.md"}


# -- over stdio, as the report: the official client against `python -m rag_core mcp` ---------------------------------
def test_without_allow_dir_add_document_refuses_every_path_over_stdio(tmp_path, tree):
    """`mcp --allow-writes` without --allow-dir: the server starts (import_wikipedia reads no local file), says on
    stderr how to allow a folder, and add_document answers every path, `/tmp/../etc/passwd` and `/proc/self/maps`
    included, with that one sentence; nothing is added."""
    paths = ["/tmp/../etc/passwd", "/etc/passwd", str(tree["notes"]), str(tree["secret"]), "notes.md",
             f"{tree['allowed']}/sub/../../outside/secret.md"]
    if sys.platform.startswith("linux"):
        paths += ["/proc/self/maps", "/proc/self/root/etc/passwd", "/dev/zero"]

    async def body(s: Session) -> None:
        tools = {t.name: t for t in (await s.session.list_tools()).tools}
        assert {"add_document", "import_wikipedia"} <= set(tools)
        assert "--allow-dir FOLDER" in (tools["add_document"].description or "")
        for path in paths:
            bad, message, took = await s.call("add_document", {"path": path})
            assert bad and message == NO_FOLDER_ALLOWED, (path, message)
            one_sentence(message)
        assert await s.documents() == []

    errlog = tmp_path / "stderr.txt"
    over_stdio(tmp_path / "data", ["--allow-writes"], body, errlog)
    err = errlog.read_text(encoding="utf-8")
    assert NO_FOLDER_ALLOWED in err and "Traceback" not in err, err[-2000:]
    assert "restart it with `docchat mcp --allow-writes --allow-dir FOLDER`" in NO_FOLDER_ALLOWED


@POSIX_FILES
def test_with_allow_dir_every_way_out_is_refused_over_stdio(tmp_path, tree):
    """`mcp --allow-writes --allow-dir ALLOWED`: "..", links leading out (one, a chain, a dangling one), a link loop,
    a folder, a FIFO (answered at once: never opened for a blocking read), and on Linux /proc (directly, through a
    link to /proc/self, /proc/self/root through a link) and /dev (directly and through links) are each refused with
    their sentence; the library stays empty until the allowed file is added, which works."""
    allowed, outside, secret, notes = tree["allowed"], tree["outside"], tree["secret"], tree["notes"]
    (allowed / "escape.md").symlink_to(secret)
    (allowed / "chain2.md").symlink_to(secret)
    (allowed / "chain1.md").symlink_to(allowed / "chain2.md")
    (allowed / "dangling.md").symlink_to(outside / "gone.md")
    (allowed / "dangling-inside.md").symlink_to(allowed / "gone.md")
    (allowed / "loop.md").symlink_to(allowed / "loop.md")
    (allowed / "out").symlink_to(outside)
    (allowed / "folder.md").mkdir()
    os.mkfifo(allowed / "pipe.md")  # nobody writes to it: a blocking open for reading would hang the server
    (allowed / "sub" / "same.md").symlink_to(notes)  # a link that stays inside is fine
    outside_words = f"is outside the folders this server may read from (“{allowed}”)"
    link_out = f"is a link that leads outside the folders this server may read from (“{allowed}”)"
    refused = [("/tmp/../etc/passwd", outside_words),
               (f"{allowed}/sub/../../outside/secret.md", outside_words),
               (f"{allowed}/../../../../../../../../etc/passwd", outside_words),
               (str(secret), outside_words),
               (str(allowed / "escape.md"), link_out),
               (str(allowed / "chain1.md"), link_out),
               (str(allowed / "dangling.md"), link_out),
               (str(allowed / "out" / "secret.md"), link_out),
               (str(allowed / "dangling-inside.md"), "There is no file"),
               (str(allowed / "loop.md"), "is a link that could not be followed to a file"),
               (str(allowed / "folder.md"), "“folder.md”: this is a folder, not a document file"),
               (str(allowed / "pipe.md"), "“pipe.md”: this is a named pipe (FIFO), not a document file")]
    if sys.platform.startswith("linux"):
        (allowed / "proc").symlink_to("/proc/self")
        (allowed / "root").symlink_to("/proc/self/root")
        (allowed / "zero.md").symlink_to("/dev/zero")
        (allowed / "random.txt").symlink_to("/dev/urandom")
        refused += [(path, f"“{path}” is a system file (under {under}), not a document, so it was not read.")
                    for path, under in [("/proc/self/maps", "/proc"), (str(allowed / "proc" / "maps"), "/proc"),
                                        ("/dev/zero", "/dev"), ("/dev/urandom", "/dev"),
                                        (str(allowed / "zero.md"), "/dev"), (str(allowed / "random.txt"), "/dev")]]
        refused.append((str(allowed / "root" / "etc" / "passwd"), link_out))

    async def body(s: Session) -> None:
        for path, words in refused:
            bad, message, took = await s.call("add_document", {"path": path})
            assert bad and words in message, (path, message)
            assert message.startswith((f"“{path}”", "“", "There is no file")), message
            one_sentence(message)
            assert took < CALL_LIMIT_S / 2, (path, took)
        assert await s.documents() == []  # nothing was read, nothing was added
        bad, added, _ = await s.call("add_document", {"path": str(notes)})
        assert not bad and added["status"] == "added" and added["path"] == str(notes.resolve()), added
        bad, again, _ = await s.call("add_document", {"path": str(allowed / "sub" / "same.md")})
        assert not bad and again["status"] == "unchanged", again
        assert [d["title"] for d in await s.documents()] == ["Notes"]
        bad, found, _ = await s.call("search", {"query": "pumping station launch code", "k": 5})
        assert not bad and found["passages"] and not any("7731" in p["text"] for p in found["passages"])

    errlog = tmp_path / "stderr.txt"
    over_stdio(tmp_path / "data", ["--allow-writes", "--allow-dir", str(allowed), "--no-llm"], body, errlog)
    err = errlog.read_text(encoding="utf-8")
    assert "Traceback" not in err and NO_FOLDER_ALLOWED not in err, err[-2000:]


# -- in process: the system folders with "/" allowed, and swaps between the check and the open ------------------------
def in_memory(server: Any, body: Callable[[Session], Awaitable[None]]) -> None:
    """Run `body` against `server` through the SDK's in-memory transport (the real protocol, no spawn)."""
    async def main() -> None:
        async with Client(server) as c:
            await body(Session(c.session))

    run_async(main)


def server_for(settings: Settings, embedder: Any, folders: list[Path]) -> tuple[Any, Any]:
    from rag_core.adapters.mcp.server import LibraryHolder, build_server

    holder = LibraryHolder(settings, idle_close_s=0, embedder=embedder)
    return build_server(settings, holder, allow_writes=True, use_llm=False, allow_dirs=allowed_dirs(folders)), holder


@pytest.mark.linux_only("/proc, /sys and Linux's /dev")
def test_system_folders_stay_out_even_with_the_root_allowed(tmp_path, embedder):
    """`--allow-dir /`: /proc, /sys and /dev are still refused, directly and through a link with a document's name
    (the real path decides, not the name), and nothing is added."""
    (tmp_path / "maps.md").symlink_to("/proc/self/maps")
    (tmp_path / "random.pdf").symlink_to("/dev/urandom")
    settings = Settings(data_dir=tmp_path / "data")
    server, holder = server_for(settings, embedder, [Path("/")])
    cases = [("/proc/self/maps", "/proc"), ("/proc/self/environ", "/proc"), ("/proc/self/root/proc/self/maps", "/proc"),
             ("/dev/zero", "/dev"), ("/dev/urandom", "/dev"), ("/sys/kernel/uevent_helper", "/sys"),
             (str(tmp_path / "maps.md"), "/proc"), (str(tmp_path / "random.pdf"), "/dev")]

    async def body(s: Session) -> None:
        for path, under in cases:
            bad, message, _ = await s.call("add_document", {"path": path})
            assert bad and message == f"“{path}” is a system file (under {under}), not a document, so it was not read.", (
                path, message)
            one_sentence(message)
        assert holder._lib is None  # refused before the library was even opened
        assert await s.documents() == []

    try:
        in_memory(server, body)
    finally:
        holder.close()


def _to_link_out(t: dict[str, Path]) -> None:
    """The checked file becomes a link to the secret outside."""
    t["target"].unlink()
    t["target"].symlink_to(t["secret"])


def _folder_to_link_out(t: dict[str, Path]) -> None:
    """The folder holding the checked file becomes a link to a folder outside holding a file of the same name."""
    shutil.rmtree(t["allowed"] / "sub")
    (t["allowed"] / "sub").symlink_to(t["outside"])


def _to_fifo(t: dict[str, Path]) -> None:
    """The checked file becomes a FIFO nobody writes to."""
    t["target"].unlink()
    os.mkfifo(t["target"])


def _to_other_file(t: dict[str, Path]) -> None:
    """The checked file is replaced by another one with the secret's text (written first, so it has another inode:
    after an unlink the file system would hand the freed inode number to the next file)."""
    other = t["target"].with_name("other.md")
    other.write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    os.replace(other, t["target"])


REPLACED = "was replaced while it was being opened, so it was not read; try again."
# (swap, when, openat walk or by path, the refusal's words). "resolved": the swap comes right after the path was
# resolved (before its stat); "checked": after every check, just before the open.
SWAPS = [(_to_link_out, "resolved", "is a link that could not be followed to a file"),
         (_to_link_out, "checked", REPLACED),
         (_folder_to_link_out, "resolved", REPLACED),  # the hole: stat and open followed the new link out
         (_folder_to_link_out, "checked", REPLACED),
         (_to_fifo, "resolved", "this is a named pipe (FIFO), not a document file"),
         (_to_fifo, "checked", "this is a named pipe (FIFO), not a document file"),
         (_to_other_file, "checked", REPLACED)]


@POSIX_FILES
@pytest.mark.parametrize("walk", [True, False], ids=["openat", "by-path"])
@pytest.mark.parametrize(("swap", "when", "words"), SWAPS,
                         ids=[f"{s.__name__.strip('_')}-{w}" for s, w, _ in SWAPS])
def test_a_file_swapped_between_check_and_open_is_refused(tmp_path, tree, embedder, monkeypatch, swap, when, words,
                                                         walk):
    """TOCTOU: whatever is swapped in at either moment (a link out, a folder turned link, a FIFO, another file), the
    open does not follow it (O_NOFOLLOW on every component from the allowed folder, or by path on systems without
    dir_fd, rechecking the real path) and the descriptor's fstat must be the regular file checked; refused in
    bounded time and nothing added. `by-path` is the Windows way (no dir_fd), run here with the walk turned off."""
    (tree["outside"] / "x.md").write_text(f"# Secret\n\n{SECRET}\n", encoding="utf-8")
    target = tree["allowed"] / "sub" / "x.md"
    target.write_text(f"# Notes\n\n{NOTES}\n", encoding="utf-8")
    t = {**tree, "target": target}
    assert folder_confine.WALKS_FROM_FOLDER  # Linux and macOS open component by component
    monkeypatch.setattr(folder_confine, "WALKS_FROM_FOLDER", walk)
    swapped: list[str] = []

    def once() -> None:
        if not swapped:
            swapped.append(when)
            swap(t)

    if when == "resolved":
        real_realpath = os.path.realpath

        def resolving(path: Any, *args: Any, **kwargs: Any) -> Any:
            out = real_realpath(path, *args, **kwargs)
            if os.fspath(path) == str(target):
                once()
            return out

        monkeypatch.setattr(os.path, "realpath", resolving)
    else:
        real_check = files.confined_path

        def checking(path: str, allowed: tuple[Path, ...]) -> Any:
            out = real_check(path, allowed)
            once()
            return out

        monkeypatch.setattr(files, "confined_path", checking)
    settings = Settings(data_dir=tmp_path / "data")
    server, holder = server_for(settings, embedder, [tree["allowed"]])

    async def body(s: Session) -> None:
        bad, message, took = await s.call("add_document", {"path": str(target)})
        assert swapped == [when]
        assert bad and words in message, message
        one_sentence(message)
        assert took < CALL_LIMIT_S / 2
        assert await s.documents() == []

    try:
        in_memory(server, body)
    finally:
        holder.close()


@POSIX_FILES
def test_the_open_never_follows_a_link_and_never_blocks():
    """The flags the confinement relies on, where the system has them (all POSIX systems)."""
    assert folder_confine.FILE_FLAGS & os.O_NOFOLLOW and folder_confine.FILE_FLAGS & os.O_NONBLOCK
    assert folder_confine.DIR_FLAGS & os.O_NOFOLLOW and folder_confine.DIR_FLAGS & os.O_DIRECTORY
    assert os.open in os.supports_dir_fd and folder_confine.WALKS_FROM_FOLDER
