"""Archives bigger inside than they say, and huge tables (issue 47, item 3): time, peak memory and outcome of each.

Run (from the repository; `--code` picks the rag_core to measure, e.g. /work/main for the code before the fix):
    .venv/bin/python benchmarks/bombs.py [--code .] [--files /tmp/docchat-bombs] [--cases docx-280,csv-198]
Each case's file is made once (benchmarks/bomb_files.py) into --files, then read by `load_bytes` with a 60 s deadline
in a fresh process (PYTHONPATH=--code) that this harness kills past --timeout seconds or past --kill-mb of resident
memory (that process and its children together), so a reader without bounds cannot take the machine with it. Reported
per case: wall time, peak resident memory of the reading process and of its largest reader child (their own
ru_maxrss), and the outcome (the one sentence, or the document's size and passages).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import psutil

HERE = Path(__file__).resolve().parent
DEADLINE_S = 60.0

#: case -> (file name, builder call in bomb_files)
CASES: dict[str, tuple[str, Callable[[Any], bytes]]] = {
    "docx-280": ("paragraphs.docx", lambda b: b.big_docx(280)),
    "pptx-280": ("paragraphs.pptx", lambda b: b.big_pptx(280)),
    "epub-280": ("paragraphs.epub", lambda b: b.big_epub(280)),
    "docx-lie": ("lie.docx", lambda b: b.lying_archive('docx', 2048)),
    "pptx-lie": ("lie.pptx", lambda b: b.lying_archive('pptx', 2048)),
    "epub-lie": ("lie.epub", lambda b: b.lying_archive('epub', 2048)),
    "xlsx-strings-280": ("strings.xlsx", lambda b: b.big_shared_strings_xlsx(280)),
    "docx-1.5m-members": ("members.docx", lambda b: b.many_members_docx(1_500_000)),
    "csv-198": ("column.csv", lambda b: b.one_column_csv(198)),
}

_RUN = """
import json, resource, sys, time
from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders import load_bytes
path, name = sys.argv[1], sys.argv[2]
data = open(path, "rb").read()
settings = Settings(ingest_timeout_s=%(deadline)r)
t = time.perf_counter()
try:
    doc = load_bytes(data, name, settings, Deadline(%(deadline)r, name))
except Exception as e:
    outcome = {"error": type(e).__name__, "message": str(e)}
else:
    outcome = {"document_chars": len(doc.text), "sections": len(doc.sections)}
outcome["read_s"] = round(time.perf_counter() - t, 1)
outcome["parent_peak_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024
outcome["child_peak_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
if "document_chars" in outcome:
    from rag_core.ingest.chunking import chunk_document
    from rag_core.store.embeddings import Embedder
    try:
        outcome["passages"] = len(chunk_document(doc, Embedder(), settings.chunk_tokens,
                                                 deadline=Deadline(%(deadline)r, name)))
    except Exception as e:
        outcome["chunking"] = str(e)
print(json.dumps(outcome, ensure_ascii=False), flush=True)
"""


def make_files(folder: Path, names: list[str]) -> None:
    """Write each case's file into `folder` unless it is there already."""
    try:  # `python -m benchmarks.bombs`
        from benchmarks import bomb_files
    except ImportError:  # `python benchmarks/bombs.py`: its own folder is first on the path
        import bomb_files  # type: ignore[no-redef]

    folder.mkdir(parents=True, exist_ok=True)
    for case in names:
        file_name, build = CASES[case]
        path = folder / f"{case}-{file_name}"
        if not path.exists():
            t = time.perf_counter()
            data = build(bomb_files)
            path.write_bytes(data)
            print(f"made {path.name}: {len(data) / 2**20:.1f} MB in {time.perf_counter() - t:.0f} s", file=sys.stderr)


def _tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def run_case(code: Path, path: Path, file_name: str, timeout: float, kill_mb: int) -> dict:
    """Read one file in a fresh process under the harness's limits; what it printed, or why it was killed."""
    env = {**os.environ, "PYTHONPATH": str(code)}
    t = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", _RUN % {"deadline": DEADLINE_S}, str(path), file_name],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, cwd=str(code),
                            start_new_session=True)
    watched, peak, killed = psutil.Process(proc.pid), 0, ""
    while proc.poll() is None:
        rss = _tree_rss(watched)
        peak = max(peak, rss)
        took = time.perf_counter() - t
        if rss > kill_mb * 2**20 or took > timeout:
            killed = f"killed by the harness at {took:.0f} s, {rss >> 20} MB"
            os.killpg(proc.pid, 9)
            break
        time.sleep(0.1)
    out, err = proc.communicate()
    wall = round(time.perf_counter() - t, 1)
    lines = out.decode(errors="replace").strip().splitlines()
    result = json.loads(lines[-1]) if lines and not killed else {}
    if killed:
        result["error"] = killed
    elif not lines:
        result["error"] = "no answer: " + err.decode(errors="replace").strip()[-300:]
    return {"wall_s": wall, "tree_peak_mb": peak >> 20, **result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", type=Path, default=HERE.parent, help="the folder holding the rag_core to measure")
    parser.add_argument("--files", type=Path, default=Path("/tmp/docchat-bombs"))
    parser.add_argument("--cases", default=",".join(CASES))
    parser.add_argument("--timeout", type=float, default=150.0, help="seconds before the harness kills a case")
    parser.add_argument("--kill-mb", type=int, default=4096, help="resident MB (process tree) the harness kills at")
    args = parser.parse_args()
    names = [c for c in args.cases.split(",") if c]
    make_files(args.files, names)
    for case in names:
        file_name, _ = CASES[case]
        path = args.files / f"{case}-{file_name}"
        row = {"case": case, "file_mb": round(path.stat().st_size / 2**20, 1),
               **run_case(args.code.resolve(), path, file_name, args.timeout, args.kill_mb)}
        print(json.dumps(row, ensure_ascii=False), flush=True)


if __name__ == "__main__":
    main()
