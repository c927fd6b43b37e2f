"""Images of pages turned into the PDF they are read (and kept) as, without OCR: page sizes from the picture's
resolution, upright photos, transparency on white, 16-bit greys, titles, levelling a tilted page, and the bounds
(decompression bombs, huge JPEGs decoded scaled down, damaged pictures, OCR turned off)."""
from __future__ import annotations

import io
import struct
import time
import zlib
from pathlib import Path

import numpy as np
import pymupdf
import pytest
from PIL import Image, JpegImagePlugin, TiffImagePlugin

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, ImageTooLarge, NoTextLayer, UnsupportedFileType
from rag_core.ingest.loaders import image
from rag_core.ingest.loaders._deskew import MIN_SKEW_DEG, skew_angle
from rag_core.ingest.loaders.image import image_to_pdf, load_image, read_image

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"


def _encoded(img: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    img.save(out, fmt, **options)
    return out.getvalue()


def _pages(pdf: bytes) -> list[tuple[pymupdf.Rect, dict]]:
    """Each page's size and the one picture on it."""
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        out = []
        for page in doc:
            infos = page.get_image_info(xrefs=True)
            assert len(infos) == 1 and not page.get_text().strip()  # only the picture: no text layer
            out.append((page.rect, infos[0]))
        return out


def png_bomb(side: int) -> bytes:
    """A real PNG of side x side black grey pixels (it decodes to side² bytes), under 1 MB and made in a blink: the
    deflate stream of 100 rows, fully flushed, repeated."""
    rows = 100
    c = zlib.compressobj(9, zlib.DEFLATED, -15)
    chunk = c.compress(bytes((side + 1) * rows)) + c.flush(zlib.Z_FULL_FLUSH)  # independent of what came before
    adler = (((side + 1) * side % 65521) << 16) | 1  # the Adler-32 of that many zero bytes
    body = b"\x78\xda" + chunk * (side // rows) + c.flush(zlib.Z_FINISH) + struct.pack(">I", adler)

    def part(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    return (b"\x89PNG\r\n\x1a\n" + part(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 0, 0, 0, 0))
            + part(b"IDAT", body) + part(b"IEND", b""))


def test_each_picture_is_a_page_the_size_it_says_it_is():
    png = (DOCS / "image_page_harbour.png").read_bytes()  # 1167 x 723 pixels at 200 dpi
    [(rect, info)] = _pages(image_to_pdf(png))
    assert (round(rect.width, 1), round(rect.height, 1)) == (420.1, 260.3)  # 1167 / 200 * 72 points
    assert (info["width"], info["height"]) == (1167, 723)  # pixel for pixel
    tiff = _pages(image_to_pdf((DOCS / "image_two-pages_regulations.tiff").read_bytes()))
    assert len(tiff) == 2 and all(round(r.width) == 420 for r, _ in tiff)
    webp = _pages(image_to_pdf((DOCS / "image_page_ferry.webp").read_bytes()))  # no resolution: ASSUMED_DPI
    assert round(webp[0][0].width, 1) == round(1167 / image.ASSUMED_DPI * 72, 1)
    fax = Image.new("L", (1728, 1100), 255)  # a fax: 204 x 98 dpi, tall pixels
    [(rect, _)] = _pages(image_to_pdf(_encoded(fax, "TIFF", dpi=(204, 98))))
    assert round(rect.width) == round(1728 / 204 * 72) and round(rect.height) == round(1100 / 98 * 72)


def test_a_jpeg_is_kept_as_it_is_unless_it_must_be_turned():
    photo = Image.new("RGB", (600, 400), "white")
    jpeg = _encoded(photo, "JPEG", quality=80)
    pdf = image_to_pdf(jpeg)
    with pymupdf.open(stream=pdf, filetype="pdf") as doc:
        xref = doc[0].get_images()[0][0]
        assert doc.xref_stream_raw(xref) == jpeg  # the photo itself: not decoded and packed again
    exif = Image.Exif()
    exif[0x0112] = 6  # taken with the phone on its side: shown turned 90 degrees clockwise
    [(rect, info)] = _pages(image_to_pdf(_encoded(photo, "JPEG", exif=exif)))
    assert rect.height > rect.width and (info["width"], info["height"]) == (400, 600)


def test_transparent_16_bit_and_palette_pictures_become_grey_or_colour_on_white():
    ink = Image.new("RGBA", (300, 200), (0, 0, 0, 0))  # a screenshot: black text on a see-through background
    ink.paste((0, 0, 0, 255), (50, 50, 250, 60))
    levels = np.full((200, 300), 65_000, dtype=np.uint16)  # a 16-bit grey scan: white, with one dark bar
    levels[50:60, 50:250] = 3_000
    deep = Image.fromarray(levels)
    assert deep.mode == "I;16"
    for picture in (ink, deep, ink.convert("P")):
        pdf = image_to_pdf(_encoded(picture, "PNG"))
        with pymupdf.open(stream=pdf, filetype="pdf") as doc:
            pix = doc[0].get_pixmap(dpi=image.ASSUMED_DPI)  # pixel for pixel
            assert pix.pixel(150, 20)[0] > 240  # the background: white, not black
            assert pix.pixel(150, 55)[0] < 60  # the bar: still dark


def test_the_title_is_the_pictures_own_unless_a_camera_wrote_it():
    def title(data: bytes) -> str:
        with pymupdf.open(stream=image_to_pdf(data), filetype="pdf") as doc:
            return (doc.metadata or {}).get("title") or ""

    assert title((DOCS / "image_two-pages_regulations.tiff").read_bytes()) == "Harbour Regulations of Port Elspeth"
    assert title((DOCS / "image_page_harbour.png").read_bytes()) == ""  # none: the loader uses the file name
    page = Image.new("L", (200, 100), 255)
    for junk in ("OLYMPUS DIGITAL CAMERA", "SONY DSC", "  ", "IMG_2041", "PXL_20240312_101500123", "2024-03-12"):
        info = TiffImagePlugin.ImageFileDirectory_v2()
        info[270] = junk
        assert title(_encoded(page, "TIFF", tiffinfo=info)) == "", junk
    exif = Image.Exif()
    exif[0x010E] = "Minutes of the\x00 harbour board"
    assert title(_encoded(page, "JPEG", exif=exif)) == "Minutes of the harbour board"


def test_a_tilted_photo_is_levelled_and_a_straight_page_is_left_alone():
    photo = Image.open(DOCS / "image_photo_skewed.jpg")  # photographed 6 degrees clockwise
    assert skew_angle(photo) == pytest.approx(6.0, abs=0.3)
    [(rect, info)] = _pages(image_to_pdf((DOCS / "image_photo_skewed.jpg").read_bytes()))
    assert info["width"] > photo.width  # turned back, grown to keep its corners
    assert abs(skew_angle(Image.open(DOCS / "image_page_harbour.png"))) < MIN_SKEW_DEG
    assert skew_angle(Image.new("L", (500, 500), 255)) == 0.0  # nothing on it: nothing to tell


def test_a_decompression_bomb_is_refused_from_its_header_before_a_reader_starts(monkeypatch):
    bomb = png_bomb(30_000)  # 900 million pixels in 0.9 MB
    assert len(bomb) < 1_000_000
    monkeypatch.setattr(image, "run_isolated", lambda *a, **k: pytest.fail("a reader process was started"))
    started = time.perf_counter()
    with pytest.raises(ImageTooLarge) as info:
        load_image(bomb, "poster.png", Settings())
    assert time.perf_counter() - started < 2
    assert str(info.value).startswith("“poster.png”: the image is too large to read (")
    big = png_bomb(9_000)  # 81 MP: more than DocChat decodes, though Pillow itself would
    with pytest.raises(ImageTooLarge) as info:
        load_image(big, "scan.png", Settings())
    assert "9,000 × 9,000 pixels, more than the 72 million" in str(info.value) and "Scale it down" in str(info.value)
    with pytest.raises(ImageTooLarge):
        image_to_pdf(big)  # the copy kept to show pages is bounded the same way


def test_a_large_jpeg_is_decoded_scaled_down_and_kept_to_what_ocr_draws(monkeypatch):
    monkeypatch.setattr(image, "MAX_IMAGE_PIXELS", 1_000_000)
    monkeypatch.setattr(image, "MAX_OCR_PIXELS", 500_000)
    drafts: list[tuple] = []
    real_draft = JpegImagePlugin.JpegImageFile.draft
    monkeypatch.setattr(JpegImagePlugin.JpegImageFile, "draft",
                        lambda self, *a: drafts.append(a) or real_draft(self, *a))
    picture = Image.new("RGB", (2000, 1500), "white")
    [(rect, info)] = _pages(image_to_pdf(_encoded(picture, "JPEG")))
    assert drafts and drafts[0][1] == (1000, 750)  # decoded at half size, never in full
    assert info["width"] * info["height"] <= 500_000 and round(rect.width) == round(2000 / 300 * 72)
    with pytest.raises(ImageTooLarge):
        image_to_pdf(_encoded(picture, "PNG"))  # a PNG cannot be decoded scaled down: refused


@pytest.mark.parametrize("kind", ["PNG", "JPEG", "TIFF", "WEBP"])
def test_a_damaged_picture_is_one_sentence(kind):
    whole = _encoded(Image.open(DOCS / "image_page_harbour.png").convert("L"), kind)
    cut = whole[: len(whole) // 2]
    with pytest.raises(CorruptFile) as info:
        image_to_pdf(cut, "page.img")
    message = str(info.value)
    assert message.startswith("“page.img”: the file is damaged and could not be read (") and message.count(".") <= 3
    assert "Try re-downloading or re-exporting it" in message
    with pytest.raises(CorruptFile):
        load_image(whole[:20] + bytes(200), "page.img", Settings())  # a header and nothing after it


def test_other_picture_formats_and_a_missing_ocr_are_said_plainly():
    gif = _encoded(Image.new("L", (50, 50), 255), "GIF")
    with pytest.raises(UnsupportedFileType) as info:
        image_to_pdf(gif, "anim.gif")
    assert "it is a GIF image" in str(info.value)
    png = (DOCS / "image_page_harbour.png").read_bytes()
    with pytest.raises(NoTextLayer) as off:
        read_image(png, "page.png", Settings(ocr=False), deadline=Deadline.never("page.png"))
    assert off.value.why == "off" and "OCR is turned off" in str(off.value) and "DOCCHAT_OCR=true" in str(off.value)


def test_recognised_lines_cut_into_blocks_of_their_own_are_joined_unless_a_heading_or_another_column():
    from rag_core.ingest.loaders.ocr import join_stacked_blocks

    def block(text: str, x0: float, y0: float, size: float = 10.0) -> dict:
        span = {"text": text, "size": size}
        return {"type": 0, "lines": [{"dir": (1.0, 0.0), "bbox": (x0, y0, x0 + 6 * len(text), y0 + size),
                                      "spans": [span]}]}

    blocks = [block("Port Elspeth Harbour", 40, 60, 15),  # a heading right above its text: kept apart
              block("The keeper winds the great clock every Tuesday", 40, 78),
              block("at dawn.", 40, 93, 7.5),  # no tall letters: MuPDF made it a block of its own
              block("The ledger is green.", 40, 125),  # a paragraph's gap above it: left to the layout
              block("Rule two. Boats moor at the north quay.", 300, 40)]  # the top of the next column
    joined = join_stacked_blocks(blocks)
    assert [[line["spans"][0]["text"] for line in b["lines"]] for b in joined] == [
        ["Port Elspeth Harbour"], ["The keeper winds the great clock every Tuesday", "at dawn."],
        ["The ledger is green."], ["Rule two. Boats moor at the north quay."]]


def test_an_image_is_kept_as_the_pdf_it_was_read_as_and_a_damaged_one_is_not_kept(settings):
    from rag_core.ingest.originals import load_original, save_original

    png = (DOCS / "image_page_harbour.png").read_bytes()
    assert save_original(settings, "harbour", png, "image") is not None
    kept = load_original(settings, "harbour")
    assert kept is not None and kept.startswith(b"%PDF")
    with pymupdf.open(stream=kept, filetype="pdf") as a, pymupdf.open(stream=image_to_pdf(png), filetype="pdf") as b:
        assert a[0].rect == b[0].rect  # the same page the words were recognised on, the same picture on it
        assert a[0].get_pixmap(dpi=100).samples == b[0].get_pixmap(dpi=100).samples
    assert save_original(settings, "broken", png[:200], "image") is None  # logged: only the page image is lost
    assert load_original(settings, "broken") is None
