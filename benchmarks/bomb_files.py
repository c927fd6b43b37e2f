"""Hostile archives and tables, made on the spot at any size (issue 47, item 3): used by benchmarks/bombs.py and by
tests/integration/test_bombs.py.

- `big_docx`, `big_pptx`, `big_epub`: ordinary paragraphs, `mb` megabytes of them in the main member.
- `lying_archive`: the main member's headers say 4,000 bytes; its deflate stream gives `mb` megabytes.
- `big_shared_strings_xlsx`: a workbook whose shared-strings table is `mb` megabytes (rows use the first strings).
- `many_members_docx`: a small Word document with `members` empty files beside it.
- `one_column_csv`: a one-column table of `mb` megabytes.
Every member is written in steps (zipfile streaming writes, or raw deflate), so a generator's memory stays small
whatever the size.
"""
from __future__ import annotations

import io
import random
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterator

import docx
from pptx import Presentation

MB = 1024 * 1024
_WORDS = ("river", "budget", "council", "harbour", "report", "season", "market", "station", "garden", "letter",
          "village", "engine", "summer", "museum", "bridge", "window", "forest", "doctor", "school", "capital")
LIE = 4000  # the size the lying headers declare


def sentences(n: int, seed: int = 7) -> list[str]:
    """`n` ordinary sentences, varied enough that they compress like prose (about 8:1)."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 16))).capitalize() + f" ({i})."
            for i in range(n)]


def _repeat(piece: Callable[[int], bytes], mb: float) -> Iterator[bytes]:
    """piece(0), piece(1), … until `mb` megabytes have been given."""
    size, i = int(mb * MB), 0
    while size > 0:
        block = piece(i)
        size -= len(block)
        i += 1
        yield block


def _rewrite(base: bytes, member: str, parts: Iterator[bytes],
             patch: Callable[[str, bytes], bytes] = lambda name, content: content) -> bytes:
    """`base` (a ZIP) with `member`'s content replaced by `parts`, written in steps (and the others by `patch`)."""
    out = io.BytesIO()
    with zipfile.ZipFile(io.BytesIO(base)) as src, zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as dst:
        for info in src.infolist():
            if info.filename != member:
                dst.writestr(info.filename, patch(info.filename, src.read(info.filename)))
        with dst.open(member, "w", force_zip64=True) as f:
            for part in parts:
                f.write(part)
    return out.getvalue()


def _paragraphs(open_tag: str, close_tag: str, mb: float, varied: bool = True) -> Iterator[bytes]:
    """`mb` MB of paragraphs of three sentences each: varied (prose-like, ~3:1 packed), or one paragraph again and
    again (packs ~1000:1, as a zip bomb does)."""
    pool = [s.encode() for s in sentences(4096 if varied else 1)] * (1 if varied else 4096)
    para = (open_tag + "%s" + close_tag).encode()
    if not varied:  # pieces of 64 KB, all the same
        block = para % pool[0] * (65_536 // len(para % pool[0]))
        return _repeat(lambda i: block, mb)
    return _repeat(lambda i: para % b" ".join(pool[(i + k) % 4096] for k in range(3)), mb)


def _docx_base() -> bytes:
    buf = io.BytesIO()
    d = docx.Document()
    d.add_paragraph("Start.")
    d.save(buf)
    return buf.getvalue()


_W = 'xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"'


def docx_body(mb: float, varied: bool = True) -> Iterator[bytes]:
    """A word/document.xml of about `mb` MB of ordinary paragraphs."""
    yield f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {_W}><w:body>'.encode()
    yield from _paragraphs("<w:p><w:r><w:t>", "</w:t></w:r></w:p>", mb, varied)
    yield b"</w:body></w:document>"


def big_docx(mb: float) -> bytes:
    return _rewrite(_docx_base(), "word/document.xml", docx_body(mb))


def tiny_runs_docx(mb: float) -> bytes:
    """A Word document of `mb` MB of one-letter runs: a few bytes of XML each, but an element of memory each."""
    def body() -> Iterator[bytes]:
        yield f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><w:document {_W}><w:body>'.encode()
        yield from _repeat(lambda i: b"<w:p>" + b"<w:r><w:t>x</w:t></w:r>" * 100 + b"</w:p>", mb)
        yield b"</w:body></w:document>"

    return _rewrite(_docx_base(), "word/document.xml", body())


def _pptx_base() -> bytes:
    prs = Presentation()
    slide = prs.slides.add_slide(prs.slide_layouts[5])
    slide.shapes.title.text = "Budget"
    buf = io.BytesIO()
    prs.save(buf)
    return buf.getvalue()


def _slide(mb: float, varied: bool = True) -> Iterator[bytes]:
    a = 'xmlns:a="http://schemas.openxmlformats.org/drawingml/2006/main"'
    p = 'xmlns:p="http://schemas.openxmlformats.org/presentationml/2006/main"'
    yield (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><p:sld {a} {p}><p:cSld><p:spTree>'
           '<p:nvGrpSpPr><p:cNvPr id="1" name=""/><p:cNvGrpSpPr/><p:nvPr/></p:nvGrpSpPr><p:grpSpPr/>'
           '<p:sp><p:nvSpPr><p:cNvPr id="2" name="Text"/><p:cNvSpPr txBox="1"/><p:nvPr/></p:nvSpPr><p:spPr/>'
           '<p:txBody><a:bodyPr/>').encode()
    yield from _paragraphs("<a:p><a:r><a:t>", "</a:t></a:r></a:p>", mb, varied)
    yield b"</p:txBody></p:sp></p:spTree></p:cSld></p:sld>"


def big_pptx(mb: float) -> bytes:
    return _rewrite(_pptx_base(), "ppt/slides/slide1.xml", _slide(mb))


_CONTAINER = (b'<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:opendocument:xmlns:container">'
              b'<rootfiles><rootfile full-path="OEBPS/content.opf" media-type="application/oebps-package+xml"/>'
              b"</rootfiles></container>")
_OPF = (b'<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" version="3.0" unique-identifier="id">'
        b'<metadata xmlns:dc="http://purl.org/dc/elements/1.1/"><dc:title>Long Book</dc:title>'
        b'<dc:identifier id="id">x</dc:identifier></metadata><manifest>'
        b'<item id="c1" href="c1.xhtml" media-type="application/xhtml+xml"/></manifest>'
        b'<spine><itemref idref="c1"/></spine></package>')


def _chapter(mb: float, varied: bool = True) -> Iterator[bytes]:
    yield b'<?xml version="1.0"?><html xmlns="http://www.w3.org/1999/xhtml"><head><title>1</title></head><body>'
    yield from _paragraphs("<p>", "</p>", mb, varied)
    yield b"</body></html>"


def epub_members(chapter: Iterator[bytes]) -> list[tuple[str, Iterator[bytes]]]:
    return [("mimetype", iter([b"application/epub+zip"])), ("META-INF/container.xml", iter([_CONTAINER])),
            ("OEBPS/content.opf", iter([_OPF])), ("OEBPS/c1.xhtml", chapter)]


def big_epub(mb: float) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, parts in epub_members(_chapter(mb)):
            with zf.open(name, "w", force_zip64=True) as f:
                for part in parts:
                    f.write(part)
    return out.getvalue()


# --------------------------------------------------------------------------- raw ZIP writing (headers that lie)
def _deflate(parts: Iterator[bytes], level: int = 9) -> tuple[bytes, int, int]:
    """(raw deflate stream, CRC-32, real size) of `parts`."""
    z = zlib.compressobj(level, zlib.DEFLATED, -15)
    out, crc, size = [], 0, 0
    for part in parts:
        out.append(z.compress(part))
        crc, size = zlib.crc32(part, crc), size + len(part)
    out.append(z.flush())
    return b"".join(out), crc, size


def raw_zip(members: list[tuple[str, bytes, int, int, int]]) -> bytes:
    """A ZIP of (name, stored bytes, method, CRC-32, declared size) members, headers written as given (ZIP64 end
    records when there are more than 65,535 members)."""
    out, central = bytearray(), bytearray()
    for name, stored, method, crc, declared in members:
        raw = name.encode()
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, 0, method, 0, 0x21, crc, len(stored),
                               declared, len(raw), 0, 0, 0, 0, 0, len(out)) + raw
        out += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, 0, method, 0, 0x21, crc, len(stored), declared,
                           len(raw), 0) + raw + stored
    start, count = len(out), len(members)
    out += central
    if count > 0xFFFF:
        record = len(out)
        out += struct.pack("<4sQHHIIQQQQ", b"PK\x06\x06", 44, 45, 45, 0, 0, count, count, len(central), start)
        out += struct.pack("<4sIQI", b"PK\x06\x07", 0, record, 1)
    short = min(count, 0xFFFF)
    out += struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, short, short, len(central), start, 0)
    return bytes(out)


def _members_of(base: bytes, replace: str | None = None) -> list[tuple[str, bytes, int, int, int]]:
    """The members of the ZIP `base`, deflated again, true headers (but `replace`, left out)."""
    out = []
    with zipfile.ZipFile(io.BytesIO(base)) as zf:
        for info in zf.infolist():
            if info.filename != replace:
                stored, crc, size = _deflate(iter([zf.read(info)]))
                out.append((info.filename, stored, 8, crc, size))
    return out


def lying_archive(kind: str, mb: float) -> bytes:
    """A docx, pptx or epub whose main member's headers declare 4,000 bytes but whose stream gives `mb` MB."""
    if kind == "epub":
        members = [(n, *_deflate(p)) for n, p in epub_members(iter([b""]))][:-1]
        main, body = "OEBPS/c1.xhtml", _chapter(mb, varied=False)
        plain = [(n, s, 8, c, size) for n, s, c, size in members]
    else:
        base, main = (_docx_base(), "word/document.xml") if kind == "docx" else (_pptx_base(), "ppt/slides/slide1.xml")
        plain, body = _members_of(base, main), (docx_body(mb, False) if kind == "docx" else _slide(mb, False))
    stored, crc = _deflate_fast(body)
    return raw_zip([*plain, (main, stored, 8, crc, LIE)])


def _deflate_fast(parts: Iterator[bytes]) -> tuple[bytes, int]:
    """(raw deflate stream, CRC-32) of `parts`, each distinct part compressed once: every part is flushed whole
    (Z_FULL_FLUSH: no reference reaches into the part before), so a repeated part's bytes are simply repeated."""
    done: dict[bytes, bytes] = {}
    out, crc = [], 0
    for part in parts:
        if part not in done:
            z = zlib.compressobj(6, zlib.DEFLATED, -15)
            done[part] = z.compress(part) + z.flush(zlib.Z_FULL_FLUSH)
        out.append(done[part])
        crc = zlib.crc32(part, crc)
    z = zlib.compressobj(6, zlib.DEFLATED, -15)
    out.append(z.flush(zlib.Z_FINISH))  # the final (empty) block
    return b"".join(out), crc


def many_members_docx(members: int) -> bytes:
    """A small Word document with `members` empty files beside it in its ZIP."""
    empty = b""
    crc = zlib.crc32(empty)
    extra = ((f"customXml/item{i}.xml", empty, 0, crc, 0) for i in range(members))
    return raw_zip([*_members_of(_docx_base()), *extra])


# --------------------------------------------------------------------------- tables
def big_shared_strings_xlsx(mb: float, rows: int = 30_000) -> bytes:
    """A workbook of one sheet of `rows` rows (two columns of shared strings) whose shared-strings table holds `mb` MB
    of distinct sentences."""
    import openpyxl

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["Place", "Note"])
    ws.append(["x", "y"])
    buf = io.BytesIO()
    wb.save(buf)
    main = 'xmlns="http://schemas.openxmlformats.org/spreadsheetml/2006/main"'

    def sheet() -> Iterator[bytes]:
        yield (f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><worksheet {main}><sheetData>').encode()
        for r in range(1, rows + 1):
            yield (f'<row r="{r}"><c r="A{r}" t="s"><v>{2 * r}</v></c><c r="B{r}" t="s"><v>{2 * r + 1}</v></c>'
                   "</row>").encode()
        yield b"</sheetData></worksheet>"

    pool = [s.encode() for s in sentences(4096)]

    def strings() -> Iterator[bytes]:
        yield f'<?xml version="1.0" encoding="UTF-8" standalone="yes"?><sst {main}>'.encode()
        yield from _repeat(lambda i: b"<si><t>%d %s</t></si>" % (i, pool[i % 4096]), mb)
        yield b"</sst>"

    def declare(name: str, content: bytes) -> bytes:  # the table's content type, as Excel writes it
        if name != "[Content_Types].xml" or b"sharedStrings" in content:
            return content
        return content.replace(b"</Types>", b'<Override PartName="/xl/sharedStrings.xml" ContentType="application/'
                               b'vnd.openxmlformats-officedocument.spreadsheetml.sharedStrings+xml"/></Types>')

    return _rewrite(_rewrite(buf.getvalue(), "xl/worksheets/sheet1.xml", sheet(), declare), "xl/sharedStrings.xml",
                    strings())


def one_column_csv(mb: float) -> bytes:
    """A one-column table of `mb` MB: a header, then one number a line."""
    out = bytearray(b"value\n")
    for part in _repeat(lambda i: b"%d\n" % (i * 7919 % 1_000_003), mb):
        out += part
    return bytes(out)
