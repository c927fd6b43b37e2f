"""rag_core.core.text: the one sentence splitter (abbreviation-safe, exact offsets), content terms and refusals, and the
modules that use it."""
from __future__ import annotations

import time

import pytest

from rag_core.answer.generation.extractive import quotable_spans
from rag_core.answer.grounding.evidence import split_sentences
from rag_core.core import text as T
from rag_core.core.models import Document, Section, SourceMeta
from rag_core.ingest.chunking import chunk_document


@pytest.mark.parametrize("text, expected", [
    ("We sailed up the St. Johns River. Then we rested.", ["We sailed up the St. Johns River.", "Then we rested."]),
    ("Use a lever, e.g. a crowbar. It helps.", ["Use a lever, e.g. a crowbar.", "It helps."]),
    ("E.g. This one stays whole. Next.", ["E.g. This one stays whole.", "Next."]),
    ("Dr. Smith met Mrs. Jones. They talked.", ["Dr. Smith met Mrs. Jones.", "They talked."]),
    ("J. R. R. Tolkien wrote it. George W. Bush read it.", ["J. R. R. Tolkien wrote it.", "George W. Bush read it."]),
    ("The U.S. Army arrived. It was 1944.", ["The U.S. Army arrived.", "It was 1944."]),
    ("It costs 3.50 euros. Pi is 3.14159. Fine.", ["It costs 3.50 euros.", "Pi is 3.14159.", "Fine."]),
    ("See No. 5 and Fig. 2 on pp. 10-12. Done.", ["See No. 5 and Fig. 2 on pp. 10-12.", "Done."]),
    ("Born on Jan. 5, 1900. Died later.", ["Born on Jan. 5, 1900.", "Died later."]),
    ("He said “Stop.” Then he left.", ["He said “Stop.”", "Then he left."]),
    ("(It ended.) A new one began.", ["(It ended.)", "A new one began."]),
    ("Really?! Yes. Wait… What?", ["Really?!", "Yes.", "Wait…", "What?"]),
    ("Yahoo! is a company. ok.", ["Yahoo! is a company. ok."]),  # lower case never starts a sentence
    ("It ends in 1945. The war was over.", ["It ends in 1945.", "The war was over."]),
    ("東京は大きい。大阪も大きい。", ["東京は大きい。", "大阪も大きい。"]),
    ("Ist das so? Ja. Das ist z.B. gut. Mehr bzw. weniger.", ["Ist das so?", "Ja.", "Das ist z.B. gut.",
                                                             "Mehr bzw. weniger."]),
    ("", []),
    ("   \n\n  ", []),
])
def test_sentences_are_abbreviation_safe(text, expected):
    assert T.sentences(text) == expected


def test_spans_are_trimmed_absolute_offsets_within_the_range():
    text = "Intro.  First one here.  Second one?\nThird line"
    start = text.index("First")
    spans = T.sentence_spans(text, start, len(text) - 5)
    assert [text[s:e] for s, e in spans] == ["First one here.", "Second one?", "Third"]
    assert all(text[s:e] == text[s:e].strip() for s, e in spans)


def test_line_breaks_split_every_line_or_only_paragraphs_and_list_items():
    text = "A wrapped sentence\ngoes on here. Next.\n\nNew paragraph.\n- a list item\n2. numbered"
    assert T.sentences(text) == ["A wrapped sentence", "goes on here.", "Next.", "New paragraph.", "- a list item",
                                 "2. numbered"]
    assert T.sentences(text, lines=False) == ["A wrapped sentence\ngoes on here.", "Next.", "New paragraph.",
                                              "- a list item", "2. numbered"]


def test_paragraph_spans():
    text = "\n  One\nstill one.\n \n\nTwo.  \n\n"
    assert [text[s:e] for s, e in T.paragraph_spans(text)] == ["One\nstill one.", "Two."]
    assert T.trim_span("  ab  ", 0, 6) == (2, 4)


# Cases where the splitter lost against the libraries or the corpora in benchmarks/splitters.py (docs/sentences.md).
@pytest.mark.parametrize("text, expected", [
    # an acronym, an initial, a title or a company ends a sentence only before a usual sentence opener
    ("He moved to the U.S. He stayed there.", ["He moved to the U.S.", "He stayed there."]),
    ("He moved to the U.S. in 1990. He stayed.", ["He moved to the U.S. in 1990.", "He stayed."]),
    ("He lived in Washington, D.C. The city was hot.", ["He lived in Washington, D.C.", "The city was hot."]),
    ("I live on Baker St. The house is red.", ["I live on Baker St.", "The house is red."]),
    ("Go to St. Mary's Hospital. Ask for Dr. Brown.", ["Go to St. Mary's Hospital.", "Ask for Dr. Brown."]),
    ("He works for Acme Inc. The company is small.", ["He works for Acme Inc.", "The company is small."]),
    ("Smith & Co. Ltd. was sold in 1990. It closed.", ["Smith & Co. Ltd. was sold in 1990.", "It closed."]),
    ("Deficiency of vitamin D. All of them had it.", ["Deficiency of vitamin D.", "All of them had it."]),
    ("It was seen in arm A. In arm B it was not.", ["It was seen in arm A.", "In arm B it was not."]),
    ("The meeting ended at 10 a.m. The guests left.", ["The meeting ended at 10 a.m.", "The guests left."]),
    ("Lt. Col. James Smith retired. He moved.", ["Lt. Col. James Smith retired.", "He moved."]),
    ("Shown by Smith et al. (2005). Others disagree.", ["Shown by Smith et al. (2005).", "Others disagree."]),
    # never an end: Latin abbreviations, and abbreviations before a number (any case)
    ("The landmark case Brown v. Board of Education ended it.", ["The landmark case Brown v. Board of Education "
                                                                 "ended it."]),
    ("Jacques Lefevre (c. 1455–1536) wrote. Others read.", ["Jacques Lefevre (c. 1455–1536) wrote.", "Others read."]),
    ("Bone bruises (no. 25) and others (no. 33). Done.", ["Bone bruises (no. 25) and others (no. 33).", "Done."]),
    ("It fell (28% v. 59%) in a year. Done.", ["It fell (28% v. 59%) in a year.", "Done."]),
    # dotted abbreviations and initials after a number or a sign
    ("Values were 0.221 (st.dev. 0.019) here. Done.", ["Values were 0.221 (st.dev. 0.019) here.", "Done."]),
    ("We gave i.c.v. AICAR to rats. They ate.", ["We gave i.c.v. AICAR to rats.", "They ate."]),
    ("The ratio was 10.0 (95%C.I. 5.3-18.9). Done.", ["The ratio was 10.0 (95%C.I. 5.3-18.9).", "Done."]),
    ("Temperatures reached 40 °C. Crops failed.", ["Temperatures reached 40 °C.", "Crops failed."]),
    ("B was a Registrar in IM&A. Investigator C was not.", ["B was a Registrar in IM&A.",
                                                            "Investigator C was not."]),
    ("The ratio was 1.5 (p<0. 001). For each case it held.", ["The ratio was 1.5 (p<0.", "001).",
                                                              "For each case it held."]),  # a broken decimal
    # list markers and elisions open the sentence that follows; a spaced ellipsis is no end
    ("1. Mix the flour. 2. Add the water.", ["1. Mix the flour.", "2. Add the water."]),
    ("It grew in recent years. ... The main reason is cost.", ["It grew in recent years. ...",
                                                               "The main reason is cost."]),
    ("... The main reason is cost. It grew.", ["... The main reason is cost.", "It grew."]),
    ('He said, "I am here to . . . submit cheerfully." Then he sat.', ['He said, "I am here to . . . submit '
                                                                       'cheerfully."', "Then he sat."]),
    # German closing quotes
    ("Er sagte: „Ja.“ Dann ging er.", ["Er sagte: „Ja.“", "Dann ging er."]),
])
def test_sentences_found_by_the_splitter_benchmark(text, expected):
    assert T.sentences(text) == expected


def test_a_line_starting_with_a_number_is_a_list_item_only_with_its_marker():
    text = "Raise the pressure of O\n2 around the patient. Then wait.\n3. Check the level."
    assert T.sentences(text, lines=False) == ["Raise the pressure of O\n2 around the patient.", "Then wait.",
                                              "3. Check the level."]


def test_spans_of_generated_hostile_text_are_ordered_trimmed_and_cover_every_word():
    import random

    rng = random.Random(15)
    pieces = ["St.", "U.S.", "e.g.", "No.", "1.", "3.14", "...", ". . .", "…", "?!", "“Yes.”", "„Ja.“", "(a.)",
              "The", "he", "Dr.", "J.", "A.", "。", "؟", "Inc.", "°C.", "\n", "\n\n", "- item", "2)", "word", "x" * 60]
    for _ in range(300):
        text = "".join(rng.choice(pieces) + rng.choice([" ", "", "  ", "\t"]) for _ in range(rng.randint(0, 40)))
        start = rng.randint(0, len(text))
        end = rng.randint(start, len(text))
        for lines in (True, False):
            spans = T.sentence_spans(text, start, end, lines=lines)
            assert all(start <= s < e <= end for s, e in spans)
            assert all(a[1] <= b[0] for a, b in zip(spans, spans[1:]))  # in order, never overlapping
            assert all(text[s:e] == text[s:e].strip() for s, e in spans)
            covered = {i for s, e in spans for i in range(s, e)}
            assert all(i in covered for i in range(start, end) if not text[i].isspace())


def test_splitting_is_fast():
    text = "Dr. Smith said e.g. this is 3.5 times better. It works! Does it? Yes, J. Doe agrees.\n" * 5000
    t0 = time.perf_counter()
    spans = T.sentence_spans(text)
    assert len(spans) == 4 * 5000
    assert time.perf_counter() - t0 < 3.0  # ~0.4 MB; a few hundred ms on a slow machine


def test_content_terms_and_tokens():
    assert T.tokens("It cost 1,200.50 euros in 2024!") == ["It", "cost", "1,200.50", "euros", "in", "2024"]
    terms = T.content_terms("Brussels has 1,200 parks and the Atomium.")
    assert terms.words == {"brussel", "1200", "park", "atomium"}
    assert terms.keys == {"1200", "atomium"} and terms.opener == {"brussel"}
    assert T.stem("running") == "run" and {"the", "source", "according"} <= T.STOP_WORDS


@pytest.mark.parametrize("reply, refusal", [
    ("I couldn't find the answer to this in your documents.", True),
    ("The sources do not mention his date of death.", True),
    ("There is no information about   that in the passages.", True),
    ("This is not stated in the documents provided.", True),
    ("He died in 1943 in New York [2].", False),
    ("The documents describe how to find a file [1].", False),
])
def test_refusal_detection(reply, refusal):
    assert T.is_refusal(reply) is refusal


# --------------------------------------------------------------------------- the users of the splitter
def test_chunking_keeps_abbreviations_inside_one_unit(embedder):
    text = "We sailed up the St. Johns River with Dr. Who. It was 3.5 km long."
    doc = Document(doc_id="d", text=text, sections=(Section((), 0, len(text)),),
                   source=SourceMeta(file_name="t.txt", title="T", kind="txt", sha256="x"))
    # A budget of one sentence per chunk: chunk ends fall only on real sentence ends.
    chunks = chunk_document(doc, embedder, max_tokens=22, overlap=0)
    assert [c.text for c in chunks] == ["We sailed up the St. Johns River with Dr. Who.", "It was 3.5 km long."]


def test_evidence_and_extractive_split_with_the_same_rules():
    text = "The St. Johns River is long. e.g. this stays.\n- “A quoted. Bullet line” [1]\nShort."
    assert [text[s:e] for s, e in split_sentences(text)] == [
        "The St. Johns River is long. e.g. this stays.", "- “A quoted. Bullet line” [1]", "Short."]
    passage = "The St. Johns River is long. e.g. this stays.\nShort.\n\nA new paragraph starts right here."
    assert [passage[s:e] for s, e in quotable_spans(passage)] == [  # passages: sentences of at least four words
        "The St. Johns River is long. e.g. this stays.", "A new paragraph starts right here."]
