"""Whole-document intents (rag_core.answer.intent): each kind on a few wordings, fact questions that use the trigger
words staying facts, which document a question means, and the labelled set (benchmarks/data/intents.jsonl) measured
on its test split."""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from rag_core.answer.doc_names import Reference
from rag_core.answer.intent import IntentKind, classify, normalise
from rag_core.core.models import DocumentInfo

ROOT = Path(__file__).resolve().parents[2]
SET = ROOT / "benchmarks" / "data" / "intents.jsonl"
LIBRARIES = ROOT / "benchmarks" / "data" / "intents_libraries.json"

# Measured on the test split (docs/whole-documents.md): precision 1.0, recall 0.945. The floors leave room for a
# rule change that costs a question or two, not for a fact question turned into a summary.
MIN_PRECISION = 0.95
MIN_RECALL = 0.90


def _doc(doc_id: str, title: str, file_name: str, added_at: str, kind: str = "pdf") -> DocumentInfo:
    return DocumentInfo(doc_id=doc_id, title=title, kind=kind, pages=10, chunks=5, added_at=added_at,
                        file_name=file_name)


BUDGET = _doc("budget", "Annual Budget Report 2024", "budget_report_2024.pdf", "2024-05-02T09:00:00+00:00")
HANDBOOK = _doc("handbook", "Employee Handbook", "Employee-Handbook-v3.docx", "2024-04-11T09:00:00+00:00", "docx")
LEASE = _doc("lease", "Office Lease Agreement — Riverside Tower", "lease_riverside.pdf", "2024-02-20T09:00:00+00:00")
ATTENTION = _doc("attention", "Attention Is All You Need", "1706.03762.pdf", "2025-01-08T10:00:00+00:00")
LIBRARY = [BUDGET, HANDBOOK, LEASE, ATTENTION]
B2023 = _doc("b2023", "City Budget 2023", "city_budget_2023.xlsx", "2024-11-02T10:00:00+00:00", "xlsx")
B2024 = _doc("b2024", "City Budget 2024", "city_budget_2024.xlsx", "2024-11-02T10:01:00+00:00", "xlsx")


def kind(question: str, documents=LIBRARY, scope=None) -> IntentKind:
    return classify(question, documents, scope).kind


@pytest.mark.parametrize("question", [
    "Summarize the budget report.", "can u give me the gist of the budget report",
    "What is the annual budget report about?", "tl;dr budget_report_2024.pdf", "sumarize the budget report pls",
    "Could you please write a short summary of the Employee Handbook for my manager?",
])
def test_summaries_of_a_named_document(question):
    assert kind(question) is IntentKind.SUMMARY


@pytest.mark.parametrize(("question", "expected"), [
    ("What are the key takeaways of the employee handbook?", IntentKind.KEY_POINTS),
    ("main points of the lease please", IntentKind.KEY_POINTS),
    ("highlights of the budget report", IntentKind.KEY_POINTS),
    ("Show me the table of contents of the handbook", IntentKind.OUTLINE),
    ("What sections does the lease have?", IntentKind.OUTLINE),
    ("How is the employee handbook structured?", IntentKind.OUTLINE),
    ("What documents are in my library?", IntentKind.LIBRARY_LIST),
    ("which files did I upload", IntentKind.LIBRARY_LIST),
    ("how many documents have I uploaded?", IntentKind.LIBRARY_LIST),
    ("Which of my documents mention parking?", IntentKind.LIBRARY_TOPIC),
    ("what does my library say about sick leave", IntentKind.LIBRARY_TOPIC),
])
def test_other_kinds(question, expected):
    assert kind(question) is expected


@pytest.mark.parametrize("question", [
    "What does the summary on page 3 say about taxes?", "Who wrote the executive summary?",
    "What is the summary judgment procedure?", "Which overview table lists the costs?",
    "Summarize the section on overtime pay.", "Summarize what the handbook says about sick leave.",
    "Give me an overview of the sick leave process.", "What is chapter 3 about?", "tl;dr of section 3",
    "What are the key points of the remote work policy?", "What is the abstract of the attention paper?",
    "Compare the travel budget and the training budget.", "What documents do I need to renew my passport?",
    "What papers do I have to sign?", "Which documents must be attached to an expense claim?",
    "Does the summary mention inflation?", "How many sections does the employee handbook have?",
    "Tell me about attention.",  # a concept, not the paper "Attention Is All You Need"
    "What is the outline agreement with the supplier?", "Summarize our conversation",
])
def test_fact_questions_with_trigger_words_stay_facts(question):
    assert kind(question) is IntentKind.FACT


def test_cover_of_an_insurance_policy_is_a_fact_question():
    policy = _doc("policy", "Home Insurance Policy", "policy.pdf", "2025-01-01T00:00:00+00:00")
    assert kind("What does this policy cover?", [policy, BUDGET], ["policy"]) is IntentKind.FACT
    assert kind("What does the handbook cover?") is IntentKind.SUMMARY


def test_documents_named_by_title_file_name_and_typo():
    assert classify("Summarize the riverside tower lease", LIBRARY).doc_ids == ("lease",)
    assert classify("summarize Employee-Handbook-v3.docx", LIBRARY).doc_ids == ("handbook",)
    assert classify("What is 1706.03762 about?", LIBRARY).doc_ids == ("attention",)
    assert classify("summarize attention is all you need", LIBRARY).doc_ids == ("attention",)
    got = classify("give me an overview of the Employe Handbok", LIBRARY)  # two typos in title words
    assert (got.kind, got.doc_ids, got.reference) == (IntentKind.SUMMARY, ("handbook",), Reference.NAMED)


def test_this_document_is_the_scoped_one_or_the_only_one():
    got = classify("What is this document about?", LIBRARY, ["lease"])
    assert (got.kind, got.doc_ids, got.reference) == (IntentKind.SUMMARY, ("lease",), Reference.SCOPED)
    got = classify("summarize it", [HANDBOOK])
    assert (got.doc_ids, got.reference) == (("handbook",), Reference.ONLY)
    got = classify("Summarize this", LIBRARY, ["lease", "budget"])
    assert (got.doc_ids, got.reference) == (("lease", "budget"), Reference.SCOPED)


def test_several_documents_and_none_named_means_all_of_them():
    got = classify("Summarize this", LIBRARY)
    assert got.kind is IntentKind.SUMMARY
    assert set(got.doc_ids) == {d.doc_id for d in LIBRARY} and got.reference is Reference.ALL


def test_the_last_file_uploaded_is_the_newest():
    assert classify("Give me a summary of the last file I uploaded", LIBRARY).doc_ids == ("attention",)
    assert classify("summarize the document I just uploaded", LIBRARY).doc_ids == ("attention",)


def test_compare_needs_two_documents():
    got = classify("Compare the 2023 and 2024 budgets", [B2023, B2024])
    assert got.kind is IntentKind.COMPARE and set(got.doc_ids) == {"b2023", "b2024"}
    got = classify("compare them", [B2023, B2024, BUDGET], ["b2023", "b2024"])
    assert got.kind is IntentKind.COMPARE and got.doc_ids == ("b2023", "b2024")
    assert kind("Compare spending on libraries in 2023 and 2024.", [B2023, B2024]) is IntentKind.FACT
    assert kind("compare them", [BUDGET]) is IntentKind.FACT  # one document: nothing to compare


def test_library_topic_keeps_the_topic_as_written():
    got = classify('Search my documents for "Force Majeure"', LIBRARY)
    assert (got.kind, got.topic) == (IntentKind.LIBRARY_TOPIC, "Force Majeure")
    assert classify("which files contain the word invoice", LIBRARY).topic == "invoice"


def test_normalise_sets_aside_the_polite_frame():
    assert normalise("Hi! Could you please summarise it in 3 bullet points, thanks?") == "summarize it"


# --------------------------------------------------------------------------- the labelled set
def _rows() -> list[dict]:
    return [json.loads(line) for line in SET.read_text(encoding="utf-8").splitlines() if line.strip()]


def test_labelled_set_is_well_formed():
    rows = _rows()
    libraries = json.loads(LIBRARIES.read_text(encoding="utf-8"))
    assert len(rows) >= 200
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["kind"] in {k.value for k in IntentKind}, r
        # the split is fixed by the question's hash, so adding lines never moves one
        assert r["split"] == ("tune" if hashlib.sha256(r["question"].encode()).digest()[0] % 2 == 0 else "test")
        ids = {d["doc_id"] for d in libraries[r["library"]]}
        assert set(r["docs"]) <= ids and set(r["scope"] or ()) <= ids, r
        assert bool(r["docs"]) == (r["kind"] in ("summary", "key_points", "outline", "compare")), r
        assert bool(r["topic"]) == (r["kind"] == "library_topic"), r
    facts_with_words = [r for r in rows if r["kind"] == "fact" and any(
        w in r["question"].lower() for w in ("summar", "overview", "key point", "outline", "compare", "documents"))]
    assert len(facts_with_words) >= 40


def test_test_split_precision_and_recall():
    from benchmarks.intents import measure

    test = measure()["test"]
    nf = test["non_fact"]
    assert nf["precision"] >= MIN_PRECISION, test
    assert nf["recall"] >= MIN_RECALL, test
    assert test["documents"]["right"] >= 0.95 and test["topics"]["right"] >= 0.9, test
    for name, k in test["kinds"].items():
        if name != "fact" and k["predicted"]:
            assert k["precision"] >= MIN_PRECISION, (name, k)
