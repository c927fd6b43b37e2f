"""What starting a reader child costs: 30 small text PDFs (tests/fixtures/documents) read one after another through
`load_bytes` in one process, CPU (this process, its ended children, and its live ones: the reader helper, which
forks each child) and wall time per read, after one warm-up read (the helper's own start).

`--fresh` reads each file in a fresh interpreter instead (as Windows does, and as every platform did before the
reader helper: rag_core/ingest/loaders/_zygote.py), by telling run_isolated that the helper is not available here.

Run:  .venv/bin/python -m benchmarks.reader_start [--fresh] [--reads N]
"""
from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import psutil

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders import _zygote_link, load_bytes

DOCS = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "documents"
PDFS = ("pdf_non-latin_arabic.pdf", "pdf_text_4-pages_pdflatex.pdf", "pdf_text_multicolumn_3-pages.pdf",
        "pdf_text_outline-bookmarks_4-pages.pdf")


def cpu_seconds() -> float:
    """CPU of this process, of its ended children, and of the live ones with theirs (the helper and its forks)."""
    me, ended = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    live = 0.0
    for child in psutil.Process().children():
        t = child.cpu_times()
        live += t.user + t.system + t.children_user + t.children_system
    return me.ru_utime + me.ru_stime + ended.ru_utime + ended.ru_stime + live


def run(reads: int) -> tuple[float, float]:
    """(wall ms, CPU ms) per read."""
    files = [(name, (DOCS / name).read_bytes()) for name in PDFS]
    settings = Settings()
    load_bytes(files[0][1], files[0][0], settings, Deadline(60, files[0][0]))  # warm-up: the helper starts
    cpu0, wall0 = cpu_seconds(), time.perf_counter()
    for i in range(reads):
        name, data = files[i % len(files)]
        assert load_bytes(data, name, settings, Deadline(60, name)).text
    cpu1, wall1 = cpu_seconds(), time.perf_counter()
    return (wall1 - wall0) / reads * 1000, (cpu1 - cpu0) / reads * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fresh", action="store_true", help="a fresh interpreter per read (no reader helper)")
    ap.add_argument("--reads", type=int, default=30)
    args = ap.parse_args()
    if args.fresh:
        _zygote_link.available = lambda: False  # type: ignore[assignment]  # this run only
    wall, cpu = run(args.reads)
    print(f"{args.reads} reads ({'fresh interpreters' if args.fresh else 'reader helper'}): "
          f"{wall:.0f} ms wall, {cpu:.0f} ms CPU per read")


if __name__ == "__main__":
    main()
