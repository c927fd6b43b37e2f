"""Main-content extractors for saved web pages, measured: DocChat's own rules on lxml (rag_core.ingest.loaders.web)
against trafilatura, readability-lxml and selectolax.

Two page sets:
- hand: the saved pages in benchmarks/data/html/ (a news article, a blog post, a docs page, a mostly-boilerplate page,
  an old table-laid-out page), each with its true content lines, its boilerplate lines, its headings and its title
  marked in truth.json. Figures: content lines kept, boilerplate lines let through, headings kept as headings, title.
- eval: trafilatura's evaluation corpus (990 real pages in many languages, each with a few snippets that must be in the
  main text and a few that must not: tests/evaldata.json with tests/eval/ and tests/cache/ of a trafilatura checkout,
  Apache-2.0; the pages are their sites' content and are not copied into DocChat). Figures: recall of the "with"
  snippets, share of "without" snippets let through, precision/F1 as trafilatura's own evaluation counts them.
Every extractor gets the page's bytes (each decodes them its own way, as it would a file a person uploads); time is
CPU time of this process per page. Snippets and outputs are compared with markup characters (* _ # | \\) removed and
whitespace collapsed, so markdown output is not penalised.

The competitors are not DocChat dependencies: install them apart, e.g.
  .venv/bin/pip install --target /tmp/webbench trafilatura selectolax lxml_html_clean cssselect chardet
  .venv/bin/pip install --target /tmp/webbench --no-deps readability-lxml
Run: PYTHONPATH=/tmp/webbench .venv/bin/python -m benchmarks.html_extractors [--eval TRAFILATURA_CHECKOUT] [--limit N]
     [--extractors docchat,trafilatura,readability,selectolax] [--json]
An extractor whose package is missing is skipped.
"""
from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import IngestError
from rag_core.ingest.loaders._html_text import HTML_PARSER, blocks_of
from rag_core.ingest.loaders.web import read_html

ROOT = Path(__file__).resolve().parents[1]
HAND = ROOT / "benchmarks" / "data" / "html"
_MARKUP = str.maketrans("", "", "*_#|\\\u00ad")
_FURNITURE_TAGS = ["script", "style", "noscript", "template", "svg", "iframe", "nav", "header", "footer", "aside",
                   "form"]


class Output(NamedTuple):
    text: str
    headings: list[str] | None  # None: the extractor gives no structure
    title: str


def norm(text: str) -> str:
    """Text compared: markup characters dropped, whitespace collapsed."""
    return " ".join(text.translate(_MARKUP).split())  # soft hyphens too: some extractors keep them, some drop them


def docchat(data: bytes) -> Output:
    try:
        ex = read_html(data, "page.html", Settings(), Deadline.never("page.html"))
    except IngestError:
        return Output("", [], "")
    heads = [ex.text[s.char_start:s.char_end].split("\n", 1)[0] for s in ex.sections if s.heading_path]
    return Output(ex.text, heads, ex.title)


def trafilatura_(data: bytes) -> Output:
    import trafilatura

    text = trafilatura.extract(data, output_format="markdown", include_tables=True, include_links=False,
                               include_images=False, include_comments=False, include_formatting=True) or ""
    heads = [line.lstrip("#").strip() for line in text.splitlines() if line.startswith("#")]
    meta = trafilatura.extract_metadata(data)
    return Output(text, heads, (meta.title if meta is not None else "") or "")


def readability_(data: bytes) -> Output:
    from lxml import html
    from readability import Document

    doc = Document(data)
    try:
        summary = doc.summary(html_partial=True)
    except Exception:  # noqa: BLE001 - a competitor's failure on one page counts as an empty result
        return Output("", [], "")
    blocks, _ = blocks_of(html.fragment_fromstring(summary, create_parent="div", parser=HTML_PARSER))
    text = "\n\n".join(b.text for b in blocks)
    heads = [b.text for b in blocks if b.kind.value == "heading"]
    return Output(text, heads, doc.short_title() or "")


def selectolax_(data: bytes) -> Output:
    from selectolax.lexbor import LexborHTMLParser

    tree = LexborHTMLParser(data)
    title_node = tree.css_first("title")
    tree.strip_tags(_FURNITURE_TAGS)
    body = tree.body
    text = body.text(separator="\n", strip=True) if body is not None else ""
    return Output(text, None, title_node.text(strip=True) if title_node is not None else "")


EXTRACTORS: dict[str, Callable[[bytes], Output]] = {
    "docchat": docchat, "trafilatura": trafilatura_, "readability": readability_, "selectolax": selectolax_,
}


def timed(func: Callable[[bytes], Output], data: bytes) -> tuple[Output, float]:
    start = time.process_time()
    out = func(data)
    return out, time.process_time() - start


def hand_set(names: list[str]) -> dict[str, dict[str, float]]:
    truth = json.loads((HAND / "truth.json").read_text(encoding="utf-8"))
    for page, t in truth.items():  # a boilerplate string inside a content line could never be told apart
        for b in t["boilerplate"]:
            assert not any(norm(b) in norm(c) for c in t["content"]), (page, b)
    results: dict[str, dict[str, float]] = {}
    for name in names:
        kept = content = let = boiler = heads_ok = heads = titles = 0
        seconds = 0.0
        for page, t in truth.items():
            out, took = timed(EXTRACTORS[name], (HAND / page).read_bytes())
            seconds += took
            text = norm(out.text)
            content += len(t["content"])
            kept += sum(norm(c) in text for c in t["content"])
            boiler += len(t["boilerplate"])
            let += sum(norm(b) in text for b in t["boilerplate"])
            heads += len(t["headings"])
            if out.headings is not None:
                found = {norm(h) for h in out.headings}
                heads_ok += sum(norm(h) in found for h in t["headings"])
            titles += norm(out.title) == norm(t["title"])
        results[name] = {"pages": len(truth), "content_kept": kept / content, "boilerplate_let_through": let / boiler,
                         "headings_kept": heads_ok / heads if name != "selectolax" else float("nan"),
                         "titles_right": titles / len(truth), "ms_per_page": 1000 * seconds / len(truth)}
    return results


def eval_set(checkout: Path, names: list[str], limit: int | None) -> dict[str, dict[str, float]]:
    data = json.loads((checkout / "tests" / "evaldata.json").read_text(encoding="utf-8"))
    items = list(data.values())[:limit]
    pages: list[tuple[bytes, list[str], list[str]]] = []
    for item in items:
        for folder in ("eval", "cache"):
            path = checkout / "tests" / folder / item["file"]
            if path.exists():
                pages.append((path.read_bytes(), [norm(s) for s in item["with"]], [norm(s) for s in item["without"]]))
                break
    results: dict[str, dict[str, float]] = {}
    for name in names:
        tp = fn = fp = tn = empty = 0
        seconds = 0.0
        for raw, with_, without in pages:
            out, took = timed(EXTRACTORS[name], raw)
            seconds += took
            text = norm(out.text)
            empty += not text
            found = sum(s in text for s in with_)
            leaked = sum(s in text for s in without)
            tp, fn, fp, tn = tp + found, fn + len(with_) - found, fp + leaked, tn + len(without) - leaked
        precision, recall = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
        results[name] = {"pages": len(pages), "recall": recall, "precision": precision,
                         "f1": 2 * precision * recall / max(precision + recall, 1e-9),
                         "boilerplate_let_through": fp / max(fp + tn, 1), "empty_pages": empty,
                         "ms_per_page": 1000 * seconds / max(len(pages), 1)}
    return results


def available(names: list[str]) -> list[str]:
    out = []
    for name in names:
        try:
            EXTRACTORS[name]((HAND / "news_article.html").read_bytes())  # imports and first-call set-up, not timed
        except ImportError as e:
            print(f"skipping {name}: {e}")
            continue
        out.append(name)
    return out


def _table(results: dict[str, dict[str, float]], columns: list[str]) -> str:
    lines = ["| extractor | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    for name, row in results.items():
        cells = []
        for c in columns:
            v = row[c]
            cells.append(f"{v:.0f}" if c in ("pages", "empty_pages") else f"{v:.1f}" if c == "ms_per_page"
                         else "n/a" if v != v else f"{100 * v:.0f} %")
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--eval", type=Path, help="a trafilatura checkout (its tests/evaldata.json and pages)")
    parser.add_argument("--limit", type=int, help="only the first N pages of the eval set")
    parser.add_argument("--extractors", default=",".join(EXTRACTORS))
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    names = available(args.extractors.split(","))
    report = {"hand": hand_set(names)}
    if args.eval:
        report["eval"] = eval_set(args.eval, names, args.limit)
    if args.json:
        print(json.dumps(report, indent=2))
        return
    print("Hand-marked pages (benchmarks/data/html):")
    print(_table(report["hand"], ["pages", "content_kept", "boilerplate_let_through", "headings_kept", "titles_right",
                                  "ms_per_page"]))
    if "eval" in report:
        print("\ntrafilatura's evaluation corpus:")
        print(_table(report["eval"], ["pages", "recall", "precision", "f1", "boilerplate_let_through", "empty_pages",
                                      "ms_per_page"]))


if __name__ == "__main__":
    main()
