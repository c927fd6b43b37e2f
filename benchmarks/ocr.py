"""OCR of scanned PDFs, measured: character error rate (CER) against the true text, seconds per page, and retrieval
(a question whose answer is on the scanned page finds it in the top 3).

Scans: the two scanned fixtures (the brochure against its shipped .reference.txt, itself approximate; the book page
against a transcription made for this benchmark), and pages rasterised here from a text PDF at 200 dpi, whose true
text is their text layer (goal: CER <= 3 %). Text goes through DocChat's own loader (`load_bytes`, layout analysis
included), so the figures are what the library stores.

Run: .venv/bin/python -m benchmarks.ocr [--dpi 300] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import re
import tempfile
import time
import unicodedata
from collections import Counter
from pathlib import Path

import pymupdf

from rag_core.core.config import Settings
from rag_core.ingest.loaders import load_bytes

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "tests" / "fixtures" / "documents"
BOOK = "pdf_scanned_image-only_book-page.pdf"
BROCHURE = "pdf_scanned_image-only_two-columns.pdf"
RASTER_SOURCE = "pdf_text_4-pages_pdflatex.pdf"
TABLE_SOURCE = ("pdf_text_multicolumn_3-pages.pdf", 2)  # page 3: a table of EU countries
DISTRACTORS = ["pdf_text_4-pages_pdflatex.pdf", "pdf_text_outline-bookmarks_4-pages.pdf", "pdf_non-latin_arabic.pdf",
               "docx_headings-lists-tables-images.docx", "docx_headings_toc.docx", "docx_paragraphs-and-tables.docx"]
# The book page (Adventures of Huckleberry Finn, 1884, p. 22), transcribed from the scan for this benchmark: body text,
# line-end hyphens joined ("min-utes" -> "minutes"), then the picture's caption. One word of the 1884 text (the one
# between "big" and "named") is masked here and in the OCR output alike.
BOOK_TRUTH = """Chapter II.
WE went tip-toeing along a path amongst the trees back towards the end of the widow's garden, stooping down so as the
branches wouldn't scrape our heads. When we was passing by the kitchen I fell over a root and made a noise. We
scrouched down and laid still. Miss Watson's big XXXXXX, named Jim, was setting in the kitchen door; we could see him
pretty clear, because there was a light behind him. He got up and stretched his neck out about a minute, listening.
Then he says,
"Who dah?"
He listened some more; then he come tip-toeing down and stood right between us; we could a touched him, nearly. Well,
likely it was minutes and minutes that there warn't a sound, and we all there so close together. There was a place on
my ankle that got to itching; but I dasn't scratch it; and then my ear begun to itch; and next my back, right between
my shoulders. Seemed like I'd die if I couldn't scratch. Well, I've noticed that thing plenty of times since. If you
are with the quality, or at a funeral, or trying to go to sleep when you ain't sleepy—if you are anywheres
THEY TIP-TOED ALONG."""
_MASK_RE = re.compile(r"(\bbig\s+)\S+(\s+named\b)")
# (scan, question, a word the answer passage must hold)
QUESTIONS = [
    (BROCHURE, "How many tracks does each sequence of the LinnSequencer have?", "32"),
    (BOOK, "Who was setting in the kitchen door?", "Jim"),
    ("eu-table-scan.pdf", "What is the capital of Denmark?", "Copenhagen"),
]


def levenshtein(a: str, b: str) -> int:
    """Edit distance (Myers/Hyyrö bit-parallel: one pass of big-integer operations per character)."""
    if len(a) < len(b):
        a, b = b, a
    m = len(b)
    if m == 0:
        return len(a)
    peq: dict[str, int] = {}
    for i, c in enumerate(b):
        peq[c] = peq.get(c, 0) | (1 << i)
    mask, high = (1 << m) - 1, 1 << (m - 1)
    pv, mv, score = mask, 0, m
    for c in a:
        eq = peq.get(c, 0)
        xv = eq | mv
        xh = (((eq & pv) + pv) ^ pv) | eq
        ph = mv | (~(xh | pv) & mask)
        mh = pv & xh
        score += 1 if ph & high else -1 if mh & high else 0
        ph = ((ph << 1) | 1) & mask
        mh = (mh << 1) & mask
        pv = mh | (~(xv | ph) & mask)
        mv = ph & xv
    return score


def normalise(text: str) -> str:
    """NFKC, curly quotes and dashes made plain, whitespace collapsed: layout is not what CER measures."""
    text = unicodedata.normalize("NFKC", text)
    text = text.translate(str.maketrans({"‘": "'", "’": "'", "“": '"', "”": '"', "–": "-"}))
    return " ".join(text.split())


def cer(truth: str, got: str) -> float:
    """Character error rate: edits to turn the recognised text into the true text, per true character."""
    truth, got = normalise(truth), normalise(got)
    return levenshtein(truth, got) / max(1, len(truth))


def word_recall(truth: str, got: str) -> float:
    """Share of the true words (with repeats) found in the recognised text, in any order."""
    words = Counter(re.findall(r"\w+", normalise(truth).casefold()))
    found = Counter(re.findall(r"\w+", normalise(got).casefold()))
    return sum((words & found).values()) / max(1, sum(words.values()))


def rasterise(data: bytes, pages: list[int], dpi: int = 200) -> tuple[bytes, str]:
    """An image-only PDF of `pages`, rendered at `dpi` in grey, and the true text of those pages."""
    src = pymupdf.open(stream=data, filetype="pdf")
    out = pymupdf.open()
    truth = []
    for i in pages:
        page = src[i]
        truth.append(page.get_text())
        pix = page.get_pixmap(dpi=dpi, colorspace=pymupdf.csGRAY)
        scanned = out.new_page(width=page.rect.width, height=page.rect.height)
        scanned.insert_image(scanned.rect, stream=pix.tobytes("png"))
    return out.tobytes(), "\n".join(truth)


def read(data: bytes, name: str, settings: Settings) -> tuple[str, float, int]:
    """(text, seconds, pages) through DocChat's loader (a child process, as in the app)."""
    started = time.perf_counter()
    doc = load_bytes(data, name, settings)
    return doc.text, time.perf_counter() - started, doc.page_count or 1


def quality(settings: Settings) -> dict:
    """CER, word recall and seconds per page on each scan."""
    raster, raster_truth = rasterise((DOCS / RASTER_SOURCE).read_bytes(), [0, 1, 2, 3])
    cases = {
        "rasterised_200dpi_4_pages": (raster, raster_truth),
        BROCHURE: ((DOCS / BROCHURE).read_bytes(), (DOCS / BROCHURE).with_suffix(".reference.txt").read_text()),
        BOOK: ((DOCS / BOOK).read_bytes(), BOOK_TRUTH),
    }
    out = {}
    for name, (data, truth) in cases.items():
        text, seconds, pages = read(data, name + ("" if name.endswith(".pdf") else ".pdf"), settings)
        if name == BOOK:
            text = _MASK_RE.sub(r"\1XXXXXX\2", text, count=1)
        out[name] = {"pages": pages, "cer": round(cer(truth, text), 4), "word_recall": round(word_recall(truth, text), 4),
                     "s_per_page": round(seconds / pages, 2), "chars": len(normalise(text))}
    return out


def retrieval(settings: Settings) -> dict:
    """For each question, the rank (1-based) of the first passage from its scan that holds the answer word."""
    from rag_core.service.library import Library
    from rag_core.store.embeddings import Embedder

    table, _ = rasterise((DOCS / TABLE_SOURCE[0]).read_bytes(), [TABLE_SOURCE[1]])
    scans = {BROCHURE: (DOCS / BROCHURE).read_bytes(), BOOK: (DOCS / BOOK).read_bytes(), "eu-table-scan.pdf": table}
    with tempfile.TemporaryDirectory() as tmp:
        lib = Library(settings.with_overrides(data_dir=Path(tmp)), embedder=Embedder())
        try:
            for name in DISTRACTORS:
                lib.ingest_path(DOCS / name)
            for name, data in scans.items():
                result = lib.ingest_bytes(data, name)
                if result.status != "added":
                    raise SystemExit(f"{name}: {result.error}")
            ranks = {}
            for scan, question, word in QUESTIONS:
                hits = lib.search(question, k=10)
                rank = next((i for i, p in enumerate(hits, 1)
                             if p.chunk.source.file_name == scan and word in p.chunk.text and p.chunk.from_scan), None)
                ranks[question] = rank
        finally:
            lib.close()
    return {"ranks": ranks, "in_top_3": sum(r is not None and r <= 3 for r in ranks.values()), "questions": len(ranks)}


def main() -> None:
    """Print the figures (the machine's load is printed too: OCR time depends on free cores)."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--dpi", type=int, nargs="+", default=[300], help="OCR resolution(s) to measure")
    ap.add_argument("--language", default="eng")
    ap.add_argument("--no-retrieval", action="store_true")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out: dict = {"load_average_before": os.getloadavg()[0], "cores": os.cpu_count()}
    for dpi in args.dpi:
        out[f"dpi_{dpi}"] = quality(Settings(ocr_dpi=dpi, ocr_language=args.language))
    if not args.no_retrieval:
        out["retrieval"] = retrieval(Settings(ocr_dpi=args.dpi[0], ocr_language=args.language))
    out["load_average_after"] = os.getloadavg()[0]
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for key, value in out.items():
        print(f"{key}: {json.dumps(value)}")


if __name__ == "__main__":
    main()
