"""The library as Model Context Protocol tools for agents: `python -m rag_core mcp` (stdio; `--http` for streamable
HTTP on 127.0.0.1), built on the official `mcp` SDK's MCPServer.

Tools: search, ask, summarize (rag_core.adapters.mcp.summaries), list_documents, get_passage, library_changes
(rag_core.adapters.mcp.changes); add_document and import_wikipedia only with `--allow-writes` (not
even listed otherwise), and add_document reads only files under the `--allow-dir` folders (rag_core.adapters.mcp.files).
Every failure (bad arguments, an unknown document, the library in use, even a crash) is an MCP error result with
one sentence, never the SDK's "Error executing tool …" wrapper nor a traceback in the log; stdout is the protocol
channel, so logging goes to stderr.

Concurrency: the embedded store (Qdrant Edge) admits one process per data folder. The library is opened at the
first tool call, not at start-up, and closed again after `idle_close_s` without calls, so the DocChat app and an
MCP client that keeps this server running all day can take turns. While the app holds the folder, a tool call
answers with the fix (stop the app, use a Qdrant server via QDRANT_URL, or serve a copy of the data folder); the
server stays up and the next call tries again. With QDRANT_URL both run at once. See docs/mcp.md.
"""
from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from rag_core.adapters.mcp.changes import add_changes_tool
from rag_core.adapters.mcp.errors import DocChatMCPServer
from rag_core.adapters.mcp.files import NO_FOLDER_ALLOWED, read_confined
from rag_core.adapters.mcp.summaries import add_summary_tool
from rag_core.answer.grounding.citations import citation_json, source_url
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, LibraryBusy
from rag_core.core.formats import accepted_kinds, location_label
from rag_core.core.models import DocKind
from rag_core.core.names import find_shown, printable_text

if TYPE_CHECKING:  # pragma: no cover
    from rag_core.core.models import Chunk, DocumentInfo, Passage
    from rag_core.service.library import Library
    from rag_core.store.embeddings import Embedder

log = logging.getLogger(__name__)

SERVER_NAME = "docchat"
IDLE_CLOSE_S = 30.0  # seconds without a call before the embedded library is given back to other programs
NEIGHBOUR_CHARS = 400  # text shown before and after a get_passage range
MAX_PASSAGE_CHARS = 20_000  # the longest range get_passage returns at once
MAX_DOC_IDS = 100
CACHED_DOCUMENTS = 16  # documents whose passages get_passage keeps in memory
INSTRUCTIONS = (
    "DocChat is the user's private document library (their PDFs, Office files, spreadsheets, web pages, e-books, "
    "scans, notes and imported Wikipedia articles). Call list_documents to see what is there, search to find passages, ask for a short answer whose "
    "citations were checked against the passages, summarize for a whole document (or to compare two), and get_passage to read the exact text around a passage "
    "(doc_id, char_start, char_end from a search result or citation). Quote and cite what you use: title and "
    "location (page, slide, sheet, chapter or section), and for Wikipedia the URL and licence.")
BUSY_HINT = ("For this MCP server: stop the DocChat app (or the other program) and call the tool again, since this "
             "server stays up and retries; or point DOCCHAT_DATA_DIR at a copy of the data folder; or run Qdrant as a "
             "server and set QDRANT_URL for both, so they can run at the same time.")

DocIds = Annotated[list[Annotated[str, Field(min_length=1, max_length=200)]] | None, Field(
    None, max_length=MAX_DOC_IDS,
    description="Only these documents (ids from list_documents); leave out to use the whole library.")]


def _sentence(e: DocChatError) -> str:
    """The user's sentence of a DocChat error, with its technical part."""
    return f"{e} ({e.details})" if e.details else str(e)


class LibraryHolder:
    """Opens the Library at first use, shares it between concurrent calls, and closes it after `idle_close_s`
    without calls (0: keep it open) so another program can open an embedded library meanwhile."""

    def __init__(self, settings: Settings, idle_close_s: float = IDLE_CLOSE_S, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.idle_close_s = idle_close_s
        self._lock = threading.Lock()
        self._embedder_lock = threading.Lock()
        self._cache_lock = threading.Lock()
        self._embedder = embedder
        self._lib: Library | None = None
        self._users = 0
        self._last_used = time.monotonic()
        self._stop = threading.Event()
        self._chunks: dict[str, list[Chunk]] = {}  # doc_id -> its chunks (content-addressed ids: never stale)

    def embedder(self) -> Embedder:
        """The embedding model, loaded once for the life of the server."""
        with self._embedder_lock:
            if self._embedder is None:
                from rag_core.store.model_record import library_model
                from rag_core.store.server_embeddings import open_embedder

                self._embedder = open_embedder(self.settings, library_model(self.settings))
            return self._embedder

    def start(self) -> None:
        """Load the model in the background (so the first call is quick) and start the idle watcher."""
        threading.Thread(target=self._warm, name="mcp-warm-up", daemon=True).start()
        if self.idle_close_s > 0 and not self.settings.library.qdrant_url:
            threading.Thread(target=self._watch, name="mcp-idle-close", daemon=True).start()

    def _warm(self) -> None:
        try:
            self.embedder()
        except Exception:  # the first call reports it as a sentence
            log.warning("Loading the embedding model in the background failed", exc_info=True)

    def _watch(self) -> None:
        while not self._stop.wait(min(1.0, self.idle_close_s / 4)):
            self.close_if_idle()

    @contextmanager
    def use(self) -> Iterator[Library]:
        """The open library for one call (opened now if needed); DocChat errors become MCP tool errors."""
        try:
            with self._lock:
                if self._lib is None:
                    self._lib = self._open()
                self._users += 1
                lib = self._lib
            try:
                yield lib
            finally:
                with self._lock:
                    self._users -= 1
                    self._last_used = time.monotonic()
        except LibraryBusy as e:
            raise ToolError(f"{_sentence(e)} {BUSY_HINT}") from e
        except DocChatError as e:
            raise ToolError(_sentence(e)) from e

    def _open(self) -> Library:
        from rag_core.service.library import Library

        started = time.perf_counter()
        lib = Library(self.settings, embedder=self.embedder())
        log.info("Opened the library in %s (%.2f s)", self.settings.library.data_dir, time.perf_counter() - started)
        return lib

    def close_if_idle(self) -> bool:
        """Close the library when nobody uses it and the last call ended `idle_close_s` ago; True if closed."""
        with self._lock:  # closed under the lock: a call arriving now waits, then opens it again
            if self._lib is None or self._users or time.monotonic() - self._last_used < self.idle_close_s:
                return False
            lib, self._lib = self._lib, None
            lib.close()
        log.info("Closed the library after %.0f s without calls", self.idle_close_s)
        return True

    def close(self) -> None:
        """Stop the watcher and close the library."""
        self._stop.set()
        with self._lock:
            lib, self._lib = self._lib, None
            if lib is not None:
                lib.close()

    def chunks_of(self, lib: Library, doc_id: str) -> list[Chunk]:
        """Every stored chunk of one complete document, in order (read by one scan of the stored passages, then
        kept for the last CACHED_DOCUMENTS documents)."""
        with self._cache_lock:
            return self._chunks_of(lib, doc_id)

    def _chunks_of(self, lib: Library, doc_id: str) -> list[Chunk]:
        if doc_id not in self._chunks:
            from rag_core.store.vector_store import COMPLETE, METADATA_KEY, STATUS_KEY, chunk_from_payload

            found = [chunk_from_payload(p.payload) for batch in lib.store.backend.points(with_vectors=False)
                     for p in batch if p.payload[METADATA_KEY]["doc_id"] == doc_id
                     and p.payload[METADATA_KEY].get(STATUS_KEY, COMPLETE) == COMPLETE]
            while len(self._chunks) >= CACHED_DOCUMENTS:
                self._chunks.pop(next(iter(self._chunks)))
            self._chunks[doc_id] = sorted(found, key=lambda c: c.index)
        return self._chunks[doc_id]


# -- result shapes --------------------------------------------------------------------------------------------------
def _link(url: str | None, lang: str | None, kind: str, anchor: str | None = None) -> str | None:
    """A Wikipedia link only when it is a checked https://<lang>.wikipedia.org/wiki/… address (plus the section)."""
    if kind != DocKind.WIKIPEDIA:
        return url
    from rag_core.sources.wikipedia import checked_article_url

    try:
        checked = checked_article_url(url, lang or "")
    except DocChatError:
        return None
    return f"{checked}#{anchor}" if checked and anchor else checked


def _passage_url(p: Passage) -> str | None:
    src = p.chunk.source
    return _link(src.url, src.lang, src.kind, p.chunk.anchor) if src.kind == DocKind.WIKIPEDIA else source_url(p)


def passage_result(p: Passage, n: int) -> dict[str, Any]:
    """One search hit: where it is (title, pages, section, character range, and `location` in the words of its kind:
    "slide 3 — Budget", "sheet Budget"), its score, text and attribution."""
    c, src = p.chunk, p.chunk.source
    return {"n": n, "doc_id": c.doc_id, "title": src.title, "kind": src.kind, "page": c.page_start,
            "page_end": c.page_end, "section": c.section or None, "location": location_label(c) or None,
            "char_start": c.char_start, "char_end": c.char_end,
            "score": round(p.score, 4), "text": c.text, "url": _passage_url(p), "license": src.license,
            "revision_id": src.revision_id}


def document_result(d: DocumentInfo) -> dict[str, Any]:
    """One library entry."""
    from rag_core.sources.wikipedia import LICENSE

    wiki = d.kind == DocKind.WIKIPEDIA
    return {"doc_id": d.doc_id, "title": d.title, "kind": d.kind, "file_name": d.file_name or None,
            "pages": d.pages, "chunks": d.chunks, "added_at": d.added_at, "url": _link(d.url, d.lang, d.kind),
            "license": LICENSE if wiki else None, "lang": d.lang, "revision_id": d.revision_id}


def _check_doc_ids(lib: Library, doc_ids: list[str] | None) -> list[str] | None:
    if doc_ids is None:
        return None
    known = {d.doc_id for d in lib.documents()}
    unknown = [d for d in doc_ids if d not in known]
    if unknown:
        raise ToolError(f"No document with id “{unknown[0]}” is in the library; call list_documents for the ids.")
    return doc_ids


def _cut(chunks: list[Chunk], start: int, end: int) -> str:
    """The document's text in [start, end) rebuilt from its chunks (each is an exact slice; a gap between two
    chunks, only ever whitespace left out of both, comes back as line breaks of its length, so offsets line up)."""
    out = ["\n"] * max(0, end - start)
    for c in chunks:
        lo, hi = max(start, c.char_start), min(end, c.char_end)
        if lo < hi:
            out[lo - start:hi - start] = c.text[lo - c.char_start:hi - c.char_start]
    return "".join(out)


# -- the server -----------------------------------------------------------------------------------------------------
def build_server(settings: Settings, holder: LibraryHolder, allow_writes: bool = False,
                 use_llm: bool = True, allow_dirs: tuple[Path, ...] = ()) -> MCPServer:
    """An MCPServer with DocChat's tools over `holder`'s library (the write tools only when `allow_writes`, and
    add_document only for files under `allow_dirs`, resolved by rag_core.adapters.mcp.files.allowed_dirs; `ask` quotes the
    documents without a model when `use_llm` is False or no model is configured or reachable)."""
    server: MCPServer = DocChatMCPServer(SERVER_NAME, title="DocChat document library", instructions=INSTRUCTIONS,
                                         log_level="WARNING")
    _add_read_tools(server, settings, holder, use_llm)
    _add_passage_tool(server, holder)
    add_summary_tool(server, settings, holder, use_llm)
    add_changes_tool(server, settings, holder)
    if allow_writes:
        _add_write_tools(server, settings, holder, allow_dirs)
    return server


READ_ONLY = ToolAnnotations(read_only_hint=True, open_world_hint=False)


def _add_read_tools(server: MCPServer, settings: Settings, holder: LibraryHolder, use_llm: bool) -> None:
    """search, ask and list_documents."""

    @server.tool(annotations=READ_ONLY)
    def search(query: Annotated[str, Field(min_length=1, max_length=2000, description="What to look for, in words.")],
               k: Annotated[int, Field(ge=1, le=50, description="How many passages to return.")] = 5,
               doc_ids: DocIds = None) -> dict[str, Any]:
        """Find the passages of the user's documents that best match a query (hybrid: meaning and words).

        Each passage has its title, page or section, character range in its document (for get_passage), score
        and text; Wikipedia passages also carry their URL and licence (CC BY-SA 4.0), which you must credit."""
        if not query.strip():
            raise ToolError("The query is empty; say in a few words what to look for.")
        with holder.use() as lib:
            hits = lib.search(query, k=k, doc_ids=_check_doc_ids(lib, doc_ids))
        return {"query": query, "passages": [passage_result(p, i) for i, p in enumerate(hits, 1)]}

    @server.tool(annotations=READ_ONLY)
    def ask(question: Annotated[str, Field(min_length=1, max_length=2000, description="A question in words.")],
            doc_ids: DocIds = None) -> dict[str, Any]:
        """Answer a question from the user's documents only, with numbered citations [n] that were checked
        against the cited passages (status "verified" when the passage holds the claim).

        Without a configured language model the answer quotes the most relevant sentences ("quotes" mode).
        mode "not_found" means the library does not answer it; "closest" true means no quote answers directly
        (the nearest passages are shown for the reader to judge); "notice" explains anything unusual."""
        from rag_core.answer.generation import answer

        if not question.strip():
            raise ToolError("The question is empty; ask it in words.")
        with holder.use() as lib:
            ans = answer(lib, question, settings, doc_ids=_check_doc_ids(lib, doc_ids), use_llm=use_llm)
        citations = [{**citation_json(c), "location": location_label(c.passage.chunk) or None,
                      "url": _passage_url(c.passage), "license": c.passage.chunk.source.license}
                     for c in ans.citations]
        return {"answer": ans.text, "mode": ans.mode, "citations": citations, "notice": ans.notice,
                "incomplete": ans.incomplete, "closest": bool(ans.extra.get("closest"))}

    @server.tool(annotations=READ_ONLY)
    def list_documents() -> dict[str, Any]:
        """List every document in the library, newest first: id, title, kind, pages, passages, and for Wikipedia
        articles the URL, language, revision and licence."""
        with holder.use() as lib:
            docs = lib.documents()
        return {"documents": [document_result(d) for d in docs]}


def _add_passage_tool(server: MCPServer, holder: LibraryHolder) -> None:
    """get_passage: the exact text of a character range, with its neighbours."""

    @server.tool(annotations=READ_ONLY)
    def get_passage(doc_id: Annotated[str, Field(min_length=1, max_length=200,
                                                 description="The document id (from search or list_documents).")],
                    char_start: Annotated[int, Field(ge=0, description="First character of the range.")],
                    char_end: Annotated[int, Field(ge=1, description="One past the last character of the range.")]
                    ) -> dict[str, Any]:
        """Read the exact text of a document between two character offsets (as given by search results and
        citations), with up to 400 characters before and after it for context."""
        if char_end <= char_start:
            raise ToolError(f"The range is empty: char_end ({char_end}) must be greater than char_start ({char_start}).")
        if char_end - char_start > MAX_PASSAGE_CHARS:
            raise ToolError(f"That range is {char_end - char_start} characters; ask for at most {MAX_PASSAGE_CHARS} "
                            "at a time.")
        with holder.use() as lib:
            info = lib.store.get(doc_id)
            if info is None:
                raise ToolError(f"No document with id “{doc_id}” is in the library; call list_documents for the ids.")
            chunks = holder.chunks_of(lib, doc_id)
        length = max((c.char_end for c in chunks), default=0)
        if char_start >= length:
            raise ToolError(f"“{info.title}” has {length} characters; char_start {char_start} is past its end.")
        end = min(char_end, length)
        inside = [c for c in chunks if c.char_start < end and c.char_end > char_start]
        pages = [p for c in inside for p in (c.page_start, c.page_end) if p is not None]
        return {"doc_id": doc_id, "title": info.title, "char_start": char_start, "char_end": end,
                "document_chars": length, "text": _cut(chunks, char_start, end),
                "before": _cut(chunks, max(0, char_start - NEIGHBOUR_CHARS), char_start),
                "after": _cut(chunks, end, min(length, end + NEIGHBOUR_CHARS)),
                "page_start": min(pages, default=None), "page_end": max(pages, default=None),
                "section": inside[0].section or None if inside else None,
                **{k: v for k, v in document_result(info).items() if k in ("url", "license", "kind")}}


def _add_write_tools(server: MCPServer, settings: Settings, holder: LibraryHolder,
                     allow_dirs: tuple[Path, ...]) -> None:
    adds = ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True)
    where = (f"Only files inside these folders can be added: {', '.join(str(d) for d in allow_dirs)}."
             if allow_dirs else NO_FOLDER_ALLOWED)

    @server.tool(annotations=adds.model_copy(update={"open_world_hint": False}), description=(
        f"Add one file from this computer to the library (adding the same file again changes nothing): a "
        f"{accepted_kinds(extensions=True)} file. {where}"))
    def add_document(path: Annotated[str, Field(min_length=1, max_length=4096, description=(
            "Absolute path of the file, inside an allowed folder."))]) -> dict[str, Any]:
        try:  # a file name that is not UTF-8 comes back as it was shown (with U+FFFD)
            real, data = read_confined(find_shown(path), allow_dirs, settings)
        except DocChatError as e:
            raise ToolError(printable_text(_sentence(e))) from e
        with holder.use() as lib:
            r = lib.ingest_bytes(data, real.name, label=str(real))
        if r.status == "failed":
            raise ToolError(r.error or f"“{real.name}” could not be added.")
        return r.as_json()

    @server.tool(annotations=adds.model_copy(update={"open_world_hint": True}))
    def import_wikipedia(title: Annotated[str, Field(min_length=1, max_length=300, description=(
            "The article's title (or its https://<lang>.wikipedia.org/wiki/… address)."))],
            lang: Annotated[str, Field(min_length=2, max_length=12, description=(
                "Language edition code, e.g. en, de, fr."))] = "en") -> dict[str, Any]:
        """Import one Wikipedia article into the library (with its URL, revision and CC BY-SA 4.0 licence).

        status "disambiguation" means the title names several articles: pick one of "candidates" and call again."""
        from rag_core.service.wiki_sync import import_article
        from rag_core.sources.wikipedia import LICENSE

        with holder.use() as lib:
            r = import_article(lib, settings, title, lang=lang)
        if r.status == "failed":
            raise ToolError(r.error or f"“{title}” could not be imported.")
        return {**r.as_json(), "url": _link(r.url, r.lang, DocKind.WIKIPEDIA), "license": LICENSE}


def serve(settings: Settings, allow_writes: bool = False, http_port: int | None = None,
          idle_close_s: float = IDLE_CLOSE_S, use_llm: bool = True, allow_dirs: tuple[Path, ...] = ()) -> None:
    """Run the MCP server until the client goes away: stdio, or streamable HTTP on 127.0.0.1:`http_port`."""
    if allow_writes and not allow_dirs:  # it serves (import_wikipedia reads no local file); add_document refuses
        log.warning(NO_FOLDER_ALLOWED)
    holder = LibraryHolder(settings, idle_close_s)
    server = build_server(settings, holder, allow_writes, use_llm, allow_dirs)
    holder.start()
    try:
        if http_port is None:
            server.run("stdio")
        else:
            log.warning("DocChat MCP server at http://127.0.0.1:%d/mcp", http_port)
            server.run("streamable-http", host="127.0.0.1", port=http_port)
    finally:
        holder.close()
