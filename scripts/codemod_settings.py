"""Rewrite flat reads of settings (`settings.top_k`) as section reads (`settings.retrieval.top_k`).

Settings are grouped in sections (rag_core/core/config.py: `FIELDS` maps each flat name of earlier releases to its
section and field). This script finds, with `ast`, every attribute read `X.<flat name>` whose receiver `X` is a
Settings object and rewrites it in place:

- a receiver whose name ends in "settings" (`settings`, `self.settings`, `library.settings`, `llm_settings`, `SETTINGS`);
- a call that returns Settings (`Settings(...)`, `load_settings(...)`, `x.with_overrides(...)`, `x.model_copy(...)`,
  `x.with_chat_model(...)`);
- another name (`s`, `cfg`, `base`, ...) when the same file binds it to one of the above (`s = self.settings`,
  `base = Settings(...)`) or annotates it as Settings (`def f(s: Settings)`).

Keyword arguments (`Settings(top_k=3)`, `with_overrides(top_k=3)`) and `model_copy(update={"top_k": ...})` keep flat
names: Settings routes them itself. Running it twice changes nothing the second time.

    python scripts/codemod_settings.py            # rewrite rag_core, ui, pages, tests, benchmarks, deploy, app.py
    python scripts/codemod_settings.py --check    # change nothing; list what it would rewrite and the flat-named
                                                  # reads it left alone (other receivers), to review by hand
    python scripts/codemod_settings.py PATH ...   # only these files or folders
"""
from __future__ import annotations

import argparse
import ast
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

DEFAULT_PATHS = ("rag_core", "ui", "pages", "tests", "benchmarks", "deploy", "app.py")
SKIP = {Path("rag_core/core/config.py")}  # written by hand: it defines the sections
# = rag_core.core.config.FIELDS (tests/unit/test_settings_sections.py checks it): kept here so the script runs on a
# tree whose code does not import yet, as after a merge.
SECTIONS = ("library", "ingest", "llm", "retrieval", "answer", "wikipedia", "demo")
MOVED = {
    "data_dir": "library.data_dir", "qdrant_url": "library.qdrant_url", "qdrant_api_key": "library.qdrant_api_key",
    "collection": "library.collection", "embedding_model": "library.embedding_model",
    "embedding_timeout_s": "library.embedding_timeout_s",
    "chunk_tokens": "ingest.chunk_tokens", "max_upload_mb": "ingest.max_upload_mb",
    "max_docx_uncompressed_mb": "ingest.max_docx_uncompressed_mb", "max_sheet_rows": "ingest.max_sheet_rows",
    "reader_memory_mb": "ingest.reader_memory_mb", "ingest_timeout_s": "ingest.timeout_s",
    "ingest_workers": "ingest.workers", "folder_recheck_s": "ingest.folder_recheck_s", "ocr": "ingest.ocr",
    "ocr_language": "ingest.ocr_language", "ocr_dpi": "ingest.ocr_dpi",
    "ollama_host": "llm.ollama_host", "ollama_model": "llm.ollama_model", "ollama_api_key": "llm.ollama_api_key",
    "llm_timeout_s": "llm.timeout_s", "temperature": "llm.temperature", "chat_model": "llm.chat_model",
    "openai_base_url": "llm.openai_base_url", "openai_api_key": "llm.openai_api_key",
    "top_k": "retrieval.top_k", "min_relevance": "retrieval.min_relevance",
    **{n: f"retrieval.{n}" for n in ("reranker", "rerank_model", "rerank_api_key", "rerank_top", "rerank_timeout_s")},
    "history_tokens": "answer.history_tokens", "max_context_tokens": "answer.max_context_tokens",
    "answer_tokens": "answer.answer_tokens", "summary_max_calls": "answer.summary_max_calls",
    **{f"wikipedia_{n}": f"wikipedia.{n}" for n in ("api", "contact", "timeout_s", "retries", "backoff_s",
                                                     "deadline_s", "max_response_mb")},
    **{f"demo_{n}": f"demo.{n}" for n in (
        "session_idle_minutes", "max_files_per_session", "max_session_mb", "questions_per_minute", "max_file_mb",
        "page_renders_per_minute", "max_files_per_client", "max_client_mb", "client_questions_per_minute",
        "client_page_renders_per_minute", "total_files", "total_mb", "questions_per_minute_total",
        "page_renders_per_minute_total", "trust_proxy")},
}
SETTINGS_NAME = re.compile(r"(^|\.)_?\w*settings$", re.IGNORECASE)
RETURNS_SETTINGS = {"Settings", "with_overrides", "model_copy", "with_chat_model", "fit", "fitted"}  # and *settings()


def _called(node: ast.expr) -> str | None:
    if isinstance(node, ast.Call):
        f = node.func
        return f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
    return None


def _annotated_settings(annotation: ast.expr | None) -> bool:
    text = ast.unparse(annotation) if annotation is not None else ""
    return bool(re.search(r"\bSettings\b", text))


class _Finder:
    """Which names of one module hold Settings, then which attribute reads to rewrite."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.names: set[str] = set()
        self._bind()

    def is_settings(self, node: ast.expr) -> bool:
        if isinstance(node, ast.IfExp):
            return self.is_settings(node.body) or self.is_settings(node.orelse)
        called = _called(node)
        if called is not None and (called in RETURNS_SETTINGS or SETTINGS_NAME.search(called)):
            return True
        if isinstance(node, ast.Name) and node.id in self.names:
            return True
        return isinstance(node, ast.Name | ast.Attribute) and bool(SETTINGS_NAME.search(ast.unparse(node)))

    def _bind(self) -> None:
        """Names assigned a Settings or annotated as one (repeated until nothing new: `b = a` after `a = ...`)."""
        while True:
            before = len(self.names)
            for node in ast.walk(self.tree):
                if isinstance(node, ast.arg) and _annotated_settings(node.annotation):
                    self.names.add(node.arg)
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and (
                        _annotated_settings(node.annotation) or (node.value is not None and self.is_settings(node.value))) or isinstance(node, ast.NamedExpr) and self.is_settings(node.value):
                    self.names.add(node.target.id)
                elif isinstance(node, ast.Assign):
                    self._assigned(node.targets, node.value)
            if len(self.names) == before:
                return

    def _assigned(self, targets: list[ast.expr], value: ast.expr) -> None:
        """`s = <Settings>`, `self.settings = s = ...` (a chain with a settings-named target), `a, s = x, <Settings>`."""
        if self.is_settings(value) or any(self.is_settings(t) for t in targets if not isinstance(t, ast.Tuple)):
            self.names.update(t.id for t in targets if isinstance(t, ast.Name))
        if isinstance(value, ast.Tuple):
            for target in targets:
                if isinstance(target, ast.Tuple) and len(target.elts) == len(value.elts):
                    self.names.update(t.id for t, v in zip(target.elts, value.elts, strict=True)
                                      if isinstance(t, ast.Name) and self.is_settings(v))

    def reads(self) -> tuple[list[ast.Attribute], list[ast.Attribute]]:
        """(flat reads on Settings: to rewrite, flat-named reads on anything else: left alone)."""
        rewrite, other = [], []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Attribute) and node.attr in MOVED:
                if isinstance(node.value, ast.Attribute) and node.value.attr in SECTIONS:
                    continue  # settings.retrieval.top_k: read by section already
                (rewrite if self.is_settings(node.value) else other).append(node)
        return rewrite, other


def _offset(lines: list[bytes], line: int, col: int) -> int:
    return sum(len(x) for x in lines[:line - 1]) + col  # ast columns count UTF-8 bytes


def rewrite_source(text: str) -> tuple[str, list[ast.Attribute], list[ast.Attribute]]:
    """The module's text with flat Settings reads rewritten, the reads rewritten and the ones left alone."""
    tree = ast.parse(text)
    rewrite, other = _Finder(tree).reads()
    data = text.encode("utf-8")
    lines = data.splitlines(keepends=True)
    edits = []
    for node in rewrite:
        value = node.value
        assert value.end_lineno is not None and value.end_col_offset is not None
        assert node.end_lineno is not None and node.end_col_offset is not None
        start = _offset(lines, value.end_lineno, value.end_col_offset)
        end = _offset(lines, node.end_lineno, node.end_col_offset)
        edits.append((start, end, f".{MOVED[node.attr]}".encode()))
    for start, end, new in sorted(edits, reverse=True):
        assert data[start:end].replace(b" ", b"").replace(b"\n", b"").replace(b"\\", b"").startswith(b".")
        data = data[:start] + new + data[end:]
    return data.decode("utf-8"), rewrite, other


def _files(paths: list[str]) -> list[Path]:
    out = []
    for p in paths:
        path = (ROOT / p) if not Path(p).is_absolute() else Path(p)
        out += [path] if path.is_file() else sorted(f for f in path.rglob("*.py") if "fixtures" not in f.parts)
    return [f for f in out if f.resolve().relative_to(ROOT) not in SKIP] if out else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="*", default=list(DEFAULT_PATHS))
    parser.add_argument("--check", action="store_true", help="change nothing; list what would change and why not")
    args = parser.parse_args(argv)
    changed = total = 0
    for path in _files(args.paths):
        text = path.read_text(encoding="utf-8")
        new, rewritten, left = rewrite_source(text)
        shown = path.relative_to(ROOT) if path.is_relative_to(ROOT) else path
        if args.check:
            for node in rewritten:
                print(f"{shown}:{node.lineno}: {ast.unparse(node)} -> {ast.unparse(node.value)}.{MOVED[node.attr]}")
            for node in left:
                print(f"{shown}:{node.lineno}: left alone (not a Settings?): {ast.unparse(node)}")
        elif new != text:
            path.write_text(new, encoding="utf-8")
            changed += 1
        total += len(rewritten)
    verb = "would rewrite" if args.check else "rewrote"
    print(f"{verb} {total} flat settings reads" + ("" if args.check else f" in {changed} files"), file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
