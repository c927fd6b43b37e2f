"""Use cases called by the UI and the CLI: ingest, list, search, delete.

The Library also owns the private copies of PDFs (rag_core.ingest.originals, for "Show on the page"): every way of adding a
PDF keeps its copy, every way of deleting a document removes it.
"""
from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import DocChatError, FileTooLarge, NotARegularFile, NoText
from rag_core.core.formats import ACCEPTED_EXTENSIONS
from rag_core.core.models import Chunk, Document, DocumentInfo, IngestStatus, Passage, Progress
from rag_core.core.names import display_name, printable_text
from rag_core.ingest.chunking import chunk_document, estimate
from rag_core.ingest.loaders import check_size, load_bytes, read_file
from rag_core.ingest.originals import KINDS_KEPT, delete_original, load_original, save_original
from rag_core.injection.classifier import flag_vectors
from rag_core.injection.detect import flag_chunks
from rag_core.retrieve.search import retrieve
from rag_core.store.embeddings import Embedder
from rag_core.store.migrate import migrate_if_needed
from rag_core.store.server_embeddings import open_embedder  # issue 46
from rag_core.store.vector_store import Store, open_store, stamp

log = logging.getLogger(__name__)

_PROJECT_FROM = 500  # passages: a document estimated this large is refused up front when it cannot finish in time
_SPEED_SAMPLE_MIN = 16  # chunks: fewer say too little about the embedding speed
_CHUNKING_PASSES = 2.5  # splitting tokenizes a text about twice (counting, cutting long runs), plus the Python work
_FLAG_STEP = 64  # passages looked at for instructions between two deadline checks (~0.5 s on a busy machine: 503
#                  passages took 2.7-4.2 s in one go at load 7, with Stop unseen; issue 24)


@dataclass(frozen=True)
class IngestResult:
    """What happened to one file."""

    path: str
    status: IngestStatus  # a plain string given here ("failed") becomes the enum
    doc_id: str | None = None
    chunks: int = 0
    pages: int | None = None
    title: str | None = None
    error: str | None = None
    details: str = ""  # the technical part of a failure (a setting's name), shown folded away under the error

    def __post_init__(self) -> None:
        """Take "added", "failed", ... as their enum members; the file's name (its path as given) and the sentences
        as they can be shown (`display_name`: a name that is not UTF-8 with U+FFFD, so every report is UTF-8)."""
        object.__setattr__(self, "status", IngestStatus(self.status))
        object.__setattr__(self, "path", display_name(self.path))
        for key in ("title", "error", "details"):
            value = getattr(self, key)
            if value:
                object.__setattr__(self, key, printable_text(value))

    def as_json(self) -> dict:
        """The CLI's JSON shape."""
        return {"path": self.path, "status": str(self.status), "doc_id": self.doc_id, "chunks": self.chunks,
                "pages": self.pages, "title": self.title, "error": self.error}


def _flagged(chunks: list[Chunk], hidden: Iterable[str], deadline: Deadline) -> list[Chunk]:
    """`flag_chunks` in steps of _FLAG_STEP passages, checking the deadline (and Stop) between them."""
    out: list[Chunk] = []
    hidden = tuple(hidden)
    for i in range(0, len(chunks), _FLAG_STEP):
        deadline.check()
        out.extend(flag_chunks(chunks[i:i + _FLAG_STEP], hidden))
    return out


def scoped_doc_id(doc_id: str, owner: str) -> str:
    """The id of a document inside one owner's private library."""
    return hashlib.sha256(f"{doc_id}:{owner}".encode()).hexdigest()[:16]


class Library:
    """A user's document library: the embedding model plus the Qdrant store, opened once."""

    def __init__(self, settings: Settings, embedder: Embedder | None = None, store: Store | None = None,
                 progress: Progress | None = None) -> None:
        self.settings = settings
        self.embedder = embedder or open_embedder(settings)  # issue 46: the local model or a model server's
        if store is None:  # a library of the previous release is upgraded first (`progress`: "upgrading")
            migrate_if_needed(settings, self.embedder, progress)
        self.store = store or open_store(settings, self.embedder)
        self._seconds_per_chunk: float | None = None  # embedding speed seen lately (for refusing hopeless files)

    # -- ingest --------------------------------------------------------------
    def check_size(self, file_name: str, size: int) -> None:
        """FileTooLarge when a file of `size` bytes is over the upload limit (checked before any work)."""
        check_size(file_name, size, self.settings)

    def deadline(self, file_name: str) -> Deadline:
        """The time budget of one file (DOCCHAT_INGEST_TIMEOUT_S), starting now: pass it to `load_bytes` and then
        to `ingest_document`, so reading the file counts too."""
        return Deadline(self.settings.ingest.timeout_s, file_name)

    def ingest_document(self, doc: Document, owner: str | None = None, progress: Progress | None = None,
                        label: str | None = None, original: bytes | None = None,
                        deadline: Deadline | None = None, replaces: str | None = None) -> IngestResult:
        """Chunk, embed and store an already-loaded Document (idempotent by doc_id); `original` is the file's bytes,
        kept privately for PDFs so a cited page can be shown; `replaces`: the document of its file's old version,
        removed in the same step this one appears (Store.replace_document). Past `deadline` (default: a budget starting now) the
        work stops with IngestTimedOut and nothing is stored; a file that clearly cannot finish by then is refused
        before chunking."""
        name = label or doc.source.file_name
        deadline = deadline or self.deadline(doc.source.file_name)
        progress = deadline.watch(progress)  # every progress report (each embedding and saving batch) checks it
        if owner is not None:
            # Private libraries (hosted demo): the same file uploaded by two sessions is two documents.
            doc = replace(doc, doc_id=scoped_doc_id(doc.doc_id, owner))
        existing = self.store.intact(doc.doc_id)  # None too when its passages are not all stored: added again
        if existing is not None:
            self._keep_original(doc.doc_id, doc.source.kind, original)  # repairs a copy lost or never made
            if replaces and replaces != doc.doc_id:
                self._retire(replaces)
            return IngestResult(name, IngestStatus.UNCHANGED, doc.doc_id, existing.chunks, existing.pages,
                                existing.title)
        doc = replace(doc, source=stamp(doc.source))
        progress("chunking", 0, 1)
        self._refuse_if_too_slow(doc, deadline)
        chunks = chunk_document(doc, self.embedder, self.settings.ingest.chunk_tokens, deadline=deadline)
        if not chunks:
            raise NoText(doc.source.file_name)
        chunks = _flagged(chunks, doc.hidden_text, deadline)  # instructions addressed to an AI, shown beside citations
        started = time.monotonic()
        vectors = self.store.embed_chunks(chunks, progress)
        chunks = flag_vectors(chunks, vectors[0], self.embedder.name)  # the classifier, on the same vectors
        self._learn_speed(len(chunks), time.monotonic() - started)
        deadline.check()  # before saving (saving checks it again after every batch, rolling back when stopped)
        if replaces:
            info = self.store.replace_document(replaces, doc.source, chunks, doc.page_count, vectors, progress)
        else:
            info = self.store.add_chunks(doc.source, chunks, doc.page_count, owner=owner, progress=progress,
                                         vectors=vectors)
        self._keep_original(info.doc_id, doc.source.kind, original)
        if replaces and replaces != info.doc_id:
            delete_original(self.settings, replaces)
        return IngestResult(name, IngestStatus.ADDED, info.doc_id, info.chunks, info.pages, info.title)

    def _refuse_if_too_slow(self, doc: Document, deadline: Deadline) -> None:
        """IngestTimedOut now, before any chunking, when a large document clearly cannot be split and embedded within
        its time budget: its size in chunks is estimated from samples of its text (`chunking.estimate`), splitting
        it costs about `_CHUNKING_PASSES` times what tokenizing the samples took, and the time per chunk is what
        the last documents took to embed, or is measured on those samples the first time."""
        if deadline.left() == float("inf"):
            return
        started = time.monotonic()
        est = estimate(doc, self.embedder, self.settings.ingest.chunk_tokens)
        if est.passages < _PROJECT_FROM or not est.samples:
            return  # small: it just runs (the deadline still holds)
        chunking_s = (time.monotonic() - started) * _CHUNKING_PASSES * len(doc.text) / max(est.sampled_chars, 1)
        per_chunk = self._seconds_per_chunk
        if per_chunk is None:  # time the model on samples: a few first, to give up early when clearly hopeless
            samples = list(est.samples[:_SPEED_SAMPLE_MIN])
            started = time.monotonic()
            self.embedder.encode(samples[:4], background=True)
            deadline.refuse_if_longer(chunking_s + est.passages * (time.monotonic() - started) / len(samples[:4]) / 2)
            for i in range(4, len(samples), 4):  # in steps of 4, each about a second on a busy machine: Stop is
                deadline.check()                     # seen between them
                self.embedder.encode(samples[i:i + 4], background=True)
            per_chunk = self._learn_speed(len(samples), time.monotonic() - started)
        log.info("%s: about %d passages, about %.0f s to split and %.0f s to embed (%.0f s left of its budget)",
                 doc.source.file_name, est.passages, chunking_s, est.passages * per_chunk, deadline.left())
        deadline.refuse_if_longer(chunking_s + est.passages * per_chunk)

    def _learn_speed(self, chunks: int, seconds: float) -> float:
        """Remember how long embedding took per chunk (a moving average over recent documents); returns it."""
        if chunks < _SPEED_SAMPLE_MIN:
            return self._seconds_per_chunk or seconds / max(chunks, 1)
        measured = seconds / chunks
        old = self._seconds_per_chunk
        self._seconds_per_chunk = measured if old is None else 0.5 * old + 0.5 * measured
        return self._seconds_per_chunk

    def _retire(self, old_id: str) -> None:
        """Remove the old version of a file whose new content is in the library already."""
        self.store.retire(old_id)
        delete_original(self.settings, old_id)

    def _keep_original(self, doc_id: str, kind: str, data: bytes | None) -> None:
        """Save the private copy of a PDF; a failure costs only the page image, so it is logged, not raised."""
        if data is None or kind not in KINDS_KEPT:
            return
        try:
            save_original(self.settings, doc_id, data, kind)
        except OSError:
            log.exception("Could not keep a copy of document %s for page images", doc_id)

    def ingest_bytes(self, data: bytes, file_name: str, owner: str | None = None,
                     progress: Progress | None = None, label: str | None = None,
                     replaces: str | None = None) -> IngestResult:
        """Add one uploaded file; never raises for bad input, the result says what happened."""
        label = label or file_name
        try:
            self.check_size(file_name, len(data))
            deadline = self.deadline(file_name)
            if progress:
                progress("reading", 0, 1)
            doc = load_bytes(data, file_name, self.settings, deadline, progress)  # ("ocr", page, pages) for scans
            return self.ingest_document(doc, owner, progress, label, original=data, deadline=deadline,
                                        replaces=replaces)
        except DocChatError as e:
            log.info("Could not add %s: %s", file_name, e)
            return IngestResult(label, IngestStatus.FAILED, error=str(e), details=e.details)
        except Exception:  # the user gets a sentence, the log gets the traceback
            log.exception("Unexpected failure while adding %s", file_name)
            return IngestResult(label, IngestStatus.FAILED, error=(
                f"“{file_name}”: something unexpected went wrong while reading this file; your library was not "
                "changed. Try again, and if it keeps failing, convert the file to PDF and upload that."))

    def ingest_path(self, path: Path, owner: str | None = None, progress: Progress | None = None,
                    replaces: str | None = None) -> IngestResult:
        """Add one file from disk: only regular files, read no further than the upload limit (`read_file`);
        `replaces`: the document of the file's previous version."""
        try:
            data = read_file(path, self.settings)
        except OSError as e:
            return IngestResult(str(path), IngestStatus.FAILED,
                                error=f"“{path.name}”: the file could not be opened ({e.strerror}).")
        except (FileTooLarge, NotARegularFile) as e:
            return IngestResult(str(path), IngestStatus.FAILED, error=str(e), details=e.details)
        return self.ingest_bytes(data, path.name, owner, progress, label=str(path), replaces=replaces)

    # -- read / delete -------------------------------------------------------
    def documents(self, owners: Iterable[str | None] | None = None) -> list[DocumentInfo]:
        """The library listing, newest first."""
        return self.store.list_documents(owners)

    def search(self, query: str, k: int = 5, doc_ids: Iterable[str] | None = None,
               owners: Iterable[str | None] | None = None) -> list[Passage]:
        """Top-k passages for a query (the default hybrid retrieval)."""
        return retrieve(self.store, query, k, doc_ids, owners)

    def delete(self, doc_id: str, owners: Iterable[str | None] | None = None) -> DocumentInfo:
        """Delete a document, its chunks and its saved original."""
        info = self.store.delete(doc_id, owners)
        delete_original(self.settings, doc_id)
        return info

    def remove(self, doc_id: str) -> DocumentInfo:
        """Soft-delete a document: hidden from the listing and searches, kept for `restore` (folder sync)."""
        return self.store.remove(doc_id)

    def restore(self, doc_id: str) -> DocumentInfo:
        """Undo `remove`."""
        return self.store.restore(doc_id)

    def removed(self) -> list[tuple[DocumentInfo, float]]:
        """Soft-deleted documents, with when they were removed, newest first."""
        return self.store.removed()

    def purge(self, doc_id: str) -> None:
        """Delete a soft-deleted document for good, with its saved original."""
        self.store.purge(doc_id)
        delete_original(self.settings, doc_id)

    def original(self, doc_id: str, owners: Iterable[str | None] | None = None) -> bytes | None:
        """The saved PDF of a document visible to `owners` (None: any), or None when there is none."""
        if self.store.get(doc_id, owners) is None:
            return None
        return load_original(self.settings, doc_id)

    def close(self) -> None:
        """Release the store."""
        self.store.close()


def expand_paths(paths: Iterable[str]) -> list[Path]:
    """Files named on the command line; folders are walked for supported extensions."""
    out: list[Path] = []
    for raw in paths:
        p = Path(raw)
        if p.is_dir():
            out.extend(sorted(q for q in p.rglob("*") if q.is_file() and q.suffix.lower() in ACCEPTED_EXTENSIONS))
        else:
            out.append(p)
    return out
