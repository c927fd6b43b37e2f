"""Private copies of uploaded PDFs (to show a cited page), stored as <data_dir>/originals/<doc_id>.pdf.

An image of pages is kept as the PDF it was read as (rag_core.ingest.loaders.image.image_to_pdf: a page per picture),
so its pages are drawn, and its recognised words found again, like a scanned PDF's. The user's file name is never part
of a path: only a validated document id is.
"""
from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.core.errors import IngestError
from rag_core.core.files import reserved_on_windows, write_atomic
from rag_core.core.models import DocKind
from rag_core.core.safe_files import read_bytes

log = logging.getLogger(__name__)

_SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,128}$")
KINDS_KEPT = (DocKind.PDF, DocKind.IMAGE)  # the kinds whose pages are drawn: PDFs, and images kept as the PDF they were read as


def originals_dir(settings: Settings) -> Path:
    """The folder that holds the private copies."""
    return settings.library.data_dir / "originals"


def original_path(settings: Settings, doc_id: str) -> Path:
    """Where the copy of document `doc_id` lives; ValueError for an id that is not a plain token. An id Windows
    reserves as a device name ("con", "nul") is stored as "con~.pdf" ("~" is in no id, so no two ids meet)."""
    if not _SAFE_ID.match(doc_id or ""):
        raise ValueError(f"not a document id: {doc_id!r}")
    return originals_dir(settings) / (f"{doc_id}~.pdf" if reserved_on_windows(doc_id) else f"{doc_id}.pdf")


def save_original(settings: Settings, doc_id: str, data: bytes, kind: str) -> Path | None:
    """Keep a private copy of an uploaded PDF, or of an image as the PDF it was read as (atomic, durable write;
    owner-only permissions); other kinds are skipped, and so is an image that cannot be converted (logged)."""
    if kind not in KINDS_KEPT:
        return None
    path = original_path(settings, doc_id)
    if path.exists():
        return path
    if kind == DocKind.IMAGE:
        from rag_core.ingest.loaders.image import image_to_pdf  # Pillow and PyMuPDF only when an image is kept

        try:
            data = image_to_pdf(data, doc_id)
        except IngestError as e:  # it was read a moment ago: only the page image is lost
            log.warning("Not keeping the pages of image document %s: %s", doc_id, e)
            return None
    path.parent.mkdir(parents=True, exist_ok=True)
    os.chmod(path.parent, 0o700)
    write_atomic(path, data, mode=0o600)
    return path


def load_original(settings: Settings, doc_id: str) -> bytes | None:
    """The stored copy of a document, or None when there is none or it can't be read (a regular file only, read up to
    the upload limit whatever its size says: a pipe, a device or an oversized file is logged and skipped)."""
    try:
        return read_bytes(original_path(settings, doc_id), settings.max_upload_bytes)
    except (FileNotFoundError, ValueError):
        return None
    except (OSError, MemoryError) as e:
        log.warning("Not reading the saved original of document %s: %s", doc_id, e)
        return None


def delete_original(settings: Settings, doc_id: str) -> bool:
    """Remove a document's copy; True if one existed."""
    try:
        path = original_path(settings, doc_id)
    except ValueError:
        return False
    if path.exists():
        path.unlink()
        return True
    return False
