"""Ingest throughput: pages/s, chunks/s, and total ingest time / pure encode time of the same chunks.

Run: .venv/bin/python -m benchmarks.ingest   (goal: ratio <= 1.2)
"""
from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.ingest.chunking import chunk_document
from rag_core.ingest.loaders import load_bytes
from rag_core.service.library import Library
from rag_core.store.embeddings import Embedder

ROOT = Path(__file__).resolve().parents[1]

DOCS = ROOT / "tests" / "fixtures" / "documents"
LONG_PDF = DOCS / "pdf_text_long_117-pages_german.pdf"
MIXED = [
    "pdf_text_4-pages_pdflatex.pdf", "pdf_text_multicolumn_3-pages.pdf", "pdf_text_outline-bookmarks_4-pages.pdf",
    "pdf_non-latin_arabic.pdf", "docx_headings-lists-tables-images.docx", "docx_headings_toc.docx",
    "docx_paragraphs-and-tables.docx", "docx_table_merged-cells.docx",
]


def run(files: list[Path], embedder: Embedder) -> dict:
    """Ingest `files` into a fresh library and time it against pure encoding of the same chunk texts."""
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(data_dir=Path(tmp))
        lib = Library(settings, embedder=embedder)
        t0 = time.perf_counter()
        results = [lib.ingest_path(f) for f in files]
        total = time.perf_counter() - t0
        lib.close()
    failed = [r for r in results if r.status != "added"]
    if failed:
        raise SystemExit(f"unexpected results: {failed}")
    pages = sum(r.pages or 0 for r in results)
    chunks = [c for f in files for c in chunk_document(load_bytes(f.read_bytes(), f.name, settings), embedder,
                                                         settings.chunk_tokens)]
    t1 = time.perf_counter()
    embedder.encode([c.text for c in chunks])
    encode = time.perf_counter() - t1
    return {"files": len(files), "pages": pages, "chunks": len(chunks), "ingest_s": round(total, 2),
            "encode_s": round(encode, 2), "pages_per_s": round(pages / total, 1),
            "chunks_per_s": round(len(chunks) / total, 1), "ratio": round(total / encode, 3)}


def main() -> None:
    """Print the figures for the long PDF and for the mixed folder."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    embedder = Embedder()
    embedder.encode(["warm up the model"] * 8)
    out = {"long_pdf": run([LONG_PDF], embedder), "mixed": run([DOCS / n for n in MIXED], embedder)}
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        print(f"{name:9} {r['files']} files, {r['pages']} pages, {r['chunks']} chunks: ingest {r['ingest_s']} s "
              f"({r['pages_per_s']} pages/s, {r['chunks_per_s']} chunks/s); pure encode {r['encode_s']} s; "
              f"ratio {r['ratio']} (goal <= 1.2)")


if __name__ == "__main__":
    main()
