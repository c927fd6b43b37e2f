"""EPUB readers, measured: DocChat's own (zipfile + lxml, rag_core.ingest.loaders.ebook) against PyMuPDF (already a
dependency: it lays the book out into pages) and EbookLib (parses the package; chapters then go through the same
HTML-to-text code as DocChat's).

Books: the IDPF/W3C EPUB 3 samples (github.com/IDPF/epub3-samples, CC BY-SA 3.0), packed from their folders
(mimetype first, stored; the rest deflated), plus the generated fixtures in tests/fixtures/documents/. Figures per
reader: CPU seconds per book, characters of text, TOC entries read, chapter starts placed in the text (DocChat places
each at its exact character; PyMuPDF only knows the page a TOC entry points at), list items ("- ") and table rows
(" | ") kept, title and author read from the metadata.

EbookLib is not a DocChat dependency: `.venv/bin/pip install --target /tmp/epubbench ebooklib`.
Run: PYTHONPATH=/tmp/epubbench .venv/bin/python -m benchmarks.epub_readers [EPUB or folder of unpacked samples ...]
     [--json]
"""
from __future__ import annotations

import argparse
import io
import json
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders.ebook import read_epub

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "documents"


class Result(NamedTuple):
    text: str
    toc_entries: int
    placed: int  # chapter starts placed at a character offset in the text
    title: str
    author: str


def pack(folder: Path) -> bytes:
    """An unpacked EPUB folder as an .epub: the mimetype first and stored, the rest deflated."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.write(folder / "mimetype", "mimetype", compress_type=zipfile.ZIP_STORED)
        for path in sorted(folder.rglob("*")):
            if path.is_file() and path.name != "mimetype":
                zf.write(path, path.relative_to(folder).as_posix(), compress_type=zipfile.ZIP_DEFLATED)
    return buf.getvalue()


def docchat(data: bytes) -> Result:
    ex = read_epub(data, "book.epub", Settings(), Deadline.never("book.epub"))
    title, _, author = ex.title.partition(" — ")
    placed = sum(1 for s in ex.sections if s.heading_path)
    return Result(ex.text, placed, placed, title, author)


def pymupdf_(data: bytes) -> Result:
    import pymupdf

    pymupdf.TOOLS.mupdf_display_errors(False)  # missing fonts and CSS it cannot parse: one line each, many times
    with pymupdf.open(stream=data, filetype="epub") as doc:
        toc = doc.get_toc()
        text = "\n".join(page.get_text() for page in doc)
        meta = doc.metadata or {}
    return Result(text, len(toc), 0, meta.get("title") or "", meta.get("author") or "")


def ebooklib_(data: bytes) -> Result:
    import ebooklib
    from ebooklib import epub
    from lxml import html

    from rag_core.ingest.loaders._html_text import HTML_PARSER, blocks_of

    book = epub.read_epub(io.BytesIO(data), options={"ignore_ncx": False})
    parts = []
    for idref, _ in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        root = html.document_fromstring(item.get_content(), parser=HTML_PARSER)
        blocks, _ = blocks_of(root)
        parts.append("\n\n".join(b.text for b in blocks))

    def count(entries: list) -> int:
        return sum(1 + (count(e[1]) if isinstance(e, tuple) else 0) for e in entries)

    titles = book.get_metadata("DC", "title")
    creators = book.get_metadata("DC", "creator")
    return Result("\n\n".join(parts), count(book.toc), 0, titles[0][0] if titles else "",
                  ", ".join(c[0] for c in creators))


READERS: dict[str, Callable[[bytes], Result]] = {"docchat": docchat, "pymupdf": pymupdf_, "ebooklib": ebooklib_}


def books(paths: list[Path]) -> dict[str, bytes]:
    out: dict[str, bytes] = {}
    for path in paths:
        if path.suffix == ".epub":
            out[path.stem] = path.read_bytes()
        elif (path / "mimetype").exists():
            out[path.name] = pack(path)
        elif path.is_dir():
            out.update(books(sorted(p for p in path.iterdir() if p.is_dir() or p.suffix == ".epub")))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("paths", nargs="*", type=Path, help="EPUB files or unpacked EPUB folders")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    corpus = books(args.paths or sorted(FIXTURES.glob("*.epub")))
    rows: dict[str, dict[str, dict[str, float | str]]] = {}
    for name, reader in READERS.items():
        try:
            reader((FIXTURES / "epub_toc_three-chapters.epub").read_bytes())  # imports and set-up, not timed
        except ImportError as e:
            print(f"skipping {name}: {e}")
            continue
        for book, data in corpus.items():
            start = time.process_time()
            try:
                r = reader(data)
            except Exception as e:  # noqa: BLE001 - a reader failing on a book is a result, not a stop
                rows.setdefault(book, {})[name] = {"error": f"{type(e).__name__}: {e}"[:80]}
                continue
            lines = r.text.splitlines()
            rows.setdefault(book, {})[name] = {
                "seconds": time.process_time() - start, "chars": len(r.text), "toc": r.toc_entries,
                "placed": r.placed, "list_items": sum(line.lstrip().startswith("- ") for line in lines),
                "table_rows": sum(" | " in line for line in lines), "title": r.title, "author": r.author}
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return
    print("| book | reader | CPU s | characters | TOC entries | chapter starts placed | list items | table rows "
          "| title / author |")
    print("|---|---|---|---|---|---|---|---|---|")
    for book, by_reader in rows.items():
        for name, r in by_reader.items():
            if "error" in r:
                print(f"| {book} | {name} | failed: {r['error']} |||||||")
                continue
            print(f"| {book} | {name} | {r['seconds']:.2f} | {r['chars']:,} | {r['toc']} | {r['placed']} | "
                  f"{r['list_items']} | {r['table_rows']} | {str(r['title'])[:30]} / {str(r['author'])[:25]} |")
    totals: dict[str, float] = {}
    for by_reader in rows.values():
        for name, r in by_reader.items():
            if "seconds" in r:
                totals[name] = totals.get(name, 0.0) + float(r["seconds"])
    print("\nTotal CPU seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in totals.items()))


if __name__ == "__main__":
    main()
