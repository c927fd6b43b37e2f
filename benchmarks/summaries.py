"""Whole-document summaries (issue 26): how the quoted summary picks its sentences, what it covers, how fast it is,
and what the model is shown and sent when it reads a document part by part.

Documents (added once to a library in `--data-dir`, default a temp folder; real embedding model, Qdrant Edge):
tests/fixtures/documents/pdf_text_long_117-pages_german.pdf (a lecture script, 33 sections), three long documents
built from benchmarks/data (XQuAD: 12 and 20 Wikipedia articles as sections, 6 more run together without headings;
PubMedQA: 15 abstracts, their labelled parts as sub-sections, 45+ sections) and two small fixtures.

1. Pick comparison (`rag_core.answer.summaries.digest.Pick`, plus "central+embed": the central passage, and in it the
   sentence nearest the part's mean vector, embedding every candidate sentence). For each part's chosen sentence:
   heading overlap (share of the part heading's words in the sentence: is it about what the section says it is
   about), keywords (share of the part's 10 most distinctive words, tf x idf over the parts, in the sentence), and
   centrality (cosine of the sentence's embedding with the part's mean passage vector; computed for the report only).
   Averaged over the parts of each document, then over documents.
2. Coverage of the quoted summary (no model): share of the document's quarters and of its sections holding a quote.
3. CPU time of the 117-page PDF's quoted summary: process time (all threads) of the whole answer run, median of 5.
4. With a model: the scripted Ollama-compatible server of tests/ollama_server.py (it answers each part with the first
   sentence of four passages spread over what it is shown, cited; the whole with three of the notes), default settings (DOCCHAT_NUM_CTX_MAX 8192, DOCCHAT_ANSWER_TOKENS
   1024, DOCCHAT_SUMMARY_MAX_CALLS 12): model calls, estimated prompt tokens sent (and per page), share of quarters
   and sections the model was shown, and cited in the checked answer.

Run: .venv/bin/python -m benchmarks.summaries [--data-dir DIR] [--json]
"""
from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np

from rag_core.answer.summaries import Shape
from rag_core.answer.summaries.digest import Pick, choose_points, coverage, prose, sentences
from rag_core.answer.summaries.document import DocText, centrality, load_document, plan_parts, words
from rag_core.answer.summaries.start import start_summary
from rag_core.core.config import Settings
from rag_core.service.library import Library
from tests.ollama_server import OllamaServer, Reply

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "benchmarks" / "data"
DOCS = ROOT / "tests" / "fixtures" / "documents"
PARTS = 14  # as rag_core.answer.generation.whole.DIGEST_PARTS


def build_documents(folder: Path) -> list[Path]:
    """The long test documents, written into `folder` (and the fixtures used as they are)."""
    xquad = json.loads((DATA / "xquad" / "xquad.en.json").read_text(encoding="utf-8"))["data"]

    def article(a: dict) -> str:
        return "\n\n".join(p["context"] for p in a["paragraphs"])

    def sectioned(title: str, arts: list[dict]) -> str:
        return f"# {title}\n\n" + "\n\n".join(f"## {a['title'].replace('_', ' ')}\n\n{article(a)}" for a in arts)

    pubmed = json.loads((DATA / "pubmedqa" / "ori_pqal.json").read_text(encoding="utf-8"))
    abstracts = []
    for key in list(pubmed)[:15]:
        item = pubmed[key]
        parts = "\n\n".join(f"### {label.title()}\n\n{text}" for label, text in zip(item["LABELS"], item["CONTEXTS"],
                                                                                     strict=False))
        abstracts.append(f"## {item['QUESTION']}\n\n{parts}")
    made = {"xquad_12_articles.md": sectioned("Twelve articles", xquad[:12]),
            "xquad_20_articles.md": sectioned("Twenty articles", xquad[12:32]),
            "xquad_no_headings.txt": "\n\n".join(article(a) for a in xquad[32:38]),
            "pubmedqa_15_abstracts.md": "# Fifteen abstracts\n\n" + "\n\n".join(abstracts)}
    for name, text in made.items():
        (folder / name).write_text(text, encoding="utf-8")
    return [DOCS / "pdf_text_long_117-pages_german.pdf", *(folder / n for n in made),
            DOCS / "odt_headings-lists-table-footnote.odt", DOCS / "eu_capitals.md"]


# --------------------------------------------------------------------------- 1. the pick comparison
def _keywords(doc: DocText, parts: list[Any], k: int = 10) -> list[set[str]]:
    counts = [doc.term_counts(p) for p in parts]
    df: Counter[str] = Counter()
    for c in counts:
        df.update(set(c))
    return [{w for w, _ in sorted(c.items(), key=lambda wn: -wn[1] * math.log(1 + len(parts) / df[wn[0]]))[:k]}
            for c in counts]


def _embedded_pick(doc: DocText, part: Any, embedder: Any) -> tuple[int, int, int] | None:
    """The central passage's sentence nearest the part's mean vector (every candidate embedded)."""
    central = centrality(doc, part)
    order = sorted(range(part.first, part.stop), key=lambda i: -float(central[i - part.first]))
    for i in order[:3]:
        spans = sentences(doc.chunks[i].text)
        if spans:
            vecs = np.asarray(embedder.encode([doc.chunks[i].text[s:e] for s, e in spans]), dtype=np.float32)
            mean = doc.vectors[part.first:part.stop].mean(axis=0)
            best = int(np.argmax(vecs @ mean))
            return i, *spans[best]
    return None


def compare_picks(doc: DocText, embedder: Any) -> dict[str, dict[str, float]]:
    """Per pick: mean heading overlap, keyword share and centrality of the parts' chosen sentences."""
    parts = plan_parts(doc, PARTS)
    keys = _keywords(doc, parts)
    out: dict[str, dict[str, float]] = {}
    for name in [*(p.value for p in Pick), "central+embed"]:
        chosen: list[tuple[int, int, int, int]] = []  # (part, chunk, start, end)
        if name == "central+embed":
            for k, part in enumerate(parts):
                got = _embedded_pick(doc, part, embedder)
                if got:
                    chosen.append((k, *got))
        else:
            chosen = [(p.part, p.chunk, p.start, p.end) for p in choose_points(doc, parts, Pick(name)) if p.part >= 0]
            chosen = list({k: (k, c, s, e) for k, c, s, e in chosen}.values())  # one per part (the first)
        texts = [doc.chunks[c].text[s:e] for _, c, s, e in chosen]
        vecs = np.asarray(embedder.encode(texts), dtype=np.float32) if texts else np.zeros((0, 1))
        heading, keyword, central, quality = [], [], [], []
        for (k, _, _, _), text, vec in zip(chosen, texts, vecs, strict=True):
            ws = set(words(text))
            head = set(words(parts[k].label))
            if head:
                heading.append(len(head & ws) / len(head))
            keyword.append(len(keys[k] & ws) / max(1, len(keys[k])))
            mean = doc.vectors[parts[k].first:parts[k].stop].mean(axis=0)
            central.append(float(vec @ mean / max(np.linalg.norm(mean), 1e-9)))
            quality.append(prose(" ".join(text.split())))
        out[name] = {"parts": len(chosen), "heading": _mean(heading), "keywords": _mean(keyword),
                     "centrality": _mean(central), "prose": _mean(quality)}
    return out


def _mean(xs: list[float]) -> float:
    return round(statistics.fmean(xs), 3) if xs else float("nan")


# --------------------------------------------------------------------------- 2-4
def first_sentences(body: dict) -> Reply:
    user = body["messages"][-1]["content"]
    sources = re.findall(r'<source n="(\d+)"[^>]*>\n(.*?)\n</source>', user, re.S)
    if sources:  # four passages spread over the part (its first, last and two between), one sentence each
        picks = sorted({round(j * (len(sources) - 1) / 3) for j in range(4)})
        bullets = [f"- {' '.join(s.split())} [{n}]" for n, text in (sources[i] for i in picks)
                   for s in [next((x for x in re.split(r"(?<=[.!?])\s+", text) if len(x.split()) >= 6), "")] if s]
        return Reply("\n".join(bullets) or "Nothing to say.")
    notes = [ln[2:] for ln in re.search(r"<notes>\n(.*?)\n</notes>", user, re.S).group(1).splitlines()
             if ln.startswith("- ")]
    return Reply(" ".join(notes[:1] + notes[len(notes) // 2:len(notes) // 2 + 1] + notes[-1:]))


def answer_of(stream: Any) -> Any:
    for _ in stream:
        pass
    return stream.answer


def cited_coverage(doc: DocText, answer: Any) -> dict[str, Any]:
    spans = []
    index = {c.index: i for i, c in enumerate(doc.chunks)}
    for c in answer.citations:
        if c.passage.chunk.doc_id == doc.info.doc_id:
            spans.append((index[c.passage.chunk.index], c.evidence_start or 0,
                          c.evidence_end or len(c.passage.chunk.text)))
    return coverage(doc, spans)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data-dir", type=Path, help="library folder to (re)use (default: a new temp folder)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="docchat-summaries-"))
    settings = Settings(data_dir=args.data_dir or tmp / "data", ollama_model="")
    lib = Library(settings)
    report: dict[str, Any] = {"documents": []}
    try:
        ids = [lib.ingest_path(p).doc_id for p in build_documents(tmp)]
        picks: dict[str, list[dict[str, float]]] = {}
        for doc_id in ids:
            info = lib.store.get(doc_id)
            doc = load_document(lib.store, info)
            row: dict[str, Any] = {"title": doc.title, "pages": info.pages, "chunks": len(doc.chunks),
                                   "sections": len(doc.sections())}
            if len(doc.chunks) >= 20:
                row["picks"] = compare_picks(doc, lib.embedder)
                for name, m in row["picks"].items():
                    picks.setdefault(name, []).append(m)
            answer = answer_of(start_summary(lib, [doc_id], settings, Shape.SUMMARY, use_llm=False))
            row["quoted"] = answer.extra["summary"]["docs"][0]["cited"]
            ev = answer.extra.get("evidence", {})
            row["quoted"]["verified"] = f"{ev.get('verified')}/{len(answer.citations)}"
            report["documents"].append(row)
        long_id = ids[0]
        cpu = []
        for _ in range(5):
            t = time.process_time()
            answer_of(start_summary(lib, [long_id], settings, Shape.SUMMARY, use_llm=False))
            cpu.append(time.process_time() - t)
        report["long_pdf_cpu_s"] = {"median": round(statistics.median(cpu), 3), "max": round(max(cpu), 3)}
        report["picks"] = {name: {k: _mean([m[k] for m in ms if not math.isnan(m[k])])
                                  for k in ("heading", "keywords", "centrality", "prose")}
                           for name, ms in picks.items()}
        with OllamaServer(models=["scripted"], default=first_sentences) as srv:
            model = settings.with_overrides(ollama_host=srv.url, ollama_model="scripted")
            for doc_id, row in zip(ids, report["documents"], strict=True):
                srv.requests.clear()
                answer = answer_of(start_summary(lib, [doc_id], model, Shape.SUMMARY))
                s = answer.extra["summary"]
                doc = load_document(lib.store, lib.store.get(doc_id), vectors=False)
                row["model"] = {"calls": s["model_calls"], "requests": len(srv.chat_requests),
                                "prompt_tokens": s["prompt_tokens"],
                                "tokens_per_page": round(s["prompt_tokens"] / row["pages"]) if row["pages"] else None,
                                "shown": s["docs"][0]["shown"], "cited": cited_coverage(doc, answer),
                                "mode": answer.mode.value, "notice": answer.notice}
    finally:
        lib.close()
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return
    print("Pick comparison (mean over the documents of >= 20 passages):")
    print(f"  {'pick':<14} {'heading':>8} {'keywords':>9} {'centrality':>11} {'prose':>6}")
    for name, m in report["picks"].items():
        print(f"  {name:<14} {m['heading']:>8} {m['keywords']:>9} {m['centrality']:>11} {m['prose']:>6}")
    print("\nCoverage (quarters, sections cited) and the model's reading:")
    for row in report["documents"]:
        q, m = row["quoted"], row["model"]
        print(f"  {row['title'][:34]:<34} {row['chunks']:>4} passages {row['sections']:>3} sections | quoted: "
              f"{q['quarters']}/4, {q['sections_cited']}/{q['sections']} ({q['section_share']:.0%}), verified "
              f"{q['verified']} | model: {m['calls']} calls, {m['prompt_tokens']} tokens"
              + (f" ({m['tokens_per_page']}/page)" if m["tokens_per_page"] else "")
              + f", shown {m['shown']['quarters']}/4 and {m['shown']['section_share']:.0%} of sections, cited "
              f"{m['cited']['quarters']}/4 and {m['cited']['section_share']:.0%}")
    print(f"\n117-page PDF quoted summary: {report['long_pdf_cpu_s']['median']} s CPU (median of 5, max "
          f"{report['long_pdf_cpu_s']['max']} s)")


if __name__ == "__main__":
    main()
