"""The hosted demo's shared sample library: the bundled files under samples/ (any kind DocChat reads, and recorded
Wikipedia extracts as JSON), read from local files only."""
from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections.abc import Callable
from pathlib import Path

from rag_core.core.app_files import app_dir
from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError
from rag_core.core.formats import ACCEPTED_EXTENSIONS
from rag_core.core.models import DocKind, Document, IngestStatus, SourceMeta
from rag_core.ingest.loaders import load_bytes
from rag_core.service.library import IngestResult, Library, scoped_doc_id
from rag_core.sources.wikipedia import LICENSE, article_url, split_sections

SAMPLES_DIR = app_dir() / "samples"  # beside app.py, in a checkout or installed (rag_core/core/app_files.py)
SAMPLE_SUFFIXES = (*ACCEPTED_EXTENSIONS, ".json")
SAMPLES_STOP_WAIT_S = 30.0  # on close, a sample still being added may take this long to finish
PREPARING_SAMPLES = ("Preparing the sample documents. This happens on the first visit after the demo has started, "
                     "and takes up to a minute…")

log = logging.getLogger(__name__)


class Preparation:
    """Work done once on a background thread (adding the demo's samples), and whether it is still going on."""

    def __init__(self, name: str) -> None:
        self.name = name
        self._done = threading.Event()
        self._done.set()  # nothing to wait for until start()
        self._thread: threading.Thread | None = None

    def start(self, work: Callable[[], object]) -> None:
        """Run `work` on a daemon thread, unless it is running already."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._done.clear()

        def run() -> None:
            try:
                work()
            except Exception:  # logged with its traceback; the demo runs on without (some) samples, never stuck
                log.exception("The demo's sample documents could not be prepared")
            finally:
                self._done.set()

        self._thread = threading.Thread(target=run, name=self.name, daemon=True)
        self._thread.start()

    @property
    def running(self) -> bool:
        """True until the work has ended."""
        return not self._done.is_set()

    def wait(self, timeout: float | None = None) -> bool:
        """Wait for the work to end: True when it has, False when `timeout` seconds passed first."""
        return self._done.wait(timeout)

    def join(self, timeout: float) -> None:
        """Wait up to `timeout` seconds for the thread to end (its work was asked to stop)."""
        if self._thread is not None:
            self._thread.join(timeout)
            self._thread = None


def sample_files(folder: Path) -> list[Path]:
    """The sample files of `folder`, sorted (READMEs and other kinds are skipped)."""
    if not folder.is_dir():
        return []
    return sorted(p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in SAMPLE_SUFFIXES
                  and not p.name.upper().startswith("README"))


def sample_document(data: bytes, file_name: str, settings: Settings) -> Document:
    """A Document from one sample file's bytes."""
    if file_name.lower().endswith(".json"):
        return recorded_wikipedia(data, file_name)
    return load_bytes(data, file_name, settings)


def recorded_wikipedia(data: bytes, file_name: str) -> Document:
    """A Document from a recorded MediaWiki prop=extracts response (plain text with == headings ==)."""
    try:
        page = next(iter(json.loads(data)["query"]["pages"].values()))
        title, text, page_id = page["title"], page["extract"], int(page["pageid"])
    except (ValueError, KeyError, StopIteration, TypeError) as e:
        raise DocChatError(f"The sample “{file_name}” is not a recorded Wikipedia extract.") from e
    lang = "en"
    source = SourceMeta(file_name=title, title=title, kind=DocKind.WIKIPEDIA.value,
                        sha256=hashlib.sha256(text.encode("utf-8")).hexdigest(), url=article_url(lang, title),
                        license=LICENSE, lang=lang, page_id=page_id)
    doc_id = "wp-sample-" + hashlib.sha256(f"{lang}:{page_id}:{source.sha256}".encode()).hexdigest()[:16]
    return Document(doc_id=doc_id, text=text, sections=split_sections(text), source=source)


def load_shared(library: Library, settings: Settings, owner: str, folder: Path,
                stop: threading.Event | None = None) -> list[IngestResult]:
    """Make `owner`'s documents (the shared samples) exactly the files of `folder`, read with `settings`: add new
    ones, keep unchanged ones, delete those whose file is gone; stops early, leaving the rest as it is, once `stop` is
    set."""
    results: list[IngestResult] = []
    keep: set[str] = set()
    for path in sample_files(folder):
        if stop is not None and stop.is_set():  # the server is closing
            return results
        try:
            data = path.read_bytes()
            doc = sample_document(data, path.name, settings)
        except DocChatError as e:
            log.warning("Sample %s was not loaded: %s", path.name, e)
            results.append(IngestResult(path.name, IngestStatus.FAILED, error=str(e)))
            continue
        keep.add(scoped_doc_id(doc.doc_id, owner))  # the id Library.ingest_document gives it
        try:
            results.append(library.ingest_document(doc, owner=owner, label=path.name, original=data))
        except DocChatError as e:
            log.warning("Sample %s was not loaded: %s", path.name, e)
            results.append(IngestResult(path.name, IngestStatus.FAILED, error=str(e)))
    for d in library.documents(owners=[owner]):
        if d.doc_id not in keep:
            log.info("Removing sample %s (its file is gone)", d.title)
            library.delete(d.doc_id, owners=[owner])
    return results
