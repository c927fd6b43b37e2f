"""Images of pages (.png, .jpg/.jpeg, .tiff, .webp), read by the scanned-page OCR of the PDF loader.

Each image, or each page of a multi-page TIFF, becomes one page of a PDF made here (`image_to_pdf`: the picture over
the whole page, no text), which `pdf.read_pdf` reads like any scan: every page is recognised by Tesseract
(rag_core.ingest.loaders.ocr), marked "recognised from a scan", and cited by page. The same PDF is kept as the
document's original (rag_core.ingest.originals), so "Show on the page" draws the picture with the words highlighted.

A page is made upright (EXIF orientation), flattened on white (transparency), and levelled when it was photographed
at a tilt (rag_core.ingest.loaders._deskew); a JPEG that needs none of this is kept in the PDF byte for byte.

Bounds: the sizes of all pages are read from the file's headers before any picture is decoded. A page of more than
MAX_IMAGE_PIXELS is refused (errors.ImageTooLarge), except a JPEG, which is decoded already scaled down (1/2 to 1/8);
a page is kept at no more than MAX_OCR_PIXELS, the most OCR draws. A scan that OCR cannot finish in time is refused
before it is converted (errors.ScanTooLong), and the work runs in the killable child process with the file's deadline.
"""
from __future__ import annotations

import io
import logging
import math
import re
import struct
import threading
import zlib
from collections.abc import Iterator
from typing import NamedTuple

import pymupdf
from PIL import Image

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, ImageTooLarge, IngestTimedOut, NoTextLayer, UnsupportedFileType
from rag_core.core.models import Progress
from rag_core.ingest.loaders._common import Extracted, clean_text, collapse_ws
from rag_core.ingest.loaders._deskew import deskew
from rag_core.ingest.loaders._isolated import run_isolated
from rag_core.ingest.loaders.ocr import MAX_OCR_PIXELS, OcrOptions, Recogniser

log = logging.getLogger(__name__)

#: Pillow's name of each format read here -> the name said to people. MPO is how Pillow opens many phones' JPEGs.
FORMATS = {"PNG": "PNG", "JPEG": "JPEG", "MPO": "JPEG", "TIFF": "TIFF", "WEBP": "WebP"}
#: The most pixels a page may have: it is decoded in full before it is scaled to MAX_OCR_PIXELS (about 300 MB for a
#: colour page of this size). A 600 dpi A3 scan (70 MP) fits; a JPEG may be larger (it is decoded scaled down), up
#: to MAX_JPEG_PIXELS.
MAX_IMAGE_PIXELS = 2 * MAX_OCR_PIXELS
#: Pillow's own decompression-bomb limit (twice its Image.MAX_IMAGE_PIXELS): it refuses to open a larger picture.
MAX_JPEG_PIXELS = 2 * 89_478_485
#: The resolution a picture that does not say it (or says a screen's 72 or 96 dpi) is taken to have: drawn for OCR at
#: DOCCHAT_OCR_DPI's default, 300, it is read pixel for pixel. Enlarging it for Tesseract (taking it as 150 or 100
#: dpi) read no more words on photos of pages taken at 96-200 dpi, and took up to twice as long.
ASSUMED_DPI = 300
_PLAUSIBLE_DPI = (100.0, 2400.0)  # a scanner's resolution; outside it the size of the page is not believed
_ALPHA_MODES = frozenset({"RGBA", "LA", "PA", "RGBa", "La"})
_TRANSPOSE = {  # EXIF orientation -> the turn that makes the picture upright (as ImageOps.exif_transpose)
    2: Image.Transpose.FLIP_LEFT_RIGHT, 3: Image.Transpose.ROTATE_180, 4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE, 6: Image.Transpose.ROTATE_270, 7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90}
_DECODE_ERRORS = (OSError, SyntaxError, ValueError, EOFError, IndexError, KeyError, struct.error, zlib.error,
                  TypeError)  # what Pillow's decoders raise on damaged files (TypeError: some broken TIFF tags)
_CAMERA_TITLE_RE = re.compile(  # what cameras and scanners write as a picture's "description", or a file name
    r"(?:olympus digital camera|sony dsc|digital camera|default|image|picture|photo|scan(?:ned)?(?: image)?|untitled"
    r"|screenshot|(?:img|dsc[nf]?|dcim|pxl|mvimg|photo|image|scan|screenshot)[\s_-]*[\d_-]+|[\W\d_]*)", re.I)


class Frame(NamedTuple):
    """One page of an image file: its place among the file's frames (0-based), its size in pixels and in points."""

    frame: int
    width: int
    height: int
    rect: pymupdf.Rect


def load_image(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None,
               progress: Progress | None = None) -> Extracted:
    """Read an image of a page (or a multi-page TIFF, a page per frame) by OCR: its header is checked here, the
    rest runs in a child process stopped at `deadline` (rag_core.ingest.loaders._isolated); `progress` gets
    ("ocr", page, pages)."""
    with _open(data, file_name) as img:
        _check_size(img, file_name)  # the first page: a decompression bomb is refused before a child starts
    return run_isolated(read_image, (data, file_name, settings), deadline or Deadline.never(file_name), "image",
                        progress)


def read_image(data: bytes, file_name: str, settings: Settings, *, deadline: Deadline,
               progress: Progress | None = None) -> Extracted:
    """`load_image` in this process, checking `deadline` between pages."""
    from rag_core.ingest.loaders.pdf import read_pdf

    ocr = OcrOptions(settings.ingest.ocr, settings.ingest.ocr_language, settings.ingest.ocr_dpi)
    reader = Recogniser(ocr, file_name)
    if not reader.available:  # nothing to convert when nothing can read it: the sentence a scanned PDF gets
        raise NoTextLayer(file_name, reader.problem)
    with _open(data, file_name) as img:
        frames = list(_frames(img, file_name, deadline))
        reader.check_time([f.rect for f in frames], len(frames), deadline)  # ScanTooLong: before any decoding
        pdf = _to_pdf(data, img, frames, file_name, deadline)
    return read_pdf(pdf, file_name, ocr, deadline=deadline, progress=progress)


def image_to_pdf(data: bytes, file_name: str = "image", deadline: Deadline | None = None) -> bytes:
    """The PDF an image file is read as (and kept as, to show a page): one page per picture (per TIFF frame), each
    the size the picture says it is (ASSUMED_DPI when it does not say), showing only the picture."""
    deadline = deadline or Deadline.never(file_name)
    with _open(data, file_name) as img:
        return _to_pdf(data, img, list(_frames(img, file_name, deadline)), file_name, deadline)


# ---------------------------------------------------------------- reading the file


class _Opened:
    """A Pillow image opened from bytes, closed on leaving the `with` block."""

    def __init__(self, img: Image.Image) -> None:
        self.img = img

    def __enter__(self) -> Image.Image:
        return self.img

    def __exit__(self, *exc: object) -> None:
        self.img.close()


def _open(data: bytes, file_name: str) -> _Opened:
    """The image (its header only: Pillow decodes pixels on demand); CorruptFile when it cannot be read,
    UnsupportedFileType for a picture format that is not read here, ImageTooLarge past Pillow's bomb limit."""
    try:
        img = Image.open(io.BytesIO(data))
    except Image.DecompressionBombError as e:
        raise ImageTooLarge(file_name, None, MAX_JPEG_PIXELS) from e
    except _DECODE_ERRORS as e:
        raise CorruptFile(file_name, "it could not be opened as an image") from e
    if img.format not in FORMATS:
        img.close()
        raise UnsupportedFileType(file_name, f"it is a {img.format or 'kind of'} image; save it as PNG or JPEG")
    return _Opened(img)


def _is_jpeg(img: Image.Image) -> bool:
    return FORMATS.get(img.format or "") == "JPEG"


def _check_size(img: Image.Image, file_name: str) -> None:
    """ImageTooLarge when the current frame has more pixels than can be decoded (a JPEG is decoded scaled down)."""
    width, height = img.size
    if width <= 0 or height <= 0:
        raise CorruptFile(file_name, "the image has no pixels")
    limit = MAX_JPEG_PIXELS if _is_jpeg(img) else MAX_IMAGE_PIXELS
    if width * height > limit:
        log.warning("refusing %s: a page of %d x %d pixels", file_name, width, height)
        raise ImageTooLarge(file_name, (width, height), limit)


def _frames(img: Image.Image, file_name: str, deadline: Deadline) -> Iterator[Frame]:
    """The pages of the image, from its headers only: every frame of a TIFF but its reduced-size previews, the first
    picture of any other format (an animation's or a JPEG's further pictures are not pages)."""
    count = 0
    index = 0
    while True:
        deadline.check()
        try:
            img.seek(index)
        except EOFError:
            break
        except _DECODE_ERRORS as e:
            if count:  # the pages before the damaged one are read; the rest of the file is said to be lost
                log.warning("%s: the image's page %d cannot be read; the pages after it are skipped (%s)",
                            file_name, index + 1, e)
                break
            raise CorruptFile(file_name, "it could not be opened as an image") from e
        preview = img.format == "TIFF" and index and int(getattr(img, "tag_v2", {}).get(254, 0)) & 1
        if not preview:
            _check_size(img, file_name)
            count += 1
            yield Frame(index, *img.size, _page_rect(img))
        if img.format != "TIFF":
            break
        index += 1
    if not count:
        raise CorruptFile(file_name, "the image has no pages")


def _page_rect(img: Image.Image) -> pymupdf.Rect:
    """The page a picture fills, in points: its size at the resolution it gives (ASSUMED_DPI when it gives none, or a
    screen's)."""
    dpi = img.info.get("dpi") or (0, 0)
    try:
        xdpi, ydpi = (float(dpi[0]), float(dpi[1]))
    except (TypeError, ValueError, IndexError):
        xdpi = ydpi = 0.0
    low, high = _PLAUSIBLE_DPI
    if not (low <= max(xdpi, ydpi) <= high and low / 2 <= min(xdpi, ydpi)):  # (204, 98): a fax's standard mode
        xdpi = ydpi = ASSUMED_DPI
    width, height = _oriented_size(img)
    if _orientation(img) in (5, 6, 7, 8):
        xdpi, ydpi = ydpi, xdpi
    return pymupdf.Rect(0, 0, width * 72 / xdpi, height * 72 / ydpi)


def _orientation(img: Image.Image) -> int:
    try:
        return int(img.getexif().get(0x0112, 1))
    except _DECODE_ERRORS:
        return 1


def _oriented_size(img: Image.Image) -> tuple[int, int]:
    width, height = img.size
    return (height, width) if _orientation(img) in (5, 6, 7, 8) else (width, height)


# ---------------------------------------------------------------- making the PDF


def _to_pdf(data: bytes, img: Image.Image, frames: list[Frame], file_name: str, deadline: Deadline) -> bytes:
    """The PDF of `frames` of `img` (opened from `data`), a page each, decoded one at a time (CorruptFile when a
    picture is damaged)."""
    from rag_core.ingest.loaders.pdf import MUPDF_LOCK  # PyMuPDF is not thread-safe: read_pdf takes the same lock

    left = deadline.left()
    if not MUPDF_LOCK.acquire(timeout=-1 if left == math.inf else min(left, threading.TIMEOUT_MAX)):
        raise IngestTimedOut(file_name, deadline.seconds)
    try:
        out = pymupdf.open()
        try:
            for number, frame in enumerate(frames, 1):
                deadline.check()
                img.seek(frame.frame)
                upright = _picture(img, frame, number if len(frames) > 1 else None, file_name)
                picture = deskew(upright)
                # points per pixel across and down (a fax is 204 x 98 dpi): the page keeps the picture's size
                across, down = frame.rect.width / upright.width, frame.rect.height / upright.height
                page = out.new_page(width=picture.width * across, height=picture.height * down)
                if picture is upright and _jpeg_as_is(img, frame):
                    page.insert_image(page.rect, stream=data)  # the photo itself, not a copy decoded and packed again
                else:
                    colorspace = pymupdf.csGRAY if picture.mode == "L" else pymupdf.csRGB
                    page.insert_image(page.rect, keep_proportion=False, pixmap=pymupdf.Pixmap(
                        colorspace, picture.width, picture.height, picture.tobytes(), False))
            title = _title(img)
            if title:
                out.set_metadata({"title": title})
            return out.tobytes(garbage=1, deflate=True)
        finally:
            out.close()
    finally:
        MUPDF_LOCK.release()


def _jpeg_as_is(img: Image.Image, frame: Frame) -> bool:
    """The file is a JPEG the PDF can show unchanged (one picture, upright, small enough, grey or RGB)."""
    return (img.format == "JPEG" and img.mode in ("L", "RGB") and _orientation(img) == 1
            and frame.width * frame.height <= MAX_OCR_PIXELS)


def _picture(img: Image.Image, frame: Frame, page: int | None, file_name: str) -> Image.Image:
    """The current frame (page `page` of several, or the only one) decoded (a JPEG scaled down while decoding),
    upright, at most MAX_OCR_PIXELS, grey or RGB on white."""
    scale = min(1.0, math.sqrt(MAX_OCR_PIXELS / (frame.width * frame.height)))
    target = (max(1, int(frame.width * scale)), max(1, int(frame.height * scale)))
    try:
        shrink = 1  # a JPEG past MAX_IMAGE_PIXELS is decoded at 1/2, 1/4 or 1/8 of its size: memory stays bounded
        while _is_jpeg(img) and shrink < 8 and frame.width * frame.height > MAX_IMAGE_PIXELS * shrink**2:
            shrink *= 2
        if shrink > 1:
            img.draft(img.mode, (-(-frame.width // shrink), -(-frame.height // shrink)))
        img.load()
        picture = _flat(img)
        if picture.width * picture.height > MAX_OCR_PIXELS:
            picture = picture.resize(target, Image.Resampling.LANCZOS, reducing_gap=3.0)
        turn = _TRANSPOSE.get(_orientation(img))
        if turn is not None:
            picture = picture.transpose(turn)
    except (Image.DecompressionBombError, MemoryError) as e:
        raise ImageTooLarge(file_name, (frame.width, frame.height), MAX_IMAGE_PIXELS) from e
    except _DECODE_ERRORS as e:
        where = f" of page {page}" if page else ""
        raise CorruptFile(file_name, f"the picture{where} is damaged or cut short") from e
    return picture


def _flat(img: Image.Image) -> Image.Image:
    """The picture as grey ("L") or RGB without transparency: see-through parts become white, 16-bit and float
    greys are scaled to 8 bits, CMYK and palettes become RGB."""
    mode = img.mode
    if mode in ("L", "RGB"):
        return img
    if mode == "1":
        return img.convert("L")
    if mode.startswith("I") or mode == "F":  # 16-bit (or 32-bit, or float) greys
        grey = img.convert("F") if mode != "F" else img
        low, high = (float(v) for v in grey.getextrema())  # type: ignore[arg-type]  # one band: two numbers
        if low >= 0 and high <= 255:
            return grey.convert("L")
        if low >= 0 and high <= 65535:
            return grey.point(lambda v: v / 257.0).convert("L")
        return grey.point(lambda v: (v - low) * 255.0 / (high - low)).convert("L")
    if mode in _ALPHA_MODES or (mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")  # palettes, CMYK, YCbCr, LAB, HSV


def _title(img: Image.Image) -> str:
    """The picture's own title: a PNG "Title" text, else its description (TIFF/EXIF ImageDescription), unless it is
    what a camera or scanner writes there."""
    img.seek(0)
    candidates: list[object] = [img.info.get("Title"), img.info.get("title")]
    try:
        candidates.append(img.getexif().get(0x010E))
    except _DECODE_ERRORS:
        pass
    for raw in candidates:
        if isinstance(raw, bytes):
            raw = raw.decode("utf-8", errors="replace")
        if isinstance(raw, str):
            title = collapse_ws(clean_text(raw))[:200]
            if len(title) >= 2 and not _CAMERA_TITLE_RE.fullmatch(title):
                return title
    return ""
