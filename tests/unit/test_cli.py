"""The command line's argument bounds and what it prints to a terminal (no library needed here; the commands'
output over a real library is in tests/integration/test_cli_output.py)."""
from __future__ import annotations

import json
import os

import pytest

from rag_core.adapters.cli.main import build_parser

# Every character a terminal would act on instead of showing: bidi overrides, embeddings, isolates and marks, C0
# (but newline and tab), DEL and C1.
HOSTILE = ["\u202a", "\u202b", "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u200e",
           "\u200f", "\u061c", "\x00", "\x07", "\x08", "\x1b", "\x7f", "\x85", "\x9b", "\r", "\x0b", "\x0c"]


@pytest.mark.parametrize(("argv", "bad"), [
    (["search", "q", "-k", "-5"], "-5"), (["search", "q", "-k", "0"], "0"), (["search", "q", "-k", "51"], "51"),
    (["search", "q", "-k", "two"], "two"), (["search", "q", "-k", "2.5"], "2.5"),
    (["ask", "q?", "-k", "0"], "0"), (["ask", "q?", "-k", "1000"], "1000")])
def test_k_out_of_bounds_is_a_one_line_usage_error(argv, bad, capsys):
    with pytest.raises(SystemExit) as exited:
        build_parser().parse_args(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith("docchat") and "error: argument -k:" in err
    assert f"“{bad}”" in err and "from 1 to 50" in err, err


def test_k_within_bounds_is_accepted():
    parser = build_parser()
    assert parser.parse_args(["search", "q", "-k", "1"]).k == 1
    assert parser.parse_args(["search", "q", "-k", "50"]).k == 50
    assert parser.parse_args(["search", "q"]).k == 5
    assert parser.parse_args(["ask", "q?", "-k", "7"]).k == 7 and parser.parse_args(["ask", "q?"]).k is None


def test_terminal_text_neutralises_every_control_and_bidi_character():
    from rag_core.adapters.cli.common import REPLACEMENT, terminal_text

    spoof = "\u202eexe.cod"  # shows as "doc.exe" in a terminal
    assert terminal_text(spoof) == REPLACEMENT + "exe.cod"
    for ch in HOSTILE:
        for newlines in (False, True):
            shown = terminal_text(f"a{ch}b", newlines=newlines)
            assert ch not in shown and shown.startswith("a") and shown.endswith("b"), (repr(ch), shown)
    assert terminal_text("one\ntwo\tthree") == "one two three"  # one line where one line is printed
    assert terminal_text("one\r\ntwo\n\tthree", newlines=True) == "one\ntwo\n\tthree"
    assert terminal_text("line\x0cbreak\u2028here") == "line break here"
    ordinary = "Zürich — “quoted” 東京 עברית العربية 🙂 naïve"  # right-to-left script itself is fine
    assert terminal_text(ordinary) == ordinary


def test_json_text_escapes_them_but_keeps_the_data():
    from rag_core.adapters.cli.common import json_text

    payload = {"title": "".join(HOSTILE) + "\u202eexe.cod", "ok": "Zürich 東京 עברית"}
    text = json_text(payload)
    assert not any(ch in text for ch in HOSTILE) and "Zürich 東京 עברית" in text
    assert "\\u202e" in text and json.loads(text) == payload


@pytest.mark.parametrize(("extra", "words"), [
    (["--allow-dir", "."], "only with --allow-writes"), (["--allow-writes", "--allow-dir", "no/such/folder"], "no such"),
    (["--allow-writes", "--allow-dir", __file__], "not a folder"),
    (["--allow-writes", "--allow-dir", "/proc"], "system folder")])
def test_mcp_allow_dir_is_checked_before_serving(extra, words, capsys):
    from rag_core.adapters.cli.main import main

    if extra[-1] == "/proc" and not os.path.isdir("/proc"):
        pytest.skip("no /proc on this platform")
    assert main(["mcp", *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("Error: --allow-dir") and words in err and "\n" not in err, err


def test_ask_prints_the_checked_answer_when_it_replaced_the_draft():
    from rag_core.adapters.cli.answers import checked_reply
    from rag_core.core.models import Answer

    draft = "Brussels is the capital [1]. The moon is made of cheese [1]."
    cut = Answer("Brussels is the capital [1].", "model", incomplete=True, extra={"ended": "length"})
    assert checked_reply(draft, cut) == "Brussels is the capital [1]."
    withheld = Answer("Closest passages: …", "quotes", extra={"withheld_text": draft})
    assert checked_reply(draft, withheld) == "Closest passages: …"
    finished = Answer("Brussels is the capital [1].", "model", extra={"ended": "finished"})
    assert checked_reply("Brussels is the capital  [1].", finished) is None  # the draft stands
    assert checked_reply(draft, finished) is None  # a finished answer is shown as written, marked where unbacked
