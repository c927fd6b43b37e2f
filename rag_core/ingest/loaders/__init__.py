"""File loaders: the only code that knows file formats. Bytes in, a `Document` out.

The kind is decided from the content, never trusted from the name alone (`sniff_kind`): "%PDF-" in the first 1024
bytes (after anything but blank space, only with a PDF's "startxref" near the end or a .pdf name) -> PDF; a ZIP by its members: word/document.xml -> Word, ppt/presentation.xml -> PowerPoint, xl/workbook.xml ->
Excel, an "application/epub+zip" mimetype with META-INF/container.xml -> EPUB, an OpenDocument mimetype -> odt/odp/ods;
"{\\rtf" -> RTF; PNG, JPEG, TIFF and WebP signatures -> an image of pages (OCR). Other known binary formats (GIF,
old-style Office, audio, archives…) are refused with a sentence saying what they are. Anything else must be text: a
page that starts like HTML (or a .html/.htm file with markup) is a web page, a .csv/.tsv is a table, and the extension
picks Markdown (.md/.markdown) over plain text. A file whose name claims a binary kind (.pdf, .pptx, .xlsx, .epub,
.odt, .rtf, .png…) but whose content is something else is refused as damaged rather than read as another kind.

`load_bytes` hands the bytes to the kind's reader (READERS: kind -> function, rag_core.ingest.loaders.readers), each
with the signature `load_x(data, file_name, settings, deadline=None, progress=None) -> Extracted`; every reader but
plain text parses in a killable child process bounded by the deadline (rag_core.ingest.loaders._isolated). The kinds
and their extensions for people are in rag_core.core.formats.
"""
from __future__ import annotations

import codecs
import io
import logging
import os
import re
import stat
import zipfile
from collections.abc import Callable
from pathlib import Path, PurePath

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import (
    CorruptFile,
    EmptyFile,
    EncryptedFile,
    FileTooLarge,
    NotARegularFile,
    UnsupportedFileType,
)
from rag_core.core.formats import ACCEPTED_EXTENSIONS, format_for_name
from rag_core.core.models import DocKind, Document, Progress, SourceMeta
from rag_core.core.names import display_name
from rag_core.core.safe_files import describe_mode, read_up_to
from rag_core.core.text import with_article
from rag_core.ingest.loaders import readers
from rag_core.ingest.loaders._archive import MAX_ZIP_MEMBERS, check_members, count_members, read_head
from rag_core.ingest.loaders._common import Extracted, doc_id_for
from rag_core.ingest.loaders.readers import MARKDOWN_EXTENSIONS

log = logging.getLogger(__name__)

__all__ = ["ACCEPTED_EXTENSIONS", "MARKDOWN_EXTENSIONS", "READERS", "check_size", "load_bytes", "load_file",
           "read_file", "sniff_kind"]

#: A format reader: (data, file_name, settings, deadline, progress) -> Extracted.
Loader = Callable[[bytes, str, Settings, Deadline | None, Progress | None], Extracted]

#: Which function reads each kind (rag_core.ingest.loaders.readers: each imports its format's module when first
#: called, so a format's library is loaded only by the process that needs it).
READERS: dict[DocKind, Loader] = {
    DocKind.PDF: readers.read_pdf,
    DocKind.DOCX: readers.read_docx,
    DocKind.TXT: readers.read_text,
    DocKind.MD: readers.read_text,
    DocKind.PPTX: readers.read_pptx,
    DocKind.XLSX: readers.read_xlsx,
    DocKind.CSV: readers.read_csv,
    DocKind.HTML: readers.read_html,
    DocKind.EPUB: readers.read_epub,
    DocKind.ODT: readers.read_opendocument,
    DocKind.ODP: readers.read_opendocument,
    DocKind.ODS: readers.read_opendocument,
    DocKind.RTF: readers.read_rtf,
    DocKind.IMAGE: readers.read_image,
}

# Formats DocChat cannot read, recognised by their first bytes, with a friendly description. The
# signatures are specific enough (control bytes, exact versions) that real text does not match them.
_MAGIC: tuple[tuple[bytes, str], ...] = (
    (b"GIF87a", "it is a GIF image; save it as PNG to have its text read"),
    (b"GIF89a", "it is a GIF image; save it as PNG to have its text read"),
    (b"ID3\x02", "it is an MP3 audio file"),
    (b"ID3\x03", "it is an MP3 audio file"),
    (b"ID3\x04", "it is an MP3 audio file"),
    (b"OggS\x00", "it is an Ogg audio/video file"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1",
     "it is an old-style Office file (.doc/.xls/.ppt); save it as .docx, .xlsx or .pptx"),
    (b"\x1f\x8b", "it is a gzip archive"),
    (b"Rar!\x1a\x07", "it is a RAR archive"),
    (b"7z\xbc\xaf\x27\x1c", "it is a 7-Zip archive"),
    (b"\xfd7zXZ\x00", "it is an xz archive"),
    (b"\x7fELF", "it is a program, not a document"),
    (b"SQLite format 3\x00", "it is an SQLite database"),
)
# A password-protected Word, Excel or PowerPoint file is an OLE compound file holding a stream of this name.
_CFB = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"
_ENCRYPTED_PACKAGE = "EncryptedPackage".encode("utf-16-le")
# Images of pages read by OCR: PNG, JPEG, TIFF (little- and big-endian); WebP is a RIFF container (see _is_image).
_IMAGE_MAGIC = (b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"II*\x00", b"MM\x00*")

# Zip-based kinds: the member that makes a ZIP one, and what a person calls it ("not a PowerPoint presentation").
_ZIP_MEMBER = {DocKind.DOCX: "word/document.xml", DocKind.PPTX: "ppt/presentation.xml",
               DocKind.XLSX: "xl/workbook.xml", DocKind.EPUB: "META-INF/container.xml",
               DocKind.ODT: "content.xml", DocKind.ODP: "content.xml", DocKind.ODS: "content.xml"}
_WHAT = {DocKind.PDF: "PDF", DocKind.DOCX: "Word document", DocKind.PPTX: "PowerPoint presentation",
         DocKind.XLSX: "Excel workbook", DocKind.EPUB: "EPUB e-book", DocKind.ODT: "OpenDocument text",
         DocKind.ODP: "OpenDocument presentation", DocKind.ODS: "OpenDocument spreadsheet",
         DocKind.RTF: "RTF document", DocKind.IMAGE: "image"}
_OOXML = ((DocKind.DOCX, "word/document.xml"), (DocKind.PPTX, "ppt/presentation.xml"),
          (DocKind.XLSX, "xl/workbook.xml"))
_EPUB_MIMETYPE = "application/epub+zip"
# Other ZIP-based formats, recognised by a member name, refused with advice.
_ZIP_REFUSED: tuple[tuple[str, str], ...] = (
    ("xl/workbook.bin", "it is an Excel binary workbook (.xlsb); save it as .xlsx"),
    ("visio/document.xml", "it is a Visio drawing; save it as PDF"),
)
_HTML_START = re.compile(r"\A\s*(?:<\?xml[^>]*>\s*)?(?:<!--.*?-->\s*)*(?:<!doctype\s+html|<html[\s>])",
                         re.IGNORECASE | re.DOTALL)
_MARKUP = re.compile(r"<(?:[a-z][a-z0-9]*[\s/>]|!--|!doctype)", re.IGNORECASE)


def check_size(file_name: str, size: int, settings: Settings) -> None:
    """FileTooLarge when a file of `size` bytes is over the upload limit: the one place that decides it."""
    if size > settings.max_upload_bytes:
        raise FileTooLarge(file_name, settings.ingest.max_upload_mb)


def load_bytes(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
               progress: Progress | None = None) -> Document:
    """Load an uploaded file's bytes into a Document, or raise an IngestError with a friendly message (IngestTimedOut
    once `deadline` has passed: every format but plain text is read in a child process stopped at it); `progress`
    gets ("ocr", page, pages) while scanned pages or images are read (rag_core.ingest.loaders.ocr). `file_name` is
    stored, shown and quoted as its `display_name` (bytes that are not UTF-8 and control characters as U+FFFD)."""
    file_name = display_name(file_name)
    check_size(file_name, len(data), settings)
    if not data or data.isspace():
        raise EmptyFile(file_name)
    kind = sniff_kind(data, file_name)
    log.debug("loading %s (%d bytes) as %s", file_name, len(data), kind)
    extracted = READERS[kind](data, file_name, settings, deadline, progress)
    doc_id, sha256 = doc_id_for(data)
    return Document(
        doc_id=doc_id,
        text=extracted.text,
        sections=extracted.sections,
        source=SourceMeta(file_name=file_name, title=extracted.title, kind=kind.value, sha256=sha256,
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


def sniff_kind(data: bytes, file_name: str) -> DocKind:
    """The kind of a file from its content (see the module docstring); raises UnsupportedFileType for formats
    DocChat cannot read and CorruptFile for a name that claims a kind the content is not."""
    ext = PurePath(file_name).suffix.lower()
    claimed = format_for_name(file_name)
    head = data[:1024]
    if _is_pdf(head, data, ext):
        return DocKind.PDF
    if head.startswith((b"PK\x03\x04", b"PK\x05\x06")):
        return _sniff_zip(data, file_name, ext)
    if head.lstrip(codecs.BOM_UTF8 + b" \t\r\n").startswith(b"{\\rtf"):
        return DocKind.RTF
    if _is_image(head):
        return DocKind.IMAGE
    if head.startswith(_CFB) and _ENCRYPTED_PACKAGE in data:  # Office's password protection: an OLE file around it
        app = {DocKind.PPTX: "PowerPoint", DocKind.XLSX: "Excel"}.get(claimed.kind if claimed else DocKind.DOCX, "Word")
        raise EncryptedFile(file_name, app)
    detail = _binary_kind(head)
    if detail:
        raise UnsupportedFileType(file_name, detail)
    if claimed is not None and claimed.kind in _WHAT:  # a binary kind by name, but none by content
        what = with_article(_WHAT[claimed.kind])
        raise CorruptFile(file_name, f"the name ends in {ext} but the content is not {what}{_looks_like(head)}")
    if _starts_like_html(head) or (ext in (".html", ".htm") and _MARKUP.search(_head_text(head))):
        return DocKind.HTML
    if claimed is not None and claimed.kind == DocKind.CSV:
        return DocKind.CSV
    return DocKind.MD if ext in MARKDOWN_EXTENSIONS else DocKind.TXT


def _is_pdf(head: bytes, data: bytes, ext: str) -> bool:
    """A PDF: "%PDF-" in the first 1024 bytes (readers accept a little junk before it) and, when something other
    than blank space comes before it in a file not named .pdf, a PDF's ending too (a note quoting "%PDF-1.7" is text)."""
    at = head.find(b"%PDF-")
    if at < 0:
        return False
    if ext == ".pdf" or not head[:at].strip(codecs.BOM_UTF8 + b" \t\r\n\x00"):
        return True
    return b"startxref" in data[-4096:]


def _is_image(head: bytes) -> bool:
    return head.startswith(_IMAGE_MAGIC) or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")


def _binary_kind(head: bytes) -> str | None:
    """A friendly description of a known format DocChat does not read, or None."""
    for magic, detail in _MAGIC:
        if head.startswith(magic):
            return detail
    if head[:4] == b"RIFF" and head[8:12] in (b"WAVE", b"AVI "):
        return "it is a WAV audio or AVI video file"
    if head[:2] == b"\x00\x00" and head[4:8] == b"ftyp":
        return "it is a video, audio or HEIC image file; save a photo as JPEG or PNG to have its text read"
    return None


def _sniff_zip(data: bytes, file_name: str, ext: str) -> DocKind:
    """The kind of a ZIP-based document from its members (nothing is unpacked but a tiny `mimetype` member)."""
    claimed = format_for_name(file_name)
    want = claimed.kind if claimed is not None and claimed.kind in _ZIP_MEMBER else None
    if want is not None:
        check_members(data, file_name, _WHAT[want])  # counted before zipfile reads them (1.5 million took 1.5 GB)
    elif count_members(data) > MAX_ZIP_MEMBERS:
        raise UnsupportedFileType(file_name, f"it is a ZIP archive of more than {MAX_ZIP_MEMBERS:,} files")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            names = set(zf.namelist())
            mimetype = _zip_mimetype(data, zf) if "mimetype" in names else ""
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError, EOFError) as e:
        if want is not None:
            raise CorruptFile(file_name, f"the {_WHAT[want]}'s ZIP container is broken") from e
        raise UnsupportedFileType(file_name, "it is a damaged ZIP archive") from e
    found = _zip_kind(data, names, mimetype, want)
    if want is not None and found != want:
        member = _ZIP_MEMBER[want]
        is_ = f"; it is {with_article(_WHAT[found])}" if found in _WHAT else f": the ZIP archive has no {member}"
        raise CorruptFile(file_name, f"the name ends in {ext} but the content is not {with_article(_WHAT[want])}{is_}")
    if found is not None:
        return found
    if mimetype.startswith("application/vnd.oasis.opendocument."):
        raise UnsupportedFileType(file_name, "it is an OpenDocument drawing, formula or template; save it as .odt "
                                             "or PDF")
    detail = next((d for member, d in _ZIP_REFUSED if member in names), "it is a ZIP archive")
    raise UnsupportedFileType(file_name, detail)


def _zip_mimetype(data: bytes, zf: zipfile.ZipFile) -> str:
    """The `mimetype` member of an EPUB or OpenDocument file (at most 200 bytes are inflated, whatever its method)."""
    try:
        return read_head(data, zf, zf.getinfo("mimetype"), 200).decode("ascii", errors="replace").strip()
    except (zipfile.BadZipFile, NotImplementedError, ValueError, OSError, EOFError, KeyError):
        return ""


def _zip_kind(data: bytes, names: set[str], mimetype: str, want: DocKind | None) -> DocKind | None:
    """The document kind of a ZIP with these members and `mimetype`, or None for an archive of something else."""
    for kind, member in _OOXML:
        if member in names:
            return kind
    if "META-INF/container.xml" in names and (mimetype == _EPUB_MIMETYPE or (not mimetype and want == DocKind.EPUB)):
        return DocKind.EPUB
    if "content.xml" in names:  # OpenDocument: its mimetype member, else what its body holds
        from rag_core.ingest.loaders.opendocument import odf_kind

        odf = odf_kind(data)
        return DocKind(odf) if odf else None
    return None


def _head_text(head: bytes) -> str:
    """The first bytes as text, well enough to look for markup (UTF-16 with a BOM, else any ASCII-based encoding)."""
    if head.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        return head.decode("utf-16", errors="replace")
    return head.decode("latin-1").lstrip("\ufeff\xef\xbb\xbf")


def _starts_like_html(head: bytes) -> bool:
    """The file begins like a web page: "<!DOCTYPE html" or "<html" (after an XML declaration and comments)."""
    return bool(_HTML_START.match(_head_text(head)))


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
