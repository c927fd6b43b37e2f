"""Ingest throughput: pages/s, chunks/s, and total ingest time / pure encode time of the same chunks, for the long
PDF, a mixed folder and one bigger input of every other kind DocChat reads (benchmarks/format_inputs.py: slides,
rows, chapters or sections per second; images of pages are the committed fixtures, read by OCR).

Run: .venv/bin/python -m benchmarks.ingest   (goal: ratio <= 1.2)
     .venv/bin/python -m benchmarks.ingest --only pptx,xlsx   (some rows only: long_pdf, mixed or kinds)
"""
from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from benchmarks import format_inputs
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
IMAGES = ["image_two-pages_regulations.tiff", "image_page_harbour.png", "image_page_ferry.webp",
          "image_photo_skewed.jpg"]
Maker = Callable[[list[str], int], tuple[bytes, int]]
# kind: (file name, maker, size asked, unit): about 250-350 passages each, so the reader's start-up is weighed
# against real embedding work as for the PDF.
KINDS: dict[str, tuple[str, Maker, int, str]] = {
    "pptx": ("bench.pptx", format_inputs.pptx, 150, "slides"),
    "odp": ("bench.odp", format_inputs.odp, 150, "slides"),
    "xlsx": ("bench.xlsx", format_inputs.xlsx, 3000, "rows"),
    "ods": ("bench.ods", format_inputs.ods, 3000, "rows"),
    "csv": ("bench.csv", format_inputs.csv_table, 3000, "rows"),
    "html": ("bench.html", format_inputs.html, 120, "sections"),
    "epub": ("bench.epub", format_inputs.epub, 40, "chapters"),
    "odt": ("bench.odt", format_inputs.odt, 120, "sections"),
    "rtf": ("bench.rtf", format_inputs.rtf, 120, "sections"),
}


def _cpu() -> float:
    """CPU seconds used so far by this process (all its threads) and by its finished children (the readers)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def run(files: list[Path], embedder: Embedder, repeat: int = 1) -> dict:
    """Ingest `files` into a fresh library and time it against pure encoding of the same chunk texts: the best of
    `repeat` runs of each, in wall-clock seconds and in CPU seconds (steadier on a shared machine)."""
    walls, cpus = [], []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings(data_dir=Path(tmp))
            lib = Library(settings, embedder=embedder)
            t0, c0 = time.perf_counter(), _cpu()
            results = [lib.ingest_path(f) for f in files]
            walls.append(time.perf_counter() - t0)
            cpus.append(_cpu() - c0)
            lib.close()
        failed = [r for r in results if r.status != "added"]
        if failed:
            raise SystemExit(f"unexpected results: {failed}")
    pages = sum(r.pages or 0 for r in results)
    chunks = [c for f in files for c in chunk_document(load_bytes(f.read_bytes(), f.name, settings), embedder,
                                                         settings.ingest.chunk_tokens)]
    encode_walls, encode_cpus = [], []
    for _ in range(repeat):
        t1, c1 = time.perf_counter(), _cpu()
        embedder.encode([c.text for c in chunks])
        encode_walls.append(time.perf_counter() - t1)
        encode_cpus.append(_cpu() - c1)
    total, encode, cpu, encode_cpu = min(walls), min(encode_walls), min(cpus), min(encode_cpus)
    return {"files": len(files), "pages": pages, "chunks": len(chunks), "ingest_s": round(total, 2),
            "encode_s": round(encode, 2), "pages_per_s": round(pages / total, 1),
            "chunks_per_s": round(len(chunks) / total, 1), "ratio": round(total / encode, 3),
            "ingest_cpu_s": round(cpu, 2), "encode_cpu_s": round(encode_cpu, 2),
            "cpu_ratio": round(cpu / encode_cpu, 3)}


def run_kind(kind: str, paragraphs: list[str], embedder: Embedder, folder: Path, repeat: int = 1) -> dict:
    """`run` on one bigger input of `kind` (images: the committed fixtures), with its units per second."""
    if kind == "image":
        files, units, unit = [DOCS / n for n in IMAGES], 0, "pages"
    else:
        name, maker, size, unit = KINDS[kind]
        data, units = maker(paragraphs, size)
        files = [folder / name]
        files[0].write_bytes(data)
    r = run(files, embedder, repeat)
    units = units or r["pages"]
    return {**r, "kind": kind, "units": units, "unit": unit, "mb": round(sum(f.stat().st_size for f in files) / 1e6, 2),
            "units_per_s": round(units / r["ingest_s"], 1)}


def main() -> None:
    """Print the figures for the long PDF, the mixed folder and each kind."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--repeat", type=int, default=1, help="runs of each measurement; the best is kept (default 1)")
    ap.add_argument("--only", help="comma-separated rows: long_pdf, mixed, " + ", ".join([*KINDS, "image"]))
    args = ap.parse_args()
    wanted = set(args.only.split(",")) if args.only else {"long_pdf", "mixed", *KINDS, "image"}
    embedder = Embedder()
    embedder.encode(["warm up the model"] * 8)
    out: dict[str, dict] = {}
    if "long_pdf" in wanted:
        out["long_pdf"] = run([LONG_PDF], embedder, args.repeat)
    if "mixed" in wanted:
        out["mixed"] = run([DOCS / n for n in MIXED], embedder, args.repeat)
    kinds = [k for k in [*KINDS, "image"] if k in wanted]
    if kinds:
        paragraphs = format_inputs.paragraphs_of(load_bytes(LONG_PDF.read_bytes(), LONG_PDF.name, Settings()).text)
        with tempfile.TemporaryDirectory() as tmp:
            for kind in kinds:
                out[kind] = run_kind(kind, paragraphs, embedder, Path(tmp), args.repeat)
    if args.json:
        print(json.dumps(out, indent=2))
        return
    for name, r in out.items():
        if "kind" in r:
            continue
        print(f"{name:9} {r['files']} files, {r['pages']} pages, {r['chunks']} chunks: ingest {r['ingest_s']} s "
              f"({r['pages_per_s']} pages/s, {r['chunks_per_s']} chunks/s); pure encode {r['encode_s']} s; "
              f"ratio {r['ratio']} (goal <= 1.2); CPU {r['ingest_cpu_s']} s / {r['encode_cpu_s']} s = {r['cpu_ratio']}")
    rows = [r for r in out.values() if "kind" in r]
    if rows:
        print("\n| kind | input | passages | ingest | per second | pure encode | total / encode "
              "| CPU: total / encode |")
        print("|---|---|---|---|---|---|---|---|")
        for r in rows:
            print(f"| {r['kind']} | {r['units']} {r['unit']}, {r['mb']} MB | {r['chunks']} | {r['ingest_s']} s | "
                  f"{r['units_per_s']} {r['unit']} | {r['encode_s']} s | {r['ratio']} | "
                  f"{r['ingest_cpu_s']} s / {r['encode_cpu_s']} s = {r['cpu_ratio']} |")


if __name__ == "__main__":
    main()
