"""File names as they are shown and stored: the one place a name from the file system becomes text.

On Linux and macOS a file name is bytes. One that is not UTF-8 (Latin-1 names from old archives and USB sticks,
"caf\\xe9.txt") reaches Python as a str with surrogate escapes (`os.fsdecode`: "caf\\udce9.txt"), which no UTF-8
file, JSON document, database payload or web page can hold; on Windows a name can hold unpaired UTF-16 surrogates.
Such a str is exact, so it stays the way to open the file (`Path`, the records of a linked folder, which JSON keeps
as \\uXXXX escapes), but every copy of the name that is shown or stored as text goes through `display_name`: each
byte that is not UTF-8 becomes U+FFFD (�), as does each control character (a line break or a tab inside a name).
"""
from __future__ import annotations

import os
import re

REPLACEMENT = "\ufffd"  # what is shown instead of a byte or character that cannot be shown

_SURROGATE_RE = re.compile("[\ud800-\udfff]")
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029]")  # C0, DEL, C1, line and paragraph separators


def printable_text(text: str) -> str:
    """`text` (a sentence that may quote a file name) that can be written as UTF-8: each lone surrogate (a byte of a
    name that was not UTF-8) becomes U+FFFD; everything else, line breaks included, is kept."""
    return _SURROGATE_RE.sub(REPLACEMENT, text) if _SURROGATE_RE.search(text) else text


def display_name(name: str) -> str:
    """A file name (or path) as it is shown and stored: each byte that is not UTF-8 and each control character
    becomes U+FFFD, one for one ("caf\\udce9.txt" -> "caf�.txt"); other characters, right-to-left marks included,
    are kept. The name of a file that can still be opened is the str it came as, never this."""
    return _CONTROL_RE.sub(REPLACEMENT, printable_text(name))


def find_shown(path: str) -> str:
    """The exact path of the file whose path is shown as `path` (with U+FFFD where its name has bytes that are not
    UTF-8, as a client that speaks only UTF-8 gives it back): each part that does not exist as given is matched with
    the one entry of its folder shown the same way. `path` itself when it names no such file, or more than one."""
    if REPLACEMENT not in path or os.path.lexists(path):
        return path
    head, tail = os.path.split(path)
    if not tail or head == path:
        return path
    folder = find_shown(head)
    try:
        names = os.listdir(folder or ".")
    except OSError:
        return path
    same = [n for n in names if display_name(n) == tail]
    return os.path.join(folder, same[0]) if len(same) == 1 else path
