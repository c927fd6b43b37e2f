"""File loaders: the only code that knows file formats. Bytes in, a `Document` out.

The type is decided from the content (magic bytes), never trusted from the name: "%PDF-" in the
first 1024 bytes -> PDF; a ZIP with word/document.xml -> DOCX; anything else must be text, and the
extension only picks Markdown (.md/.markdown) over plain text. A file named .pdf/.docx whose content
is something else is refused as damaged rather than silently read as text.
"""
from __future__ import annotations

import io
import logging
import os
import stat
import zipfile
from pathlib import Path, PurePath

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, EmptyFile, FileTooLarge, NotARegularFile, UnsupportedFileType
from rag_core.core.models import Document, Progress, SourceMeta
from rag_core.core.safe_files import describe_mode, read_up_to
from rag_core.ingest.loaders._common import Extracted, doc_id_for

log = logging.getLogger(__name__)

__all__ = ["check_size", "load_bytes", "load_file", "read_file", "sniff_kind", "MARKDOWN_EXTENSIONS"]

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown"})

# Formats DocChat cannot read, recognised by their first bytes, with a friendly description. The
# signatures are specific enough (control bytes, exact versions) that real text does not match them.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"\x89PNG\r\n\x1a\n", "it is a PNG image"),
    (b"\xff\xd8\xff", "it is a JPEG image"),
    (b"GIF87a", "it is a GIF image"),
    (b"GIF89a", "it is a GIF image"),
    (b"II*\x00", "it is a TIFF image"),
    (b"MM\x00*", "it is a TIFF image"),
    (b"ID3\x02", "it is an MP3 audio file"),
    (b"ID3\x03", "it is an MP3 audio file"),
    (b"ID3\x04", "it is an MP3 audio file"),
    (b"OggS\x00", "it is an Ogg audio/video file"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
     "it is an old-style Office file (.doc/.xls/.ppt); save it as .docx or PDF"),
    (b"{\\rtf", "it is an RTF document; save it as .docx or PDF"),
    (b"\x1f\x8b", "it is a gzip archive"),
    (b"Rar!\x1a\x07", "it is a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "it is a 7-Zip archive"),
    (b"\xfd7zXZ\x00", "it is an xz archive"),
    (b"\x7fELF", "it is a program, not a document"),
    (b"SQLite format 3\x00", "it is an SQLite database"),
)


def _binary_kind(head: bytes) -> str | None:
    """A friendly description of a known non-document format, or None."""
    for magic, detail in _MAGIC:
        if head.startswith(magic):
            return detail
    if head[:4] == b"RIFF" and head[8:12] in (b"WEBP", b"WAVE", b"AVI "):
        return "it is a WebP image, WAV audio or AVI video file"
    if head[:2] == b"\x00\x00" and head[4:8] == b"ftyp":
        return "it is a video, audio or HEIC image file"
    return None


# Other ZIP-based formats, recognised by a member name.
_ZIP_KINDS: tuple[tuple[str, str], ...] = (
    ("xl/workbook.xml", "it is an Excel workbook"),
    ("ppt/presentation.xml", "it is a PowerPoint presentation"),
    ("META-INF/container.xml", "it is an e-book (EPUB)"),
    ("content.xml", "it is an OpenDocument file; save it as .docx or PDF"),
)


def check_size(file_name: str, size: int, settings: Settings) -> None:
    """FileTooLarge when a file of `size` bytes is over the upload limit: the one place that decides it."""
    if size > settings.max_upload_bytes:
        raise FileTooLarge(file_name, settings.max_upload_mb)


def load_bytes(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
               progress: Progress | None = None) -> Document:
    """Load an uploaded file's bytes into a Document, or raise an IngestError with a friendly message (IngestTimedOut
    once `deadline` has passed: PDF and Word files are read in a child process stopped at it); `progress` gets
    ("ocr", page, pages) while scanned PDF pages are read (rag_core.ingest.loaders.ocr)."""
    check_size(file_name, len(data), settings)
    if not data or data.isspace():
        raise EmptyFile(file_name)
    kind = sniff_kind(data, file_name)
    log.debug("loading %s (%d bytes) as %s", file_name, len(data), kind)
    if kind == "pdf":
        from rag_core.ingest.loaders.ocr import OcrOptions
        from rag_core.ingest.loaders.pdf import load_pdf

        ocr = OcrOptions(settings.ocr, settings.ocr_language, settings.ocr_dpi)
        extracted: Extracted = load_pdf(data, file_name, deadline, ocr, progress)
    elif kind == "docx":
        from rag_core.ingest.loaders.docx import load_docx

        extracted = load_docx(data, file_name, settings, deadline)
    else:
        from rag_core.ingest.loaders.text import load_text

        extracted = load_text(data, file_name, kind, deadline)
    doc_id, sha256 = doc_id_for(data)
    return Document(
        doc_id=doc_id,
        text=extracted.text,
        sections=extracted.sections,
        source=SourceMeta(file_name=file_name, title=extracted.title, kind=kind, sha256=sha256,
                          scanned_pages=extracted.scanned_pages),
        page_count=extracted.page_count,
        page_starts=extracted.page_starts,
        hidden_text=extracted.hidden,
    )




def read_file(path: str | Path, settings: Settings) -> bytes:
    """The bytes of a regular file, read up to the upload limit: FIFOs, devices and folders are refused before they
    are opened for reading, and reading stops one byte past the limit (FileTooLarge) whatever `stat` says the size
    is (/dev/zero and /proc files say 0). OSError when the file cannot be opened."""
    path = Path(path)
    st = os.stat(path)
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile(path.name, describe_mode(st.st_mode))
    check_size(path.name, st.st_size, settings)  # cheap early refusal; the read below is what enforces it
    # O_NONBLOCK: should the path be swapped for a FIFO after the check, opening it still does not hang.
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    with os.fdopen(fd, "rb") as f:
        mode = os.fstat(f.fileno()).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(path.name, describe_mode(mode))
        data = read_up_to(f.fileno(), settings.max_upload_bytes + 1)
    check_size(path.name, len(data), settings)
    return data


def load_file(path: str | Path, settings: Settings) -> Document:
    """Load a regular file from disk (see `read_file`); the file name is the path's last part."""
    path = Path(path)
    return load_bytes(read_file(path, settings), path.name, settings)


def sniff_kind(data: bytes, file_name: str) -> str:
    """"pdf" | "docx" | "md" | "txt" from the content; raises for formats DocChat cannot read."""
    ext = PurePath(file_name).suffix.lower()
    head = data[:1024]
    if b"%PDF-" in head:
        return "pdf"
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _sniff_zip(data, file_name, ext)
    detail = _binary_kind(head)
    if detail:
        raise UnsupportedFileType(file_name, detail)
    if ext == ".pdf":
        raise CorruptFile(file_name, f"the name ends in .pdf but the content is not a PDF{_looks_like(head)}")
    if ext == ".docx":
        raise CorruptFile(
            file_name, f"the name ends in .docx but the content is not a Word document{_looks_like(head)}"
        )
    return "md" if ext in MARKDOWN_EXTENSIONS else "txt"


def _sniff_zip(data: bytes, file_name: str, ext: str) -> str:
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as e:
        if ext == ".docx":
            raise CorruptFile(file_name, "the Word file's ZIP container is broken") from e
        raise UnsupportedFileType(file_name, "it is a damaged ZIP archive") from e
    if "word/document.xml" in names:
        return "docx"
    detail = next((d for member, d in _ZIP_KINDS if member in names), "it is a ZIP archive")
    if ext == ".docx" and detail == "it is a ZIP archive":
        raise CorruptFile(file_name, "the ZIP archive has no word/document.xml, so it is not a Word document")
    raise UnsupportedFileType(file_name, detail)


def _looks_like(head: bytes) -> str:
    """A short hint of what a mislabelled file really is (", it looks like a web page")."""
    lower = head.lstrip().lower()
    if lower.startswith((b"<!doctype html", b"<html")) or b"<html" in lower[:512]:
        return "; it looks like a web page (HTML), perhaps a login or error page saved instead of the file"
    if b"\x00" in head:
        return ""
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as e:
        if e.start < len(head) - 4:  # not just a multi-byte character cut off at the end of the sample
            return ""
    return "; it looks like plain text"
