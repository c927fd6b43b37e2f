"""Bigger inputs of every kind DocChat reads, for benchmarks/ingest.py: made here from the paragraphs of a real text
(the committed fixtures are a few slides or rows each, too small to time). Each maker returns (bytes, units), the
units being what the kind counts: slides, rows, chapters or sections."""
from __future__ import annotations

import csv
import io
import zipfile
from html import escape
from itertools import cycle, islice

_ODF_NS = ('xmlns:office="urn:oasis:names:tc:opendocument:xmlns:office:1.0" '
           'xmlns:text="urn:oasis:names:tc:opendocument:xmlns:text:1.0" '
           'xmlns:table="urn:oasis:names:tc:opendocument:xmlns:table:1.0" '
           'xmlns:draw="urn:oasis:names:tc:opendocument:xmlns:drawing:1.0" '
           'xmlns:presentation="urn:oasis:names:tc:opendocument:xmlns:presentation:1.0" '
           'xmlns:svg="urn:oasis:names:tc:opendocument:xmlns:svg-compatible:1.0" office:version="1.3"')
_ODF_MIME = {"odt": "application/vnd.oasis.opendocument.text",
             "odp": "application/vnd.oasis.opendocument.presentation",
             "ods": "application/vnd.oasis.opendocument.spreadsheet"}
_ITEMS = ("Travel", "Equipment", "Training", "Licences", "Catering", "Rent", "Printing", "Insurance")


def _rows(paragraphs: list[str], n: int) -> list[list[str]]:
    """n budget rows: item, amounts, owner, a note of a few words from the text."""
    words = " ".join(paragraphs).split()
    return [[f"{_ITEMS[i % len(_ITEMS)]} {i + 1}", f"{(i * 37) % 9000 + 1000:,}", f"{(i * 53) % 7000:,}",
             f"Owner {i % 17}", " ".join(words[(i * 7) % (len(words) - 8):][:8])] for i in range(n)]


HEADER = ["Item", "Budget (EUR)", "Spent (EUR)", "Owner", "Notes"]


def pptx(paragraphs: list[str], slides: int) -> tuple[bytes, int]:
    """A deck: each slide a title and two paragraphs of body text, every fifth a table, every third with notes."""
    from pptx import Presentation
    from pptx.util import Inches

    prs = Presentation()
    text = cycle(paragraphs)
    for n in range(1, slides + 1):
        slide = prs.slides.add_slide(prs.slide_layouts[1])
        slide.shapes.title.text = f"Topic {n}: " + " ".join(next(text).split()[:5])
        slide.placeholders[1].text_frame.text = next(text)
        slide.placeholders[1].text_frame.add_paragraph().text = next(text)
        if n % 5 == 0:
            rows = [HEADER[:3]] + [r[:3] for r in _rows(paragraphs, 4)]
            table = slide.shapes.add_table(len(rows), 3, Inches(0.5), Inches(5), Inches(9), Inches(1.5)).table
            for r, row in enumerate(rows):
                for c, value in enumerate(row):
                    table.cell(r, c).text = value
        if n % 3 == 0:
            slide.notes_slide.notes_text_frame.text = next(text)
    out = io.BytesIO()
    prs.save(out)
    return out.getvalue(), slides


def xlsx(paragraphs: list[str], rows: int) -> tuple[bytes, int]:
    """A workbook of two sheets of budget rows under a header row."""
    import xlsxwriter

    out = io.BytesIO()
    book = xlsxwriter.Workbook(out, {"in_memory": True})
    half = rows // 2
    for name, part in (("Budget", _rows(paragraphs, half)), ("Forecast", _rows(paragraphs[3:], rows - half))):
        sheet = book.add_worksheet(name)
        for r, row in enumerate([HEADER, *part]):
            sheet.write_row(r, 0, row)
    book.close()
    return out.getvalue(), rows


def csv_table(paragraphs: list[str], rows: int) -> tuple[bytes, int]:
    """A CSV table of budget rows under a header row."""
    out = io.StringIO()
    csv.writer(out).writerows([HEADER, *_rows(paragraphs, rows)])
    return out.getvalue().encode("utf-8"), rows


def html(paragraphs: list[str], sections: int) -> tuple[bytes, int]:
    """A saved web page: navigation, a cookie banner, a script and a footer around an article of h2 sections."""
    text = cycle(paragraphs)
    nav = "".join(f'<li><a href="/p{i}">Menu entry {i}</a></li>' for i in range(30))
    body = "".join(f"<h2>Section {n}</h2><p>{escape(next(text))}</p><p>{escape(next(text))}</p>"
                   for n in range(1, sections + 1))
    page = (f"<!DOCTYPE html><html><head><title>Benchmark page</title><script>var t = 1;</script>"
            f"<style>body {{ color: black }}</style></head><body><header><nav><ul>{nav}</ul></nav></header>"
            f'<div class="cookie-banner">We use cookies. <button>Accept all</button></div>'
            f"<main><article><h1>Benchmark page</h1>{body}</article></main>"
            f"<footer><p>Copyright 2024. Imprint. Privacy. Contact.</p></footer></body></html>")
    return page.encode("utf-8"), sections


def epub(paragraphs: list[str], chapters: int) -> tuple[bytes, int]:
    """An EPUB 3 book: chapters in the spine and in the nav table of contents, title and author in the metadata."""
    text = cycle(paragraphs)
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        zf.writestr("META-INF/container.xml", '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:'
                    'names:tc:opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/content.opf" '
                    'media-type="application/oebps-package+xml"/></rootfiles></container>')
        items = "".join(f'<item id="c{n}" href="c{n}.xhtml" media-type="application/xhtml+xml"/>'
                        for n in range(1, chapters + 1))
        spine = "".join(f'<itemref idref="c{n}"/>' for n in range(1, chapters + 1))
        zf.writestr("OEBPS/content.opf", '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                    'version="3.0" unique-identifier="id"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
                    '<dc:identifier id="id">bench</dc:identifier><dc:title>Benchmark book</dc:title>'
                    '<dc:creator>DocChat</dc:creator><dc:language>en</dc:language></metadata><manifest>'
                    '<item id="nav" href="nav.xhtml" media-type="application/xhtml+xml" properties="nav"/>'
                    f'{items}</manifest><spine>{spine}</spine></package>')
        toc = "".join(f'<li><a href="c{n}.xhtml">Chapter {n}</a></li>' for n in range(1, chapters + 1))
        zf.writestr("OEBPS/nav.xhtml", '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml" '
                    'xmlns:epub="http://www.idpf.org/2007/ops"><head><title>Contents</title></head><body>'
                    f'<nav epub:type="toc"><ol>{toc}</ol></nav></body></html>')
        for n in range(1, chapters + 1):
            paras = "".join(f"<p>{escape(p)}</p>" for p in islice(text, 4))
            zf.writestr(f"OEBPS/c{n}.xhtml", '<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml">'
                        f"<head><title>Chapter {n}</title></head><body><h1>Chapter {n}</h1>{paras}</body></html>")
    return out.getvalue(), chapters


def _odf(kind: str, body: str) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr(zipfile.ZipInfo("mimetype"), _ODF_MIME[kind], compress_type=zipfile.ZIP_STORED)
        zf.writestr("META-INF/manifest.xml", '<?xml version="1.0"?><manifest:manifest xmlns:manifest="urn:oasis:'
                    'names:tc:opendocument:xmlns:manifest:1.0" manifest:version="1.3"><manifest:file-entry '
                    f'manifest:full-path="/" manifest:media-type="{_ODF_MIME[kind]}"/><manifest:file-entry '
                    'manifest:full-path="content.xml" manifest:media-type="text/xml"/></manifest:manifest>')
        zf.writestr("content.xml", f'<?xml version="1.0" encoding="UTF-8"?><office:document-content {_ODF_NS}>'
                    f"<office:body>{body}</office:body></office:document-content>")
    return out.getvalue()


def odt(paragraphs: list[str], sections: int) -> tuple[bytes, int]:
    """An OpenDocument text: a heading and two paragraphs per section."""
    text = cycle(paragraphs)
    body = "".join(f'<text:h text:outline-level="1">Section {n}</text:h><text:p>{escape(next(text))}</text:p>'
                   f"<text:p>{escape(next(text))}</text:p>" for n in range(1, sections + 1))
    return _odf("odt", f"<office:text>{body}</office:text>"), sections


def odp(paragraphs: list[str], slides: int) -> tuple[bytes, int]:
    """An OpenDocument presentation: a title frame and a body frame of two paragraphs per slide."""
    text = cycle(paragraphs)

    def frame(cls: str, inner: str) -> str:
        return (f'<draw:frame presentation:class="{cls}" svg:x="1cm" svg:y="{1 if cls == "title" else 4}cm">'
                f"<draw:text-box>{inner}</draw:text-box></draw:frame>")

    pages = "".join(f'<draw:page draw:name="p{n}">' + frame("title", f"<text:p>Topic {n}</text:p>")
                    + frame("outline", f"<text:p>{escape(next(text))}</text:p><text:p>{escape(next(text))}</text:p>")
                    + "</draw:page>" for n in range(1, slides + 1))
    return _odf("odp", f"<office:presentation>{pages}</office:presentation>"), slides


def ods(paragraphs: list[str], rows: int) -> tuple[bytes, int]:
    """An OpenDocument spreadsheet: one sheet of budget rows under a header row."""
    def row(cells: list[str]) -> str:
        return "<table:table-row>" + "".join(f'<table:table-cell office:value-type="string"><text:p>{escape(c)}'
                                             "</text:p></table:table-cell>" for c in cells) + "</table:table-row>"

    table = "".join(row(r) for r in [HEADER, *_rows(paragraphs, rows)])
    return _odf("ods", f'<office:spreadsheet><table:table table:name="Budget">{table}</table:table>'
                       "</office:spreadsheet>"), rows


def _rtf_text(text: str) -> str:
    out = []
    for ch in text:
        if ch in "\\{}":
            out.append("\\" + ch)
        elif ord(ch) > 127:
            out.append(f"\\u{ord(ch) if ord(ch) < 32768 else ord(ch) - 65536}?")
        else:
            out.append(ch)
    return "".join(out)


def rtf(paragraphs: list[str], sections: int) -> tuple[bytes, int]:
    """An RTF document as Word writes one: a style table, heading-styled paragraphs and body paragraphs."""
    text = cycle(paragraphs)
    body = "".join(f"{{\\pard\\s1\\outlinelevel0\\b\\fs32 Section {n}\\b0\\fs24\\par}}"
                   f"{{\\pard\\s0 {_rtf_text(next(text))}\\par}}{{\\pard\\s0 {_rtf_text(next(text))}\\par}}"
                   for n in range(1, sections + 1))
    doc = ("{\\rtf1\\ansi\\ansicpg1252\\deff0{\\fonttbl{\\f0 Arial;}}{\\stylesheet{\\s0 Normal;}"
           "{\\s1\\outlinelevel0 heading 1;}}" + body + "}")
    return doc.encode("ascii"), sections


def paragraphs_of(text: str, min_words: int = 25) -> list[str]:
    """The paragraphs of a text with at least `min_words` words, whitespace collapsed."""
    paras = [" ".join(p.split()) for p in text.split("\n\n")]
    return [p for p in paras if len(p.split()) >= min_words]
