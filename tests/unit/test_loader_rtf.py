"""RTF (rag_core.ingest.loaders.rtf): paragraphs, headings from heading styles or outline levels, lists, tables,
code pages and Unicode, destinations skipped, and time linear in the file's size whatever its nesting."""
from __future__ import annotations

import itertools
import time
from pathlib import Path

import pytest

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, IngestTimedOut, NoText
from rag_core.ingest.loaders._common import Extracted
from rag_core.ingest.loaders.rtf import load_rtf, read_rtf

DOCS = Path(__file__).resolve().parents[1] / "fixtures" / "documents"
MEMO = "rtf_memo_headings-list-table.rtf"
PLAIN = "rtf_plain_no-headings.rtf"
SETTINGS = Settings()
HEAD = rb"{\rtf1\ansi\ansicpg1252\deff0{\fonttbl{\f0 Arial;}{\f1\fcharset204 Arial Cyr;}}"


def read(name: str, data: bytes | None = None) -> Extracted:
    data = (DOCS / name).read_bytes() if data is None else data
    return read_rtf(data, name, SETTINGS, Deadline.never(name))


def rtf(body: bytes, head: bytes = HEAD) -> bytes:
    return head + body + b"}"


def sections(ex: Extracted) -> list[tuple[tuple[str, ...], str]]:
    return [(s.heading_path, ex.text[s.char_start:s.char_end]) for s in ex.sections]


# --------------------------------------------------------------------------- the memo
def test_memo_headings_are_sections_under_the_info_title() -> None:
    ex = read(MEMO)
    assert ex.title == "Memo: moving the Lyon office"  # \info\title
    assert [p for p, _ in sections(ex)] == [
        ("Moving the Lyon office",),  # the Title style: a section of its own
        ("Summary",), ("Summary", "Who does what"), ("Summary", "Schedule"),
    ]


def test_memo_paragraphs_lists_table_and_footnote() -> None:
    text = read(MEMO).text
    assert text.startswith("Moving the Lyon office\n\nSummary\n\nThe team moves to the new café-library building on "
                           "3 June 2024. The move costs 18 500 € in total, paid from the 2024 facilities budget.\n\n"
                           "[1] Quote from Déménagements Rhône, valid until 30 April.\n\n"
                           "Everyone keeps their phone number; desks are assigned by team.\n\n")
    assert ("Who does what\n\n- Claire: the removal company and the keys\n- Marc: network and printers\n"
            "  - the printers move on Friday\n\n") in text
    assert "Schedule\n\nDay | Task | Owner\n31 May | Pack the archive | Marc\n3 June | Move day | Claire\n\n" in text
    # A field's shown text is kept, its instruction dropped; pictures, fonts, colours and styles are not text.
    assert "Details are on the intranet page." in text
    for absent in ("HYPERLINK", "intranet.example", "89504e47", "0100090000", "Calibri", "heading 1", "Riched20",
                   "Claire Dubois", "·"):
        assert absent not in text
    # \'hh in the font's code page (Cyrillic, \fcharset204) and in the document's (\ansicpg1252); \endash.
    assert text.endswith("Всем спасибо. Merci à tous – Claire")


def test_rtf_without_headings_is_paragraphs_in_one_section() -> None:
    ex = read(PLAIN)
    assert ex.title == "rtf_plain_no-headings"
    assert sections(ex) == [((), "First paragraph of a note without headings. It has two sentences.\n\n"
                                 "Second paragraph, with an accent: naïve résumé.\n\nThird paragraph.")]


def test_rtf_is_read_in_the_reader_process_like_in_this_one() -> None:
    assert load_rtf((DOCS / MEMO).read_bytes(), MEMO, SETTINGS) == read(MEMO)


# --------------------------------------------------------------------------- headings, characters, destinations
def test_outline_levels_and_heading_style_names_make_headings() -> None:
    data = rtf(rb"{\stylesheet{\s0 Normal;}{\s3\sbasedon0 Heading 2;}}"
               rb"\pard\outlinelevel0 Part one\par\pard Body one.\par"
               rb"\pard\s3 Detail\par\pard Body two.\par"
               rb"\pard\outlinelevel9 Not a heading (level 9 is body text)\par")
    ex = read("h.rtf", data)
    assert ex.title == "Part one"  # no \info title: the first heading
    assert [p for p, _ in sections(ex)] == [("Part one",), ("Part one", "Detail")]
    assert ex.text.endswith("Body two.\n\nNot a heading (level 9 is body text)")


def test_unicode_escapes_with_their_fallbacks_skipped() -> None:
    data = rtf(rb"\pard\uc1 Euro \u8364? and \uc2 yen \u165\'a5\'a5 and \uc0 pound \u163 ; "
               rb"emoji \uc1\u-10179?\u-8704? and {\uc3 \u8482 TM}\u8482? ok\par")
    # The space after \u8482 ends the control word; the group's end ends the skipping of "TM".
    assert read("u.rtf", data).text == "Euro € and yen ¥ and pound £; emoji 😀 and ™™ ok"


def test_binary_data_and_ignorable_destinations_are_skipped() -> None:
    data = rtf(rb"\pard Before {\*\unknowndest hidden {nested} text}{\pict\bin8 {}\}{\\{}middle "
               rb"{\*\bkmkstart mark}{\header Page header}{\footer Page 1}after.\par")
    assert read("b.rtf", data).text == "Before middle after."


def test_nested_table_is_flattened_into_its_cell_as_in_word() -> None:
    data = rtf(rb"\trowd\cellx2000\cellx4000\pard\intbl Key\cell Value\cell\row"
               rb"\trowd\cellx2000\cellx4000\pard\intbl Pairs\cell \pard\intbl\itap2 x\nestcell 1\nestcell"
               rb"{\*\nesttableprops\trowd\cellx1000\cellx2000\nestrow}{\nonesttables\par}"
               rb"\pard\intbl\itap2 y\nestcell 2\nestcell{\*\nesttableprops\trowd\cellx1000\cellx2000\nestrow}"
               rb"{\nonesttables\par}\pard\intbl\itap1\cell\row\pard After.\par")
    assert read("n.rtf", data).text == "Key | Value\nPairs | x, 1; y, 2\n\nAfter."


def test_hidden_text_is_kept_and_reported() -> None:
    ex = read("v.rtf", rtf(rb"\pard Shown {\v secret instructions} shown again.\par"))
    assert ex.text == "Shown secret instructions shown again."
    assert ex.hidden == ("secret instructions",)


def test_not_rtf_and_empty_rtf() -> None:
    with pytest.raises(CorruptFile) as e:
        load_rtf(b"PK\x03\x04 not rtf", "x.rtf", SETTINGS)
    assert str(e.value).startswith("“x.rtf”: the file is damaged and could not be read (it does not start like an RTF "
                                   "document).")
    with pytest.raises(NoText):
        read("e.rtf", rtf(rb"{\info{\title Only a title}}{\pict 0102}\par"))


# --------------------------------------------------------------------------- bounds
def test_deep_nesting_is_linear_and_unbalanced_braces_are_harmless() -> None:
    data = rtf(b"\\pard Start " + b"{" * 100_000 + b"deep" + b"}" * 100_000 + b" end.\\par" + b"}" * 50)
    start = time.process_time()
    assert read("deep.rtf", data).text == "Start deep end."
    # 10 MB of unclosed groups: only their count is kept.
    assert read("open.rtf", rtf(b"\\pard " + b"{" * 10_000_000 + b"words")).text == "words"
    cpu = time.process_time() - start
    assert cpu < 2.0, f"{cpu:.2f} s of CPU"


def test_a_10_mb_file_is_read_in_time_linear_in_its_size() -> None:
    para = (rb"\pard\plain\f0\fs22 The caf\'e9 on the {\b ground} floor costs 5 \u8364? per day.\par" + b"\r\n")
    picture = b"{\\pict\\pngblip\r\n" + (b"89504e470d0a1a0a" * 8 + b"\r\n") * 7000 + b"}"  # 128 hex digits a line
    one_mb = para * 2000 + picture  # about 160 KB of text and a 900 KB picture per megabyte, as Word writes them
    chapters = b"".join(rb"\pard\outlinelevel0 Chapter %d\par" % i + one_mb for i in range(10))
    data = rtf(chapters)
    assert len(data) > 10_000_000
    start = time.process_time()
    ex = read("big.rtf", data)
    cpu = time.process_time() - start
    assert len(ex.sections) == 10 and ex.text.count("The café") == 20_000
    assert cpu < 15.0, f"{cpu:.2f} s of CPU for {len(data):,} bytes"


def test_deadline_is_checked_while_reading() -> None:
    ticks = itertools.count()
    deadline = Deadline(1.0, "t.rtf", clock=lambda: next(ticks) * 0.5)  # passes on the second look
    with pytest.raises(IngestTimedOut):
        read_rtf(rtf(b"\\pard word\\par" * 10_000), "t.rtf", SETTINGS, deadline)
