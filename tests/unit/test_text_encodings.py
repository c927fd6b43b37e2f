"""Every text format is decoded the same way (rag_core.ingest.loaders._decode): files generated here from real
sentences, saved in the encodings people's files come in, read back as .txt, .md, .csv and .html."""
from __future__ import annotations

import codecs
import random

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import UnsupportedFileType
from rag_core.ingest.loaders import load_bytes
from rag_core.ingest.loaders._decode import decode_text, guess_encoding, text_encoding

SETTINGS = Settings()

JAPANESE = ("吾輩は猫である。名前はまだ無い。どこで生れたかとんと見当がつかぬ。"
            "何でも薄暗いじめじめした所でニャーニャー泣いていた事だけは記憶している。")
CHINESE = "我们的学校坐落在一座美丽的小城里。每天早上，学生们都会在操场上跑步，然后回到教室认真学习语文、数学和历史。"
RUSSIAN_TOLSTOY = ("Все счастливые семьи похожи друг на друга, каждая несчастливая семья несчастлива по-своему. "
                   "Всё смешалось в доме Облонских.")
RUSSIAN_PUSHKIN = ("Мой дядя самых честных правил, когда не в шутку занемог, он уважать себя заставил и лучше "
                   "выдумать не мог. Его пример другим наука.")
FRENCH = "Le café de la gare était fermé. « Où est passé l’hôtel ? » demanda Zoë — personne ne répondit. Ça coûte 5 €."
GERMAN = "Über die Brücke gehen wir täglich zur Bäckerei; die Straße ist schmal, aber schön. Grüße aus Köln!"
MIXED = "Ελληνικά, русский, 中文, العربية and emoji 🙂 in one UTF-8 file: naïve café."

# (id, text, how it is saved: a codec name, or a codec with its byte-order mark)
CASES = [
    ("shift-jis", JAPANESE, "shift_jis"),
    ("gb18030", CHINESE, "gb18030"),
    ("koi8-r", RUSSIAN_TOLSTOY, "koi8_r"),
    ("windows-1251", RUSSIAN_PUSHKIN, "cp1251"),
    ("utf-8", MIXED, "utf-8"),
    ("utf-8-bom", MIXED, "utf-8-sig"),
    ("utf-16-bom", MIXED, "utf-16"),
    ("latin-1", GERMAN, "latin-1"),
    ("windows-1252", FRENCH, "cp1252"),
]


def _page(text: str) -> str:
    return f"<!DOCTYPE html><html><head><title>T</title></head><body><main><p>{text}</p></main></body></html>"


@pytest.mark.parametrize(("text", "encoding"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_each_encoding_decodes_exactly(text: str, encoding: str) -> None:
    data = text.encode(encoding)
    assert decode_text(data, "x.txt") == text
    # Without the new decoder (strict UTF-8, else Windows-1252) every one of the first four came out garbled.
    if encoding in ("shift_jis", "gb18030", "koi8_r", "cp1251"):
        assert data.decode("cp1252", errors="replace") != text


@pytest.mark.parametrize(("text", "encoding"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
@pytest.mark.parametrize("kind", ["txt", "md", "csv"])
def test_every_text_format_reads_each_encoding(text: str, encoding: str, kind: str) -> None:
    source = {"txt": text, "md": f"# {text[:12]}\n\n{text}\n", "csv": f"id,sentence\n1,\"{text}\"\n"}[kind]
    doc = load_bytes(source.encode(encoding), f"sample.{kind}", SETTINGS)
    assert text in doc.text
    if kind == "md":
        assert doc.sections[0].heading_path == (text[:12].strip(),)


@pytest.mark.parametrize(("text", "encoding"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_a_web_page_that_declares_no_charset_is_detected(text: str, encoding: str) -> None:
    doc = load_bytes(_page(text).encode(encoding), "page.html", SETTINGS)
    assert doc.source.kind == "html"
    assert text in doc.text


def test_a_web_page_whose_declared_charset_fails_is_detected() -> None:
    head = '<meta charset="shift_jis">'
    data = _page(RUSSIAN_PUSHKIN).replace("<title>", head + "<title>").encode("cp1251")
    with pytest.raises(UnicodeDecodeError):
        data.decode("shift_jis")
    assert RUSSIAN_PUSHKIN in load_bytes(data, "wrong.html", SETTINGS).text


def test_a_web_page_whose_declared_charset_works_keeps_it() -> None:
    data = _page(RUSSIAN_TOLSTOY).replace("<title>", '<meta charset="koi8-r"><title>').encode("koi8_r")
    assert RUSSIAN_TOLSTOY in load_bytes(data, "koi.html", SETTINGS).text


def test_short_files() -> None:
    """A few bytes are too few to tell encodings apart: Western text is read as Windows-1252 (preferred among equal
    guesses, as before), and a short file in another encoding is read, possibly garbled, never refused."""
    assert decode_text("Café résumé".encode("cp1252"), "s.txt") == "Café résumé"
    assert guess_encoding("Ça coûte 5 €".encode("cp1252")) == "cp1252"
    for text, encoding in (("Привет, мир", "koi8_r"), ("Привет, мир", "cp1251"), ("猫である", "shift_jis")):
        decoded = decode_text(text.encode(encoding), "s.txt")
        assert decoded.strip()
        assert "\ufffd" not in decoded


def test_invalid_utf8_late_in_a_large_file_is_decoded_from_a_bounded_sample() -> None:
    text = (RUSSIAN_PUSHKIN + "\n") * 5000  # 655 KB: the guess reads the first 256 KB, cut after a line break
    data = text.encode("cp1251")
    assert guess_encoding(data) == "cp1251"
    assert decode_text(data, "big.txt") == text


def test_a_large_csv_decoded_as_read_uses_the_decoders_encoding() -> None:
    """CSV is decoded as its rows are read, with text_encoding's choice (the same as decode_text's)."""
    text = "name,line\n" + "".join(f"{i},{RUSSIAN_PUSHKIN}\n" for i in range(3000))  # ~400 KB
    data = text.encode("cp1251")
    assert text_encoding(data, "big.csv") == "cp1251"
    doc = load_bytes(data, "big.csv", SETTINGS)
    assert "Мой дядя самых честных правил" in doc.text and "Его пример другим наука." in doc.text
    assert "\ufffd" not in doc.text
    ascii_then_latin = ("row,plain ascii\n" * 30_000 + "café,1\n").encode("cp1252")  # the é after 450 KB
    assert text_encoding(ascii_then_latin, "late.csv") == "cp1252"  # UTF-8 is checked over the whole file
    assert text_encoding(ascii_then_latin.replace(b"\xe9", b"e"), "late.csv") == "utf-8"


@pytest.mark.parametrize("name", ["noise.txt", "noise.md", "noise.csv", "noise.html"])
def test_binary_garbage_is_refused_with_the_friendly_sentence(name: str) -> None:
    rng = random.Random(7)
    noise = bytes(rng.randrange(256) for _ in range(20_000))
    for data in (noise, noise.replace(b"\x00", b"")):
        with pytest.raises(UnsupportedFileType) as info:
            load_bytes(data, name, SETTINGS)
        message = str(info.value)
        assert "it looks like binary data, not text" in message
        assert name in message
        assert "Traceback" not in message


def test_byte_order_marks_decide_and_are_dropped() -> None:
    for encoding, bom in (("utf-16-le", codecs.BOM_UTF16_LE), ("utf-16-be", codecs.BOM_UTF16_BE),
                          ("utf-32-le", codecs.BOM_UTF32_LE), ("utf-8", codecs.BOM_UTF8)):
        assert decode_text(bom + JAPANESE.encode(encoding), "b.txt") == JAPANESE
