"""rag_core.core.names: a file name as it is shown and stored, and the file found again from that."""
from __future__ import annotations

import os

import pytest

from rag_core.core.names import display_name, find_shown, printable_text


def test_bytes_that_are_not_utf8_become_replacement_characters():
    name = os.fsdecode(b"caf\xe9 r\xe9sum\xe9.txt")
    assert display_name(name) == "caf\ufffd r\ufffdsum\ufffd.txt"
    assert display_name(name).encode("utf-8")
    assert display_name("\ud800x") == "\ufffdx"  # a Windows name's unpaired UTF-16 surrogate


def test_controls_are_replaced_and_other_characters_kept():
    assert display_name("a\nb\tc\x1b[31m\x85.txt") == "a\ufffdb\ufffdc\ufffd[31m\ufffd.txt"
    assert display_name("\u200f\u05e9\u05dc\u05d5\u05dd \u00e9t\u00e9 \U0001f600.txt") == \
        "\u200f\u05e9\u05dc\u05d5\u05dd \u00e9t\u00e9 \U0001f600.txt"
    assert printable_text("line one\nline two caf\udce9") == "line one\nline two caf\ufffd"
    assert printable_text("plain") == "plain"


@pytest.mark.skipif(os.name == "nt", reason="Windows file names are UTF-16, never bytes")
def test_find_shown_gives_back_the_real_name(tmp_path):
    root = os.fsencode(tmp_path)
    os.makedirs(os.path.join(root, b"r\xe9sum\xe9s"))
    real = os.path.join(root, b"r\xe9sum\xe9s", b"caf\xe9.txt")
    open(real, "wb").close()
    shown = str(tmp_path / "r\ufffdsum\ufffds" / "caf\ufffd.txt")
    assert find_shown(shown) == os.fsdecode(real)
    assert find_shown(str(tmp_path / "plain.txt")) == str(tmp_path / "plain.txt")  # no U+FFFD: as given
    open(os.path.join(root, b"r\xe9sum\xe9s", b"caf\xe8.txt"), "wb").close()  # two names shown alike: not guessed
    assert find_shown(shown) == shown
    assert find_shown(str(tmp_path / "none" / "x\ufffd.txt")) == str(tmp_path / "none" / "x\ufffd.txt")
