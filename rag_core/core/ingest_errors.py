"""Why a file could not be added to the library: IngestError and its kinds (all importable from rag_core.core.errors).

Each message names the file, says what is wrong with it and what to do, e.g. "“a.pdf”: the file is password-protected.
Open it in your PDF viewer, save a copy without a password, and upload that copy."
"""
from __future__ import annotations

import sys

from rag_core.core.error_base import DocChatError, duration
from rag_core.core.formats import accepted_kinds


class IngestError(DocChatError):
    """A file could not be added to the library."""

    def __init__(self, file_name: str, problem: str, advice: str, details: str = "") -> None:
        super().__init__(f"“{file_name}”: {problem} {advice}".strip(), file_name=file_name, details=details)


class UnsupportedFileType(IngestError):
    def __init__(self, file_name: str, detail: str = "") -> None:
        super().__init__(
            file_name,
            f"this is not a file type DocChat can read{(' (' + detail + ')') if detail else ''}.",
            f"Upload a {accepted_kinds()} file.",
        )


class EmptyFile(IngestError):
    def __init__(self, file_name: str) -> None:
        super().__init__(file_name, "the file is empty.", "Check that you picked the right file and try again.")


class FileTooLarge(IngestError):
    def __init__(self, file_name: str, limit_mb: int) -> None:
        super().__init__(
            file_name,
            f"the file is larger than the {limit_mb} MB limit.",
            "Split it into smaller files and add those, or ask whoever runs DocChat to raise the limit.",
            f"The limit is the setting DOCCHAT_MAX_UPLOAD_MB (now {limit_mb}).",
        )


class NotARegularFile(IngestError):
    def __init__(self, file_name: str, what: str = "not a regular file") -> None:
        super().__init__(
            file_name,
            f"this is {what}, not a document file, so it was not read.",
            f"Name an ordinary {accepted_kinds()} file instead.",
        )


class TooManyPassages(IngestError):
    def __init__(self, file_name: str, limit: int) -> None:
        super().__init__(
            file_name,
            f"the file is too large to index (it would make more than {limit:,} passages).",
            "Split it into several smaller files and add those instead.",
        )


class ReaderOutOfMemory(IngestError):
    """The file's reader process used more memory than DOCCHAT_READER_MEMORY_MB and was stopped."""

    def __init__(self, file_name: str, limit_mb: int) -> None:
        super().__init__(
            file_name,
            f"the file is too large to read (reading it needed more than {limit_mb:,} MB of memory), so it was "
            "stopped and your library was left as it was;",
            "split it into smaller files and add those.",
            f"The limit is the setting DOCCHAT_READER_MEMORY_MB (now {limit_mb}).",
        )
        self.limit_mb = limit_mb


class IngestTimedOut(IngestError):
    """The file ran past DOCCHAT_INGEST_TIMEOUT_S (or was projected to) and was stopped with nothing stored."""

    def __init__(self, file_name: str, limit_s: float, projected: bool = False) -> None:
        took = f"would take longer than {duration(limit_s)}" if projected else f"took longer than {duration(limit_s)}"
        super().__init__(
            file_name,
            f"indexing it {took}, so it was stopped and your library was left as it was;",
            "split it into smaller files and add them one at a time.",
        )
        self.limit_s, self.projected = limit_s, projected


class ScanTooLong(IngestTimedOut):
    """A scan whose OCR cannot finish within DOCCHAT_INGEST_TIMEOUT_S, refused before spending it (loaders.ocr)."""

    def __init__(self, file_name: str, pages: int, seconds: float, limit_s: float, per_page: float,
                 at_least: bool = False) -> None:
        part = int(0.8 * limit_s / per_page) if per_page > 0 else 0  # a fifth of the time left for the rest
        took = f"{round(seconds)} seconds" if seconds < 90 else f"{round(seconds / 60)} minutes"
        size = f"{'at most' if at_least else 'about'} {part} page{'s' * (part > 1)}"
        IngestError.__init__(
            self, file_name, f"reading its {pages} scanned pages with OCR would take {'at least' if at_least else 'about'}"
            f" {took} here, longer than the {duration(limit_s)} one file may take, so it was not added and your library "
            "was left as it was;", f"split it into parts of {size} and add them one at a time." if 0 < part < pages
            else "split it into smaller files and add them one at a time.")
        self.limit_s, self.projected, self.pages, self.seconds, self.at_least = limit_s, True, pages, seconds, at_least


class IngestCancelled(IngestError):
    """Someone pressed Stop (IngestQueue.cancel) while the file was waiting or being added; nothing was stored."""

    def __init__(self, file_name: str) -> None:
        DocChatError.__init__(self, f"Adding “{file_name}” was stopped; nothing was added.", file_name=file_name)


class EncryptedFile(IngestError):
    def __init__(self, file_name: str, app: str = "your PDF viewer") -> None:
        super().__init__(
            file_name,
            "the file is password-protected.",
            f"Open it in {app}, save a copy without a password, and upload that copy.",
        )


class CorruptFile(IngestError):
    def __init__(self, file_name: str, detail: str = "") -> None:
        super().__init__(
            file_name,
            "the file is damaged and could not be read"
            + (f" ({detail})" if detail else "")
            + ".",
            "Try re-downloading or re-exporting it, then upload it again.",
        )


def tesseract_install_hint(languages: list[str] | None = None, platform: str | None = None) -> str:
    """How to install Tesseract (or, with `languages`, its packs for those codes) on this system: Homebrew on macOS,
    the UB Mannheim installer on Windows, apt elsewhere."""
    platform = platform or sys.platform
    if platform == "darwin":
        return "`brew install tesseract tesseract-lang`" if languages else "`brew install tesseract`"
    if platform == "win32":
        if languages:
            return "run the Tesseract installer again and tick them under “Additional language data”"
        return "the UB Mannheim installer: `winget install UB-Mannheim.TesseractOCR`"
    if languages:
        return f"`apt-get install {' '.join(f'tesseract-ocr-{c}' for c in languages)}`"
    return "`make ocr`, or `apt-get install tesseract-ocr tesseract-ocr-eng`"


class NoTextLayer(IngestError):
    """A scan without a text layer that OCR could not read; `why` (rag_core.ingest.loaders.ocr) says what stopped it."""

    def __init__(self, file_name: str, why: str | None = None) -> None:
        elsewhere = ("or run it through OCR (e.g. “Save as searchable PDF” in your scanner software) and upload the "
                     "result.")
        if why == "off":
            problem, advice = "the file contains only scanned images, and OCR is turned off.", (
                f"Turn OCR on (DOCCHAT_OCR=true) and add it again, {elsewhere}")
        elif why == "no-tesseract":
            problem, advice = "the file contains only scanned images, and OCR (Tesseract) is not installed here.", (
                f"Install it ({tesseract_install_hint()}) and add it again, {elsewhere}")
        elif why and why.startswith("no-language:"):
            codes = why.partition(":")[2].split("+")
            problem = f"the file contains only scanned images, and the OCR language pack “{'+'.join(codes)}” is missing."
            advice = (f"Install it ({tesseract_install_hint(codes)}) or set DOCCHAT_OCR_LANGUAGE to an installed "
                      f"language, {elsewhere}")
        elif why == "failed":
            problem, advice = "the file contains only scanned images, and OCR could not read them here.", (
                "Try a smaller or cleaner scan, or run it through other OCR software and upload the result.")
        elif why == "empty":
            problem, advice = "the file contains only scanned images, and OCR found no text in them.", (
                "Check the scan is readable (not blank, not upside down), or run it through other OCR software "
                "and upload the result.")
        else:
            problem, advice = "the file contains only scanned images, no selectable text.", (
                "Run it through OCR (e.g. “Save as searchable PDF” in your scanner software) and upload the result.")
        super().__init__(file_name, problem, advice, details=f"OCR: {why}" if why else "")
        self.why = why


class NoText(IngestError):
    def __init__(self, file_name: str) -> None:
        super().__init__(file_name, "no readable text was found in the file.", "Check the file opens and contains text.")


class ImageTooLarge(IngestError):
    """A picture with more pixels than DocChat decodes (a decompression bomb, or a huge scan); loaders.image."""

    def __init__(self, file_name: str, size: tuple[int, int] | None, limit_pixels: int) -> None:
        what = f"it is {size[0]:,} × {size[1]:,} pixels" if size else "it has too many pixels"
        super().__init__(
            file_name,
            f"the image is too large to read ({what}, more than the {limit_pixels / 1e6:.0f} million DocChat reads"
            " on one page).",
            "Scale it down (300 dpi is enough for text) or save it as JPEG or PDF, and upload that.",
        )
