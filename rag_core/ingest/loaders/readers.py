"""One reader per document kind, each `(data, file_name, settings, deadline=None, progress=None) -> Extracted`.

Each one imports its format's module when it is first called, so a format's library (pypdfium2, openpyxl, lxml…) is
loaded only by a process that reads such a file. rag_core.ingest.loaders.READERS maps each kind to one of these.
"""
from __future__ import annotations

from pathlib import PurePath

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.models import DocKind, Progress
from rag_core.ingest.loaders._common import Extracted

MARKDOWN_EXTENSIONS = frozenset({".md", ".markdown"})


def read_pdf(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
             progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.ocr import OcrOptions
    from rag_core.ingest.loaders.pdf import load_pdf

    return load_pdf(data, file_name, deadline, OcrOptions(settings.ingest.ocr, settings.ingest.ocr_language, settings.ingest.ocr_dpi),
                    progress)


def read_docx(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.docx import load_docx

    return load_docx(data, file_name, settings, deadline)


def read_text(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    """Plain text, or Markdown when the name ends in .md/.markdown."""
    from rag_core.ingest.loaders.text import load_text

    ext = PurePath(file_name).suffix.lower()
    return load_text(data, file_name, DocKind.MD if ext in MARKDOWN_EXTENSIONS else DocKind.TXT, deadline)


def read_pptx(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.slides import load_pptx

    return load_pptx(data, file_name, settings, deadline, progress)


def read_xlsx(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.sheets import load_xlsx

    return load_xlsx(data, file_name, settings, deadline, progress)


def read_csv(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
             progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.sheets import load_csv

    return load_csv(data, file_name, settings, deadline, progress)


def read_html(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.web import load_html

    return load_html(data, file_name, settings, deadline, progress)


def read_epub(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
              progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.ebook import load_epub

    return load_epub(data, file_name, settings, deadline, progress)


def read_opendocument(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
                      progress: Progress | None = None) -> Extracted:
    """OpenDocument text, presentation or spreadsheet: its content decides which."""
    from rag_core.ingest.loaders.opendocument import load_odt

    return load_odt(data, file_name, settings, deadline, progress)


def read_rtf(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
             progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.rtf import load_rtf

    return load_rtf(data, file_name, settings, deadline, progress)


def read_image(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
               progress: Progress | None = None) -> Extracted:
    from rag_core.ingest.loaders.image import load_image

    return load_image(data, file_name, settings, deadline, progress)
