"""The language sentence of a reply (rag_core.answer.language): questions told apart by language, passages too, and
the sentence only when they differ; never for a short or unclear question."""
from __future__ import annotations

import pytest

from rag_core.answer import language as lang
from rag_core.core.models import Chunk, DocumentInfo, Passage, SourceMeta

ENGLISH = ("The Panthers defense gave up just 308 points, ranking sixth in the league, while also leading the NFL in "
           "interceptions with 24 and boasting four Pro Bowl selections. Pro Bowl defensive tackle Kawann Short led "
           "the team in sacks with 11, while also forcing three fumbles and recovering two.")
GERMAN = ("Die Verteidigung der Panthers ließ nur 308 Punkte zu und belegte damit den sechsten Platz der Liga. Zugleich "
          "führte sie die NFL mit 24 Interceptions an und stellte vier Spieler für den Pro Bowl. Der Defensive Tackle "
          "Kawann Short führte das Team mit elf Sacks an.")


def _passages(text: str, n: int = 2) -> list[Passage]:
    source = SourceMeta(file_name="doc.md", title="Doc", kind="md", sha256="x")
    return [Passage(Chunk("d", i, text, 0, len(text), None, None, (), source), 1.0 - i / 10) for i in range(n)]


@pytest.mark.parametrize(("question", "code"), [
    ("Combien de points la défense des Panthers a-t-elle concédés ?", "fr"),
    ("Wie viele Punkte hat die Verteidigung der Panthers zugelassen?", "de"),
    ("¿Cuántos puntos permitió la defensa de los Panthers?", "es"),
    ("How many points did the Panthers defense surrender?", "en"),
])
def test_question_language(question, code):
    assert lang.question_language(question) == code


@pytest.mark.parametrize("question", ["Tesla?", "Super Bowl", "NFL 2015", ""])
def test_short_questions_are_not_labelled(question):
    assert lang.question_language(question) is None
    assert lang.language_notice(question, _passages(ENGLISH)) is None


def test_notice_names_both_languages_when_they_differ():
    note = lang.language_notice("Combien de points la défense des Panthers a-t-elle concédés ?", _passages(ENGLISH))
    assert note is not None and "French" in note and "English" in note
    back = lang.language_notice("How many points did the Panthers defense give up?", _passages(GERMAN))
    assert back is not None and "English" in back and "German" in back


def test_no_notice_when_languages_match_or_nothing_was_found():
    assert lang.language_notice("How many points did the Panthers defense surrender?", _passages(ENGLISH)) is None
    assert lang.language_notice("Wie viele Punkte ließ die Verteidigung zu?", _passages(GERMAN)) is None
    assert lang.language_notice("Combien de points la défense a-t-elle concédés ?", []) is None
    assert lang.language_notice("Combien de points la défense a-t-elle concédés ?", _passages("Too short.")) is None


@pytest.mark.parametrize(("question", "code", "name"), [
    ("黑豹队的防守丢了多少分？", "zh", "Chinese"),
    ("パンサーズの守備は何点を許しましたか？", "ja", "Japanese"),
    ("팬서스 수비는 몇 점을 허용했나요?", "ko", "Korean"),
])
def test_a_question_in_a_script_without_spaces_is_told_too(question, code, name):
    # Counted by spaces, these questions are one or two "words" and were never labelled (no notice, a silent miss).
    assert lang.question_language(question) == code
    note = lang.language_notice(question, _passages(ENGLISH))
    assert note is not None and name in note and "English" in note
    assert lang.language_notice("多少", _passages(ENGLISH)) is None  # still too short to tell


def test_passages_in_a_script_without_spaces_are_told():
    chinese = "黑豹队的防守只丢了308分，在联盟中排名第六，同时以24次抄截领先全联盟，并有四名球员入选职业碗。" * 2
    note = lang.language_notice("How many points did the Panthers defense give up?", _passages(chinese))
    assert note is not None and "Chinese" in note


def test_with_language_notice_appends_to_an_existing_notice():
    q = "¿Cuántos puntos permitió la defensa de los Panthers?"
    alone = lang.with_language_notice(None, q, _passages(ENGLISH))
    assert alone is not None and alone.startswith("Your question seems to be in Spanish")
    both = lang.with_language_notice("None of your documents seems to cover this question.", q, _passages(ENGLISH))
    assert both is not None and both.startswith("None of your documents") and both.endswith(alone)
    assert lang.with_language_notice("Kept.", "How many points?", _passages(ENGLISH)) == "Kept."


def test_hostile_input_is_bounded():
    huge = "Combien " * 200_000 + "\x00\ud7ff" * 1000
    assert lang.question_language(huge) in (None, *lang.LANGUAGES)


class _Embedder:
    """A stand-in for the library's Embedder: only what the language sentence reads of it."""

    def __init__(self, multilingual: bool | None) -> None:
        if multilingual is not None:  # None: an Embedder from before the property existed
            self.multilingual = multilingual


class _Store:
    """A library of one English document, read through the two calls the language sentence makes."""

    def __init__(self, embedder: _Embedder) -> None:
        self.embedder = embedder

    def list_documents(self, owners=None):
        return [DocumentInfo("en-doc", "Doc", "md", None, 2, "2026-01-01", sha256="en", lang="en")]

    def document_chunks(self, doc_id, owners=None):  # pragma: no cover - the document says its language
        raise AssertionError("not read")


@pytest.mark.parametrize("multilingual", [None, False])
@pytest.mark.parametrize("e5_here", [True, False])
def test_an_english_model_library_says_when_languages_differ(multilingual, e5_here, monkeypatch):
    """The sentence, and where the multilingual model can run here, the Settings choice that fixes it."""
    monkeypatch.setattr(lang, "many_languages_here", lambda: e5_here)
    store = _Store(_Embedder(multilingual))
    q = "¿Cuántos puntos permitió la defensa de los Panthers?"
    note = lang.with_language_notice("Kept.", q, _passages(ENGLISH), store)
    said = lang.NOTICE_LIBRARY.format(question="Spanish", documents="English", choices="English")
    assert note == "Kept. " + said + (" " + lang.NOTICE_MANY_LANGUAGES if e5_here else "")
    assert not lang.reads_many_languages(store)


def test_a_multilingual_model_library_says_nothing_about_a_language_difference():
    store = _Store(_Embedder(True))
    assert lang.reads_many_languages(store)
    for q, passages in (("¿Cuántos puntos permitió la defensa de los Panthers?", _passages(ENGLISH)),
                        ("How many points did the Panthers defense give up?", _passages(GERMAN))):
        assert lang.with_language_notice(None, q, passages, store) is None
        assert lang.with_language_notice("Kept.", q, passages, store) == "Kept."


def test_only_a_true_multilingual_counts():
    """A mock's made-up attribute (truthy, not True) is not a multilingual model."""
    class Loose:
        multilingual = "yes"

    assert not lang.reads_many_languages(_Store(Loose()))  # type: ignore[arg-type]
    assert not lang.reads_many_languages(None)


THAI_QUESTION = "แนวรับของทีมแพนเทอร์สเสียไปกี่แต้ม"  # Thai: a language the identifier does not know (not in LANGUAGES)
TAMIL_QUESTION = "டெஸ்லா எந்த ஆண்டு இறந்தார்?"
BENGALI_QUESTION = "টেসলা কোন সালে মারা যান?"


@pytest.mark.parametrize("question", [THAI_QUESTION, TAMIL_QUESTION, BENGALI_QUESTION])
def test_a_language_the_identifier_does_not_know_is_told_by_its_script(question):
    """Thai, Tamil or Bengali over English passages: the language cannot be named, but its writing system is not the
    passages', so the reply says the question seems to be in another language (it was a silent miss: MiniLM found
    none of benchmarks/data/multilingual_scripts.jsonl's gold passages and said nothing)."""
    assert lang.question_language(question) is None
    note = lang.language_notice(question, _passages(ENGLISH))
    assert note == lang.NOTICE_OTHER_SCRIPT.format(documents="English")
    store = _Store(_Embedder(False))
    assert lang.with_language_notice(None, question, _passages(ENGLISH), store).startswith(note)
    assert lang.with_language_notice(None, question, _passages(ENGLISH), _Store(_Embedder(True))) is None


@pytest.mark.parametrize("question", ["Panthers?", "Panthers 308 points", "ทีม?", "1886?"])
def test_a_short_or_same_script_question_is_not_told_by_its_script(question):
    assert lang.language_notice(question, _passages(ENGLISH)) is None


@pytest.mark.parametrize(("text", "written"), [
    (ENGLISH, "LATIN"), (THAI_QUESTION, "THAI"), (TAMIL_QUESTION, "TAMIL"), (BENGALI_QUESTION, "BENGALI"),
    ("Привет, как дела у вас?", "CYRILLIC"), ("東京は日本の首都です。", "CJK"), ("北京是中国的首都。", "CJK"),
    ("서울은 한국의 수도입니다", "HANGUL"), ("تهران پایتخت ایران است", "ARABIC"), ("नई दिल्ली भारत की राजधानी है", "DEVANAGARI"),
    ("308 — 24, 11.", None), ("Tokyo 東京 is the capital", "LATIN"),
])
def test_script_names_the_writing_system_most_letters_are_in(text, written):
    from rag_core.core.language_id import script

    assert script(text) == written


THAI_PARAGRAPH = ("ต่อมามีการพบกระดาษแผ่นหนึ่งที่ลูเทอร์เขียนถ้อยแถลงสุดท้ายของเขาไว้ ถ้อยแถลงนั้นเขียนเป็นภาษาละติน "
                  "ยกเว้นประโยค \"เราเป็นขอทาน\" ซึ่งเขียนเป็นภาษาเยอรมัน")


class _MixedStore(_Store):
    """An English document and a Thai one (its language unknown to the identifier, read from its passages)."""

    def list_documents(self, owners=None):
        return [*super().list_documents(owners),
                DocumentInfo("th-doc", "Luther", "md", None, 1, "2026-01-01", sha256="th")]

    def document_chunks(self, doc_id, owners=None):
        assert doc_id == "th-doc"
        return [(_passages(THAI_PARAGRAPH, 1)[0].chunk, None)]


def test_a_document_in_a_language_known_only_by_its_script_is_named_by_it(monkeypatch):
    """An English question over English passages in a library that also holds a Thai document: the reply names the
    Thai script (it was a silent miss); a Thai question gets no advice to ask in its own script."""
    monkeypatch.setattr(lang, "_doc_languages", {})
    monkeypatch.setattr(lang, "many_languages_here", lambda: False)
    store = _MixedStore(_Embedder(False))
    note = lang.with_language_notice(None, "What did Luther write on the piece of paper found later?",
                                     _passages(ENGLISH), store)
    assert note == lang.NOTICE_OTHER_DOCUMENTS.format(languages="Thai script", first="Thai script")
    assert lang.language_name("~THAI") == "Thai script" and lang.language_name("fr") == "French"
    thai = lang.with_language_notice(None, "ลูเทอร์เขียนอะไรไว้บนกระดาษแผ่นนั้น", _passages(THAI_PARAGRAPH), store)
    assert thai is None  # Thai passages found for a Thai question: nothing to advise
