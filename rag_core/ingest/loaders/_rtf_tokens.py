"""The RTF tokenizer under rag_core.ingest.loaders.rtf: groups, control words, code pages, Unicode, destinations.

One pass over the bytes with one regular expression, in time linear in the file's size whatever its nesting: a run
of braces is one token, and groups deeper than _MAX_DEPTH only count their braces. Each group has its own state
(destination, \\uc count, code page, paragraph properties); \\'hh bytes and raw bytes are decoded together in the code
page of the document (\\ansicpg) or of the current font (\\fcharset), so double-byte characters come out whole; \\uN
characters are kept and their \\ucN fallback characters dropped. The stylesheet, the \\info title and the font table
are read; other destinations (pictures, fields' instructions, headers, footers, comments and every \\* destination not
known) are skipped. What the text means (paragraphs, tables, notes) is left to the subclass's hooks.
"""
from __future__ import annotations

import codecs
import enum
import functools
import re

from rag_core.core.deadline import Deadline
from rag_core.ingest.loaders._common import collapse_ws

_TOKEN_RE = re.compile(
    rb"\\([a-zA-Z]{1,32})(-?[0-9]{1,10})? ?"  # 1, 2: control word and its parameter (a space after it is eaten)
    rb"|\\'([0-9a-fA-F]{2})"  # 3: a byte in the current code page
    rb"|\\([^a-zA-Z'])"  # 4: control symbol
    rb"|(\{+|\}+)"  # 5: groups opening or closing
    rb"|([^\\{}]+)"  # 6: text (its line ends are not text: they are dropped)
    rb"|\\",  # a stray backslash is dropped
    re.S,
)
_HEADING_RE = re.compile(r"^heading\s*([1-9])$", re.I)
_MAX_DEPTH = 4096  # groups kept with their own state; deeper ones only count braces
_CHECK_EVERY = 4096  # tokens between deadline checks


class Dest(enum.IntEnum):
    """Where the text of a group goes."""

    MAIN = 0
    SKIP = 1
    TITLE = 2  # \info\title
    FONTS = 3  # \fonttbl: font numbers and their code pages
    STYLES = 4  # \stylesheet: style numbers and their names
    INFO = 5  # \info: skipped except its \title
    NOTE = 6  # \footnote: kept as a "[n] note" paragraph after the one it is in
    LISTTEXT = 7  # \listtext / \pntext: a bullet or number, it marks the paragraph as a list item
    UPR = 8  # \upr: skipped except its \ud (the Unicode version)


# Group state (copied on "{"): destination, \uc count, code page, destination outside \upr, paragraph style,
# outline level (-1 none), in a table, list level, in a list, hidden (\v).
D, UC, CP, OUTER, STYLE, OUTLINE, INTBL, ILVL, LIST, HID = range(10)
_SKIP_DESTS = frozenset({  # destinations whose text is not part of the document
    "colortbl", "pict", "header", "headerl", "headerr", "headerf", "footer", "footerl", "footerr", "footerf", "xe",
    "tc", "tcn", "listtable", "listoverridetable", "revtbl", "rsidtbl", "filetbl", "pgdsctbl", "latentstyles",
    "datastore", "themedata", "colorschememapping", "nonshppict", "sp", "fldinst", "bkmkstart", "bkmkend",
    "objdata", "objclass", "objname", "comment", "docvar", "userprops", "template", "nesttableprops",
    "nonesttables", "private", "txe", "atnid", "atnauthor", "annotation", "atrfstart", "atrfend", "atnref",
    "atndate", "atnparent", "blipuid", "fchars", "lchars", "pnseclvl", "pntxta", "pntxtb", "formfield", "datafield",
    "ftnsep", "ftnsepc", "ftncn", "aftnsep", "aftnsepc", "aftncn", "gridtbl", "mmathPr", "wgrffmtfilter",
    "xmlnstbl", "xmlopen", "xmlclose", "mhtmltag", "htmltag", "generator", "operator", "author", "company",
    "manager", "category", "keywords", "doccomm", "hlinkbase", "subject", "creatim", "revtim", "printim", "buptim",
    "stylesheetlatent", "listpicture", "protusertbl", "passwordhash", "fontemb", "fontfile", "falt", "panose"
})
_STARRED_READ = frozenset({"shpinst", "ud", "shptxt"})  # \* destinations whose text is part of the document
_SYMBOLS = {b"~": "\u00a0", b"_": "-", b"-": "", b"\\": "\\", b"{": "{", b"}": "}", b"\n": "\n\n", b"\r": "\n\n",
            b"|": "", b":": ""}
_WORD_CHARS = {
    "tab": "\t", "line": "\n", "emdash": "\u2014", "endash": "\u2013", "bullet": "\u2022", "lquote": "\u2018",
    "rquote": "\u2019", "ldblquote": "\u201c", "rdblquote": "\u201d", "emspace": " ", "enspace": " ",
    "qmspace": " ", "zwj": "\u200d", "zwnj": "\u200c", "zwbo": "", "zwnbo": "", "ltrmark": "", "rtlmark": "",
}
_CHARSET_CP = {0: 0, 1: 0, 2: 1252, 77: 10000, 128: 932, 129: 949, 130: 1361, 134: 936, 136: 950, 161: 1253,
               162: 1254, 163: 1258, 177: 1255, 178: 1256, 186: 1257, 204: 1251, 222: 874, 238: 1250, 254: 437,
               255: 850}  # 0: the document's code page (\ansicpg)


@functools.lru_cache(maxsize=64)
def _codec(cp: int) -> str:
    """The Python codec of a Windows code page number (cp1252 when unknown)."""
    name = "mac_roman" if cp == 10000 else f"cp{cp}"
    try:
        return codecs.lookup(name).name
    except LookupError:
        return "cp1252"


class RtfTokenizer:
    """Reads RTF tokens and calls the hooks a reader defines (text, paragraph_break, end_cell, end_row,
    note_closed, finish); keeps the font table, the heading levels of the styles and the \\info title."""

    def __init__(self, deadline: Deadline) -> None:
        self.deadline = deadline
        self.ansi_cp = 1252
        self.fonts: dict[int, int] = {}  # font number -> code page (0: the document's)
        self.deff = -1
        self.styles: dict[int, int] = {}  # style number -> heading level (0: the Title style)
        self.state: list = [Dest.MAIN, 1, "cp1252", Dest.MAIN, 0, -1, False, 0, False, False]
        self.stack: list[list] = []
        self.overflow = 0  # groups deeper than _MAX_DEPTH still open
        self.star = False  # the group began with \*
        self.first_in_group = False
        self.skip = 0  # \uN fallback characters still to drop
        self.pending = bytearray()  # bytes waiting to be decoded in the current code page
        self.list_mark = False  # the paragraph being read began with \listtext or \pntext
        self.title_out: list[str] = []
        self.font_num = -1
        self.style_entry: list | None = None  # [number, outline level, name parts, depth, is a paragraph style]

    # -- hooks ----------------------------------------------------------------------------------------------------
    def text(self, dest: Dest, text: str) -> None:
        """Text of the main document (Dest.MAIN) or of a footnote (Dest.NOTE)."""

    def paragraph_break(self) -> None:
        """\\par, \\sect, \\page or \\column."""

    def end_cell(self, nested: bool) -> None:
        """\\cell (or \\nestcell) in the main document."""

    def end_row(self, nested: bool) -> None:
        """\\row, or \\nestrow (written inside the skipped \\nesttableprops)."""

    def note_closed(self) -> None:
        """A footnote's group ended."""

    def finish(self) -> None:
        """The end of the file."""

    def title(self) -> str:
        """The \\info title."""
        return collapse_ws("".join(self.title_out))

    # -- tokens ---------------------------------------------------------------------------------------------------
    def feed(self, data: bytes) -> None:
        """Read the whole document."""
        pos, n, count = 0, len(data), 0
        handled = _HANDLED
        while pos < n:
            jump = None
            for m in _TOKEN_RE.finditer(data, pos):
                count += 1
                if not count % _CHECK_EVERY:
                    self.deadline.check()
                kind = m.lastindex
                if kind == 6:  # text
                    self._text(m.group(6))
                elif kind == 1 or kind == 2:
                    word = m.group(1)
                    if word in handled or self.skip or self.first_in_group:  # other words only format text
                        param = m.group(2)
                        if word == b"bin":
                            self._flush()
                            jump = m.end() + max(0, int(param or 0))
                            break
                        self._word(word.decode("ascii"), int(param) if param is not None else None)
                elif kind == 5:
                    self._braces(m.group(5))
                elif kind == 3:
                    self._hex(int(m.group(3), 16))
                elif kind == 4:
                    self._symbol(m.group(4))
            if jump is None:
                break
            pos = jump
        self._flush()
        self.finish()

    def _text(self, raw: bytes) -> None:
        if b"\n" in raw or b"\r" in raw:
            raw = raw.replace(b"\r", b"").replace(b"\n", b"")
            if not raw:
                return
        if self.skip:
            dropped = min(self.skip, len(raw))
            raw, self.skip = raw[dropped:], self.skip - dropped
            if not raw:
                return
        self.first_in_group = False
        if self.state[D] in (Dest.SKIP, Dest.INFO, Dest.LISTTEXT, Dest.UPR, Dest.FONTS):
            return
        self.pending += raw

    def _hex(self, value: int) -> None:
        if self.skip:
            self.skip -= 1
            return
        self.first_in_group = False
        if self.state[D] not in (Dest.SKIP, Dest.INFO, Dest.LISTTEXT, Dest.UPR, Dest.FONTS):
            self.pending.append(value)

    def _flush(self) -> None:
        """Decode the bytes read so far in the current code page."""
        if self.pending:
            self._emit(bytes(self.pending).decode(self.state[CP], "replace"))
            self.pending.clear()

    def _emit(self, text: str) -> None:
        """Text for the current destination."""
        dest = self.state[D]
        if dest == Dest.MAIN or dest == Dest.NOTE:
            self.text(dest, text)
        elif dest == Dest.TITLE:
            self.title_out.append(text)
        elif dest == Dest.STYLES and self.style_entry is not None:
            self.style_entry[2].append(text)

    def _braces(self, run: bytes) -> None:
        """A run of "{" or of "}"; past _MAX_DEPTH groups only their count is kept, so any nesting is linear."""
        self._flush()
        self.skip = 0
        count = len(run)
        if run[0] == 0x7B:  # "{"
            room = max(0, _MAX_DEPTH - len(self.stack)) if not self.overflow else 0
            for _ in range(min(count, room)):
                self._open()
            self.overflow += count - min(count, room)
            return
        closed = min(count, self.overflow)
        self.overflow -= closed
        for _ in range(min(count - closed, len(self.stack))):  # an unbalanced "}" has nothing to close
            self._close()

    def _open(self) -> None:
        self.stack.append(self.state)
        self.state = list(self.state)
        self.star = False
        self.first_in_group = True
        if self.state[D] == Dest.STYLES and self.style_entry is None:
            self.style_entry = [0, -1, [], len(self.stack), True]

    def _close(self) -> None:
        closing = self.state
        self.state = self.stack.pop()
        if closing[D] == Dest.NOTE and self.state[D] != Dest.NOTE:
            self.note_closed()
        if self.style_entry is not None and len(self.stack) < self.style_entry[3]:
            self._end_style()

    def _symbol(self, sym: bytes) -> None:
        if sym == b"*":
            self.star = True
            return
        if sym == b"'":  # an invalid \'xx: drop it
            return
        if self.skip:
            self.skip -= 1
            return
        self._flush()
        text = _SYMBOLS.get(sym)
        if text == "\n\n":
            self.paragraph_break()
        elif text:
            self._emit(text)

    def _word(self, word: str, param: int | None) -> None:
        if self.skip:
            self.skip -= 1
            if word not in ("u", "uc"):
                return
        self._flush()
        state = self.state
        if self.first_in_group:
            self.first_in_group = False
            if self._destination(word):
                return
        if word == "par" or word == "sect" or word == "page" or word == "column":
            self.paragraph_break()
        elif word in _WORD_CHARS:
            self._emit(_WORD_CHARS[word])
        elif word == "u" and param is not None:
            self._emit(chr(param + 65536 if param < 0 else param) if -32768 <= param <= 1114111 else "\ufffd")
            self.skip = state[UC]
        elif word == "uc" and param is not None:
            state[UC] = max(0, min(param, 16))
        elif word == "cell" or word == "nestcell":
            self.end_cell(word == "nestcell")
        elif word == "row" or word == "nestrow":
            self.end_row(word == "nestrow")
        elif word in _PARA_WORDS:
            self._para_word(word, param)
        elif word in _CHAR_WORDS:
            self._char_word(word, param)

    def _destination(self, word: str) -> bool:
        """Handle a control word that opens its group; True when it was a destination."""
        state = self.state
        if word == "fonttbl":
            state[D] = Dest.FONTS
        elif word == "stylesheet":
            state[D] = Dest.STYLES
            self.style_entry = None
        elif word == "info":
            state[D] = Dest.INFO
        elif word == "title" and state[D] == Dest.INFO:
            state[D] = Dest.TITLE
        elif word == "footnote":
            state[D] = Dest.NOTE if state[D] == Dest.MAIN else Dest.SKIP
        elif word in ("listtext", "pntext"):
            state[D] = Dest.LISTTEXT
            self.list_mark = True
        elif word == "upr":
            state[OUTER], state[D] = state[D], Dest.UPR
        elif word == "ud" and state[D] == Dest.UPR:
            state[D] = state[OUTER]
        elif word in ("shpinst", "shptxt", "field", "fldrslt", "object", "result"):
            return False  # transparent: their text (or that of their subgroups) is read
        elif self.star and word not in _STARRED_READ or word in _SKIP_DESTS:
            state[D] = Dest.SKIP
        else:
            return False
        return True

    def _para_word(self, word: str, param: int | None) -> None:
        state = self.state
        if word == "pard":
            state[STYLE], state[OUTLINE], state[INTBL], state[ILVL], state[LIST] = 0, -1, False, 0, False
        elif word == "s":
            if state[D] == Dest.STYLES and self.style_entry is not None:
                self.style_entry[0] = param or 0
            else:
                state[STYLE] = param or 0
        elif word in ("cs", "ds", "ts") and self.style_entry is not None and state[D] == Dest.STYLES:
            self.style_entry[4] = False
        elif word == "outlinelevel":
            level = param if param is not None and 0 <= param < 9 else -1
            if state[D] == Dest.STYLES and self.style_entry is not None:
                self.style_entry[1] = level
            else:
                state[OUTLINE] = level
        elif word == "intbl":
            state[INTBL] = True
        elif word == "itap":
            state[INTBL] = bool(param)
        elif word == "ls":
            state[LIST] = True
        elif word == "ilvl":
            state[ILVL] = max(0, min(param or 0, 8))

    def _char_word(self, word: str, param: int | None) -> None:
        state = self.state
        if word == "f" and param is not None:
            if state[D] == Dest.FONTS:
                self.font_num = param
                self.fonts.setdefault(param, 0)
            else:
                state[CP] = self._font_codec(param)
        elif word == "fcharset" and state[D] == Dest.FONTS and self.font_num >= 0:
            self.fonts[self.font_num] = _CHARSET_CP.get(param or 0, 0)
        elif word == "cpg" and state[D] == Dest.FONTS and self.font_num >= 0 and param:
            self.fonts[self.font_num] = param
        elif word == "ansicpg" and param:
            self.ansi_cp = param
            state[CP] = _codec(param)
        elif word == "mac":
            self.ansi_cp, state[CP] = 10000, _codec(10000)
        elif word in ("pc", "pca"):
            self.ansi_cp = 437 if word == "pc" else 850
            state[CP] = _codec(self.ansi_cp)
        elif word == "deff" and param is not None:
            self.deff = param
        elif word == "plain":
            state[CP], state[HID] = self._font_codec(self.deff), False
        elif word == "v":
            state[HID] = param != 0

    def _font_codec(self, font: int) -> str:
        cp = self.fonts.get(font, 0)
        return _codec(cp or self.ansi_cp)

    # -- structure ------------------------------------------------------------------------------------------------
    def _end_style(self) -> None:
        entry, self.style_entry = self.style_entry, None
        if entry is None or not entry[4]:
            return
        name = collapse_ws("".join(entry[2])).rstrip(";").strip()
        if entry[1] >= 0:
            self.styles[entry[0]] = entry[1] + 1
        elif m := _HEADING_RE.match(name):
            self.styles[entry[0]] = int(m.group(1))
        elif name.lower() == "title":
            self.styles[entry[0]] = 0


_PARA_WORDS = frozenset({"pard", "s", "cs", "ds", "ts", "outlinelevel", "intbl", "itap", "ls", "ilvl"})
_CHAR_WORDS = frozenset({"f", "fcharset", "cpg", "ansicpg", "mac", "pc", "pca", "deff", "plain", "v"})
# Control words read anywhere in a group (the others matter only as the first word of a group, or not at all).
_HANDLED = frozenset(w.encode() for w in (*_PARA_WORDS, *_CHAR_WORDS, *_WORD_CHARS, "par", "sect", "page", "column",
                                          "u", "uc", "cell", "nestcell", "row", "nestrow", "bin"))
