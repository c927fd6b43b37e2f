"""Hostile and odd files, second pass (issue 47): each read the real way, its time, peak memory and outcome.

Run (from the repository; `--code` picks the rag_core to measure, e.g. a checkout of main for "before"):
    PYTHONPATH=. nice .venv/bin/python benchmarks/hostile_probe.py [--code .] [--probes pdf-giant-image,csv-nul]
Each probe's file is made by benchmarks/hostile_files.py, then read by `load_bytes` with a 60 s deadline in a fresh
process (PYTHONPATH=--code), which this harness kills past 90 s or 3 GB of resident memory (that process and its
children together). A probe passes when it ends within 60 s, its largest process stays under 1.5 GB, nothing that
looks like a traceback reaches stderr, and it ends either as a document with text or in one IngestError sentence
(what the probe expects, when it says: `refuse` or `read`, and text that must never appear, such as /etc/passwd's).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from benchmarks import hostile_files as h

HERE = Path(__file__).resolve().parent

DEADLINE_S = 60.0
LIMIT_MB = 1536


@dataclass(frozen=True)
class Probe:
    name: str  # the file's name as uploaded
    build: Callable[[], bytes]
    expect: str = ""  # "read" (must become a document), "refuse" (must be one sentence), "" either
    never: str = ""  # text that must not be in the document


S = h.SENTENCE
PROBES: dict[str, Probe] = {
    # PDF
    "pdf-5000-pages": Probe("pages.pdf", lambda: h.many_pages_pdf(5000), "read"),
    "pdf-giant-image": Probe("scan.pdf", lambda: h.giant_image_pdf(30000)),
    "pdf-huge-mediabox": Probe("poster.pdf", h.huge_mediabox_pdf),
    "pdf-deep-page-tree": Probe("deep.pdf", lambda: h.deep_pages_pdf(5000)),
    "pdf-looping-page-tree": Probe("loop.pdf", h.looping_pages_pdf),
    "pdf-self-drawing-form": Probe("form.pdf", h.self_drawing_form_pdf),
    "pdf-content-bomb-300mb": Probe("content.pdf", lambda: h.content_bomb_pdf(300)),
    "pdf-broken-xref": Probe("xref.pdf", lambda: h.text_page_pdf(xref=False), "read"),
    "pdf-broken-font": Probe("font.pdf", h.broken_font_pdf),
    "pdf-truncated": Probe("half.pdf", lambda: h.text_page_pdf()[:200]),
    "pdf-encrypted-empty-user-pw": Probe("open.pdf", lambda: h.encrypted_pdf(""), "read"),
    "pdf-encrypted-password": Probe("locked.pdf", lambda: h.encrypted_pdf("secret"), "refuse"),
    "txt-quoting-pdf-signature": Probe("notes.txt", h.text_mentioning_pdf_header, "read"),
    "md-quoting-pdf-signature": Probe("notes.md", h.text_mentioning_pdf_header, "read"),
    # images
    "png-50k-square": Probe("bomb.png", lambda: h.png_of(50000, 50000, rows=1), "refuse"),
    "png-20k-square-real": Probe("white.png", lambda: h.png_of(20000, 20000)),
    "png-truncated": Probe("cut.png", lambda: h.png_of(400, 400)[:300]),
    "jpeg-65k-header": Probe("bomb.jpg", h.jpeg_huge_header, "refuse"),
    "tiff-3000-frames": Probe("frames.tif", lambda: h.tiff_frames(3000)),
    "tiff-60k-header": Probe("bomb.tif", h.tiff_huge, "refuse"),
    # XML inside archives, HTML
    "docx-billion-laughs": Probe("laughs.docx", h.docx_laughs, never="lol lol lol lol lol lol lol lol lol lol lol"),
    "docx-xxe": Probe("xxe.docx", h.docx_xxe, never="root:"),
    "docx-nested-tables-2000": Probe("tables.docx", lambda: h.docx_nested_tables(2000)),
    "docx-huge-attribute": Probe("attr.docx", lambda: h.docx_huge_attribute(60)),
    "docx-escaping-members": Probe("paths.docx", h.docx_member_paths, "read", never="root:x"),
    "docx-encrypted-member": Probe("zipcrypt.docx", h.docx_encrypted_member, "refuse"),
    "docx-unknown-compression": Probe("aes.docx", h.docx_unknown_compression, "refuse"),
    "epub-bzip2-mimetype-2gb": Probe("bz.epub", lambda: h.epub_bzip2_mimetype(2000), "refuse"),
    "docx-bzip2-member-2gb": Probe("bz.docx", lambda: h.docx_bzip2_member(2000), "refuse"),
    "docx-password-protected": Probe("locked.docx", h.office_encrypted, "refuse"),
    "xlsx-password-protected": Probe("locked.xlsx", h.office_encrypted, "refuse"),
    "docx-duplicate-member": Probe("twice.docx", h.docx_duplicate_member),
    "pptx-billion-laughs": Probe("laughs.pptx", h.pptx_laughs, never="lol lol lol lol lol lol lol lol lol lol lol"),
    "xlsx-billion-laughs": Probe("laughs.xlsx", h.xlsx_laughs, never="lol lol lol lol lol lol lol lol lol lol lol"),
    "epub-billion-laughs": Probe("laughs.epub", h.epub_laughs, never="lol lol lol lol lol lol lol lol lol lol lol"),
    "epub-100k-deep": Probe("deep.epub", lambda: h.epub_deep(100_000)),
    "epub-escaping-paths": Probe("paths.epub", h.epub_escaping_paths, never="root:"),
    "odt-billion-laughs": Probe("laughs.odt", lambda: h.odt(b"<text:p>&lol9;</text:p><text:p>" + S + b"</text:p>",
                                                          h.LAUGHS), never="lol lol lol lol lol lol lol lol lol lol lol"),
    "odt-xxe": Probe("xxe.odt", lambda: h.odt(b"<text:p>&xxe;</text:p><text:p>" + S + b"</text:p>", h.XXE),
                     never="root:"),
    "odt-100k-deep": Probe("deep.odt", lambda: h.odt(b"<text:section>" * 100_000 + b"<text:p>" + S + b"</text:p>"
                                                     + b"</text:section>" * 100_000)),
    "odp-billion-laughs": Probe("laughs.odp", h.odp_laughs, never="lol lol lol lol lol lol lol lol lol lol lol"),
    "ods-repeated-1m-x-16k": Probe("repeat.ods", lambda: h.ods_repeated(1_048_576, 16_384)),
    "ods-repeated-1m-rows": Probe("rows.ods", lambda: h.ods_repeated(1_048_576, 1)),
    "html-billion-laughs": Probe("laughs.html", lambda: h.xhtml_laughs(),
                                 never="lol lol lol lol lol lol lol lol lol lol lol"),
    "html-100k-deep": Probe("deep.html", lambda: h.html_deep(100_000), "read"),
    "html-60mb-attribute": Probe("attr.html", lambda: h.html_attribute(60), "read"),
    # Excel
    "xlsx-1m-rows-numbers": Probe("numbers.xlsx", lambda: h.xlsx_rows(1_048_576), "read"),
    "xlsx-lying-dimension-merge": Probe("merged.xlsx", h.xlsx_lying_dimension, "read"),
    "xlsx-sparse-a-to-xfd": Probe("sparse.xlsx", lambda: h.xlsx_wide_sparse(20000), "read"),
    "xlsx-formulas": Probe("formulas.xlsx", lambda: h.xlsx_formulas(5000), "read"),
    # RTF
    "rtf-100k-deep-groups": Probe("deep.rtf", lambda: h.rtf_deep(100_000)),
    "rtf-bin-lies-2gb": Probe("binlie.rtf", lambda: h.rtf_bin(2_000_000_000, 1000), "read"),
    "rtf-bin-50mb": Probe("bin.rtf", lambda: h.rtf_bin(50_000_000, 50_000_000), "read"),
    "rtf-odd-escapes": Probe("escapes.rtf", h.rtf_odd_escapes, "read"),
    "rtf-unclosed": Probe("open.rtf", h.rtf_unclosed, "read"),
    # Markdown, text
    "md-3000-nested-list": Probe("list.md", lambda: h.md_nested_lists(3000), "read"),
    "md-100k-nested-quote": Probe("quote.md", lambda: h.md_nested_quotes(100_000), "read"),
    "md-500k-headings": Probe("heads.md", lambda: h.md_headings(500_000)),
    "txt-50mb-one-word": Probe("word.txt", lambda: h.long_line(50)),
    "txt-50mb-one-line": Probe("line.txt", lambda: h.long_line(50, b" ")),
    "txt-utf16-no-bom": Probe("u16.txt", lambda: (S * 20).decode().encode("utf-16-le"), "read"),
    "txt-utf16be-no-bom": Probe("u16be.txt", lambda: (S * 20).decode().encode("utf-16-be"), "read"),
    "txt-utf32-no-bom": Probe("u32.txt", lambda: (S * 20).decode().encode("utf-32-le"), "read"),
    "txt-utf32-bom": Probe("u32bom.txt", lambda: (S * 20).decode().encode("utf-32"), "read"),
    "txt-nul-filled": Probe("nul.txt", lambda: b"\x00" * 100_000, "refuse"),
    "txt-empty": Probe("empty.txt", lambda: b"", "refuse"),
    "txt-whitespace": Probe("blank.txt", lambda: b" \t\r\n" * 1000, "refuse"),
    "txt-unicode-whitespace": Probe("blank2.txt", lambda: "\u3000\u00a0\u2028\ufeff".encode() * 1000, "refuse"),
    "txt-bom-only": Probe("bom.txt", lambda: b"\xef\xbb\xbf", "refuse"),
    "txt-is-elf": Probe("tool.txt", lambda: b"\x7fELF\x02\x01\x01" + b"\x00" * 5000, "refuse"),
    "txt-is-windows-exe": Probe("setup.txt", lambda: b"MZ\x90\x00\x03" + bytes(range(256)) * 40, "refuse"),
    # CSV
    "csv-50mb-one-line": Probe("line.csv", lambda: h.long_line(50, b",")),
    "csv-100k-columns": Probe("wide.csv", lambda: h.csv_wide(100_000)),
    "csv-unclosed-quote-30mb": Probe("quote.csv", lambda: h.csv_unclosed_quote(30)),
    "csv-nul-bytes": Probe("nul.csv", h.csv_nul),
    "csv-mixed-encodings": Probe("mixed.csv", h.csv_mixed, "read"),
    "tsv-unclosed-quote": Probe("quote.tsv", lambda: b'a\tb\n"x\t' + S * 10 + b"\n"),
    # extension lies
    "pdf-is-zip": Probe("report.pdf", lambda: _zip_of_text(), "refuse"),
    "docx-is-pdf": Probe("report.docx", h.text_page_pdf),
    "txt-is-docx": Probe("report.txt", lambda: h.docx_with_body(h.para())),
    "xlsx-is-csv": Probe("table.xlsx", lambda: b"a,b\n1,2\n", "refuse"),
    # the app's own data
    "conversation-json": Probe("conversation.json", h.conversation_json),
    "settings-toml": Probe("settings.toml", lambda: b'[library]\nembedding_model = "e5"\n'),
    "env-file": Probe(".env", lambda: b"DOCCHAT_OLLAMA_HOST=http://localhost:11434\n"),
    "sqlite-db": Probe("collection.sqlite", lambda: b"SQLite format 3\x00" + b"\x00" * 4000, "refuse"),
}


def _zip_of_text() -> bytes:
    import io
    import zipfile
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("readme.txt", S)
    return out.getvalue()


_RUN = """
import json, resource, sys, time
from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders import load_bytes
from rag_core.core.errors import IngestError
path, name, result = sys.argv[1], sys.argv[2], sys.argv[3]
data = open(path, "rb").read()
settings = Settings(ingest_timeout_s=%(deadline)r)
t = time.perf_counter()
try:
    doc = load_bytes(data, name, settings, Deadline(%(deadline)r, name))
except IngestError as e:
    outcome = {"error": type(e).__name__, "message": str(e)}
except Exception as e:
    import traceback
    outcome = {"error": type(e).__name__, "message": str(e)[:300], "unexpected": True}
    traceback.print_exc()
else:
    outcome = {"chars": len(doc.text), "sections": len(doc.sections), "text": doc.text[:200000]}
outcome["read_s"] = round(time.perf_counter() - t, 1)
outcome["child_peak_mb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss // 1024
open(result, "w").write(json.dumps(outcome))  # a file, not stdout: a pipe nobody reads yet would block
"""


def run_probe(key: str, probe: Probe, code: Path, files: Path, timeout: float, kill_mb: int) -> dict:
    path = files / key / probe.name
    path.parent.mkdir(parents=True, exist_ok=True)
    if not path.exists():
        path.write_bytes(probe.build())
    env = {**os.environ, "PYTHONPATH": str(code)}
    start = time.perf_counter()
    result = path.parent / "outcome.json"
    result.unlink(missing_ok=True)
    err_path = path.parent / "stderr.txt"
    with open(err_path, "w") as err_file:
        proc = subprocess.Popen(["nice", sys.executable, "-c", _RUN % {"deadline": DEADLINE_S}, str(path), probe.name,
                                 str(result)], cwd=code, env=env, stdout=subprocess.DEVNULL, stderr=err_file)
    peak_self = peak_tree = 0
    killed = ""
    me = psutil.Process(proc.pid)
    while proc.poll() is None:
        try:
            procs = [me, *me.children(recursive=True)]
            rss = [p.memory_info().rss >> 20 for p in procs]
        except psutil.Error:
            rss = [0]
        peak_self, peak_tree = max(peak_self, max(rss)), max(peak_tree, sum(rss))
        if time.perf_counter() - start > timeout:
            killed = f"killed past {timeout:.0f} s"
        elif sum(rss) > kill_mb:
            killed = f"killed past {kill_mb} MB"
        if killed:
            for p in reversed(procs):
                try:
                    p.kill()
                except psutil.Error:
                    pass
            break
        time.sleep(0.1)
    proc.wait()
    wall = time.perf_counter() - start
    err = err_path.read_text(errors="replace")
    try:
        outcome = json.loads(result.read_text()) if result.exists() else None
    except json.JSONDecodeError:  # cut short by the kill
        outcome = None
    if outcome is None:
        outcome = {"error": killed or "no answer", "message": err.strip().splitlines()[-1][:300] if err.strip() else ""}
        if killed:
            outcome["unexpected"] = True
    outcome.update(wall_s=round(wall, 1), largest_mb=max(peak_self, outcome.get("child_peak_mb", 0)),
                   tree_mb=peak_tree, size=path.stat().st_size, traceback="Traceback" in err)
    outcome["verdict"] = verdict(probe, outcome)
    outcome.pop("text", None)
    return outcome


def verdict(probe: Probe, out: dict) -> str:
    """"ok", or what is wrong."""
    wrong = []
    if out["wall_s"] > DEADLINE_S + 5:
        wrong.append(f"{out['wall_s']} s")
    if out["largest_mb"] > LIMIT_MB:
        wrong.append(f"{out['largest_mb']} MB")
    if out["traceback"]:
        wrong.append("traceback on stderr")
    if out.get("unexpected") or (out.get("error") and "message" not in out):
        wrong.append(f"unexpected {out['error']}")
    elif "error" in out:
        message = out.get("message", "")
        if "\n" in message or not message.startswith("“") or len(message) > 500:
            wrong.append("not one sentence")
        if probe.expect == "read":
            wrong.append("refused")
    else:
        if probe.expect == "refuse":
            wrong.append("read")
        if not out.get("chars"):
            wrong.append("empty document")
        if probe.never and probe.never in out.get("text", ""):
            wrong.append(f"holds {probe.never[:20]!r}")
    return "ok" if not wrong else "FAIL: " + ", ".join(wrong)


def describe(out: dict) -> str:
    if "error" in out:
        return f"{out['error']}: {out.get('message', '')}"
    return f"read: {out['chars']:,} chars, {out['sections']:,} sections"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--code", default=str(HERE.parent))
    parser.add_argument("--files", default=os.path.join(tempfile.gettempdir(), "docchat-hostile"))
    parser.add_argument("--probes", default="")
    parser.add_argument("--timeout", type=float, default=90)
    parser.add_argument("--kill-mb", type=int, default=3072)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    keys = [k for k in args.probes.split(",") if k] or list(PROBES)
    results = {}
    for key in keys:
        out = run_probe(key, PROBES[key], Path(args.code).resolve(), Path(args.files), args.timeout, args.kill_mb)
        results[key] = out
        print(f"| {key} | {out['size']:,} B | {out['wall_s']} s, {out['largest_mb']} / {out['tree_mb']} MB | "
              f"{describe(out)[:160]} | {out['verdict']} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
