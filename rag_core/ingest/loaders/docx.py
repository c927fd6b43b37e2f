"""Word (.docx): zip-bomb guard, body blocks in document order, heading styles, lists and readable tables."""
from __future__ import annotations

import io
import logging
import re
import weakref
import zipfile
from collections.abc import Iterator
from typing import Any

import docx
from docx.opc.exceptions import OpcError
from docx.text.paragraph import Paragraph
from lxml import etree

from rag_core.core.config import Settings
from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, NoText, TooManyPassages, UnsupportedFileType
from rag_core.ingest.chunking import MAX_PASSAGES
from rag_core.ingest.loaders._archive import check_inflated, check_members
from rag_core.ingest.loaders._common import (
    Extracted,
    HeadingStack,
    build_sections,
    choose_title,
    clean_text,
    collapse_ws,
    reads_as_text,
)
from rag_core.ingest.loaders._common import add_lines as _add_lines
from rag_core.ingest.loaders._common import flatten_cell as _flatten
from rag_core.ingest.loaders._isolated import run_isolated

log = logging.getLogger(__name__)

_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_P, _TBL, _TR, _TC, _SDT = _W + "p", _W + "tbl", _W + "tr", _W + "tc", _W + "sdt"
_SDT_CONTENT, _CUSTOM_XML = _W + "sdtContent", _W + "customXml"
_T, _TAB, _BR, _CR, _NO_BREAK_HYPHEN = _W + "t", _W + "tab", _W + "br", _W + "cr", _W + "noBreakHyphen"
_MC = "{http://schemas.openxmlformats.org/markup-compatibility/2006}"
# Paragraph/run properties (their w:tab are tab stops), deleted or moved-away text, text boxes
# (anchored shapes, not part of the paragraph's flow) and the duplicate fallback of alternate content.
_SKIP_IN_TEXT = frozenset({
    _W + "pPr", _W + "rPr", _W + "del", _W + "moveFrom", _W + "txbxContent", _MC + "Fallback",
})
_HEADING_STYLE_RE = re.compile(r"^heading\s*([1-9])$")
_R, _RPR = _W + "r", _W + "rPr"
_HIDDEN_HALF_POINTS = 3  # w:sz is in half-points: text of 1.5 pt or less cannot be read
_MAX_HIDDEN = 2000  # hidden runs kept per document
_MB = 1024 * 1024
_STYLE_NAMES: weakref.WeakKeyDictionary[Any, dict[str | None, list[str]]] = weakref.WeakKeyDictionary()
_CHARS_PER_TOKEN = 10  # as rag_core.ingest.chunking: a text longer than MAX_PASSAGES * budget * 10 cannot be indexed


def check_docx_zip(data: bytes, file_name: str, settings: Settings) -> None:
    """Refuse archives that would unpack to more than settings.max_docx_uncompressed_mb, or hold more members than
    a document has, without unpacking (the real unpacked size is checked by `read_docx`, see _archive)."""
    check_members(data, file_name, "Word document")
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, zipfile.LargeZipFile, ValueError, OSError) as e:
        raise CorruptFile(file_name, "the Word file's ZIP container is broken") from e
    total = sum(max(info.file_size, 0) for info in infos)
    packed = sum(max(info.compress_size, 0) for info in infos)
    limit = settings.ingest.max_docx_uncompressed_mb
    log.debug("%s: %d zip entries, %d bytes packed, %d unpacked", file_name, len(infos), packed, total)
    if total > limit * _MB:
        ratio = total / max(packed, 1)
        log.warning("refusing %s: expands to %d bytes (ratio %.0f:1)", file_name, total, ratio)
        raise CorruptFile(
            file_name,
            f"it expands to more than {limit} MB when unpacked, more than DocChat allows for a Word file",
        )
    if "word/document.xml" not in {info.filename for info in infos}:
        raise CorruptFile(file_name, "the ZIP archive has no word/document.xml, so it is not a Word document")


def load_docx(data: bytes, file_name: str, settings: Settings, deadline: Deadline | None = None) -> Extracted:
    """Extract a .docx: paragraphs and tables in body order; Heading N / Title styles become sections; read in a
    child process that is stopped at `deadline` (IngestTimedOut), see rag_core.ingest.loaders._isolated."""
    check_docx_zip(data, file_name, settings)
    return run_isolated(read_docx, (data, file_name, settings), deadline or Deadline.never(file_name), "Word")


def read_docx(data: bytes, file_name: str, settings: Settings, deadline: Deadline) -> Extracted:
    """`load_docx` in this process, checking `deadline` between blocks."""
    check_docx_zip(data, file_name, settings)
    check_inflated(data, file_name, settings.ingest.max_docx_uncompressed_mb, "Word document", deadline)
    try:
        document = docx.Document(io.BytesIO(data))
    except ValueError as e:  # e.g. a macro-enabled document or a template: a different content type
        raise UnsupportedFileType(
            file_name, "it is a Word template or macro-enabled document; save it as a normal .docx"
        ) from e
    except (OpcError, KeyError, etree.LxmlError, zipfile.BadZipFile, OSError) as e:
        raise CorruptFile(file_name, "the Word document could not be parsed") from e

    parts: list[str] = []
    heads: list[tuple[int, tuple[str, ...]]] = []
    stack = HeadingStack()
    length = 0
    prev_was_list = False
    first_title = first_heading = ""
    max_chars = MAX_PASSAGES * settings.ingest.chunk_tokens * _CHARS_PER_TOKEN
    for i, (kind, text, level) in enumerate(_blocks(document)):
        if not i % 256:
            deadline.check()
            if length > max_chars:  # more than chunking takes: refused now rather than after the whole body
                raise TooManyPassages(file_name, MAX_PASSAGES)
        is_list = kind == "list"
        if parts:
            sep = "\n" if (is_list and prev_was_list) else "\n\n"
            parts.append(sep)
            length += len(sep)
        if level is not None:
            label = collapse_ws(text)
            if level == 0:  # "Title" style: its own section, not a prefix of the headings below
                stack = HeadingStack()
                path: tuple[str, ...] = (label,)
                first_title = first_title or label
            else:
                path = stack.push(level, label)
                first_heading = first_heading or label
            heads.append((length, path))
        parts.append(text)
        length += len(text)
        prev_was_list = is_list
    text = "".join(parts)
    if not text.strip():
        raise NoText(file_name)
    core_title = ""
    try:
        core_title = collapse_ws(document.core_properties.title or "")
    except (KeyError, ValueError, etree.LxmlError) as e:
        log.info("%s: unreadable core properties (%s)", file_name, e)
    title = choose_title(file_name, core_title, first_title, heading=first_heading)
    hidden = _hidden_runs(document.element.body)
    if hidden:
        log.info("%s: %d runs of hidden text (hidden, white or tiny)", file_name, len(hidden))
    return Extracted(text, build_sections(text, heads), title, hidden=hidden)


def _run_hidden(rpr: etree._Element | None) -> bool:
    """A run a reader does not see: hidden (w:vanish, run.font.hidden in python-docx), white, or tiny. Only the run's
    own properties are read, not those its character style inherits."""
    if rpr is None:
        return False
    vanish = rpr.find(_W + "vanish")
    if vanish is not None and vanish.get(_W + "val", "true") not in ("0", "false", "off"):
        return True
    color = (rpr.find(_W + "color").get(_W + "val", "") if rpr.find(_W + "color") is not None else "").upper()
    if color in ("FFFFFF", "FEFEFE", "FDFDFD"):
        return True
    size = rpr.find(_W + "sz")
    val = size.get(_W + "val", "") if size is not None else ""
    return val.isdigit() and int(val) <= _HIDDEN_HALF_POINTS


def _hidden_runs(body: etree._Element) -> tuple[str, ...]:
    """The text of hidden runs, consecutive ones of a paragraph joined (rag_core.injection.detect counts them as a cue)."""
    out: list[str] = []
    for p in body.iter(_P):
        current: list[str] = []
        for r in p.iter(_R):
            if _run_hidden(r.find(_RPR)):
                current.append("".join(t.text or "" for t in r.iter(_T)))
            elif current:
                out.append(collapse_ws("".join(current)))
                current = []
        if current:
            out.append(collapse_ws("".join(current)))
        if len(out) >= _MAX_HIDDEN:
            break
    return tuple(h for h in out if h)[:_MAX_HIDDEN]


def _blocks(document: docx.document.Document) -> Iterator[tuple[str, str, int | None]]:
    """(kind, text, heading level or None) for each non-empty body block, in document order."""
    for el in _block_elements(document.element.body):
        if el.tag == _P:
            para = Paragraph(el, document)
            if _is_toc(para):
                continue
            text = _paragraph_text(para)
            if text:
                yield _classify(para, text)
            for box_text in _text_box_texts(el, document):
                yield "para", box_text, None
        else:
            lines = _table_lines(el, document)
            if lines:
                yield "table", "\n".join(lines), None


def _classify(para: Paragraph, text: str) -> tuple[str, str, int | None]:
    level = _heading_level(para)
    if level is not None:
        return "heading", text, level
    if _is_list_item(para):
        return "list", "  " * _list_level(para) + "- " + text, None
    return "para", text, None


def _text_box_texts(p: etree._Element, document: docx.document.Document) -> Iterator[str]:
    """Text of text boxes anchored in paragraph `p` (each box once: the fallback copy is skipped)."""
    for box in p.iter(_W + "txbxContent"):
        if any(a.tag == _MC + "Fallback" for a in box.iterancestors()):
            continue
        for el in _block_elements(box):
            if el.tag == _P:
                text = _paragraph_text(Paragraph(el, document))
            else:
                text = "\n".join(_table_lines(el, document))
            if text:
                yield text


def _block_elements(parent: etree._Element) -> Iterator[etree._Element]:
    """w:p and w:tbl children of `parent`, looking inside content controls; skips a TOC content control."""
    for child in parent.iterchildren():
        if child.tag in (_P, _TBL):
            yield child
        elif child.tag == _SDT:
            if _is_toc_sdt(child):
                continue
            content = child.find(_SDT_CONTENT)
            if content is not None:
                yield from _block_elements(content)
        elif child.tag == _CUSTOM_XML:
            yield from _block_elements(child)


def _is_toc_sdt(sdt: etree._Element) -> bool:
    gallery = sdt.find(f"{_W}sdtPr/{_W}docPartObj/{_W}docPartGallery")
    return gallery is not None and (gallery.get(_W + "val") or "").lower().startswith("table of contents")


def _style_names(para: Paragraph) -> list[str]:
    """The paragraph's style name and the names of the styles it is based on (lower case), looked up once per style
    and document: python-docx scans every style to find the default one (7 ms a paragraph; 280 MB took hours)."""
    known = _STYLE_NAMES.setdefault(para.part, {})
    style_id = para._p.style
    if style_id not in known:
        known[style_id] = _look_up_style_names(para)
    return known[style_id]


def _look_up_style_names(para: Paragraph) -> list[str]:
    names: list[str] = []
    try:
        style = para.style
    except (KeyError, ValueError) as e:
        log.debug("paragraph style lookup failed: %s", e)
        return names
    while style is not None and len(names) < 10:
        names.append((style.name or "").lower())
        style = style.base_style
    return names


def _is_toc(para: Paragraph) -> bool:
    names = _style_names(para)
    return bool(names) and (names[0].startswith("toc") or names[0] == "table of contents")


def _heading_level(para: Paragraph) -> int | None:
    """1-9 for Heading N styles (or an outline level), 0 for the Title style, None for body text."""
    names = _style_names(para)
    if names and names[0] == "title":
        return 0
    for name in names:
        if m := _HEADING_STYLE_RE.match(name):
            return int(m.group(1))
    ppr = para._p.pPr
    outline = ppr.find(_W + "outlineLvl") if ppr is not None else None
    if outline is not None:
        try:
            value = int(outline.get(_W + "val", "9"))
        except ValueError:
            return None
        # An outline level without a heading style: a list item or a sentence set so stays body text.
        return value + 1 if 0 <= value < 9 and not reads_as_text(collapse_ws(para.text)) else None
    return None


def _is_list_item(para: Paragraph) -> bool:
    ppr = para._p.pPr
    if ppr is not None and ppr.numPr is not None:
        return True
    return any("list" in name for name in _style_names(para)[:1])


def _list_level(para: Paragraph) -> int:
    ppr = para._p.pPr
    num_pr = ppr.numPr if ppr is not None else None
    ilvl = getattr(num_pr, "ilvl", None)  # python-docx types numPr loosely (ZeroOrOne)
    if ilvl is not None and ilvl.val is not None:
        return max(0, min(int(ilvl.val), 8))
    return 0


def _paragraph_text(para: Paragraph) -> str:
    """Visible paragraph text, cleaned; line breaks inside the paragraph are kept as \\n.

    Unlike python-docx's Paragraph.text this includes tracked insertions (w:ins) and skips
    deletions and the fallback copy of alternate content.
    """
    parts: list[str] = []
    _collect_text(para._p, parts)
    lines = (line.strip() for line in clean_text("".join(parts)).split("\n"))
    return "\n".join(line for line in lines if line)


def _collect_text(el: etree._Element, out: list[str]) -> None:
    for child in el:
        tag = child.tag
        if not isinstance(tag, str) or tag in _SKIP_IN_TEXT:
            continue
        if tag == _T:
            out.append(child.text or "")
        elif tag == _TAB:
            out.append("\t")
        elif tag in (_BR, _CR):
            out.append("\n")
        elif tag == _NO_BREAK_HYPHEN:
            out.append("-")
        else:
            _collect_text(child, out)


def _table_lines(tbl: etree._Element, document: docx.document.Document) -> list[str]:
    """A table as readable lines: "cell | cell | cell" per row; merged cells appear once.

    A one-cell row (a table used as a frame) yields its content lines in order, nested tables as
    their own rows; a nested table inside a multi-cell row is flattened into its cell as "a, b; c, d".
    A run of "cell | cell" lines is set off from other lines by an empty line, so each table's rows form
    one block of text that starts with its header row.
    """
    lines: list[str] = []
    in_rows = False  # is the last line a row of this table?
    for tr in tbl.iterchildren(_TR):
        cells = [items for items in (_cell_items(tc, document) for tc in _row_cells(tr)) if items]
        one_cell = len(list(_row_cells(tr, merged=True))) == 1
        if len(cells) == 1 and (one_cell or any(isinstance(item, list) for item in cells[0])):
            for item in cells[0]:
                if isinstance(item, list):  # a nested table: a block of its own
                    _add_lines(lines, ["", *item, ""])
                else:
                    _add_lines(lines, ["", item] if in_rows else [item])
                in_rows = False
        elif cells:
            row = " | ".join(collapse_ws(" ".join(_flatten(item) for item in items)) for items in cells)
            _add_lines(lines, [row] if in_rows else ["", row])
            in_rows = True
    while lines and not lines[-1]:
        lines.pop()
    return lines


def _row_cells(tr: etree._Element, merged: bool = False) -> Iterator[etree._Element]:
    """The row's w:tc elements, skipping continuations of vertical/legacy horizontal merges unless `merged`."""
    for child in tr.iterchildren():
        if child.tag == _SDT:
            content = child.find(_SDT_CONTENT)
            children = list(content.iterchildren(_TC)) if content is not None else []
        elif child.tag == _TC:
            children = [child]
        else:
            continue
        for tc in children:
            tc_pr = tc.find(_W + "tcPr")
            if tc_pr is not None and not merged:
                v_merge = tc_pr.find(_W + "vMerge")
                h_merge = tc_pr.find(_W + "hMerge")
                if v_merge is not None and v_merge.get(_W + "val") != "restart":
                    continue
                if h_merge is not None and h_merge.get(_W + "val") != "restart":
                    continue
            yield tc


def _cell_items(tc: etree._Element, document: docx.document.Document) -> list[str | list[str]]:
    """A cell's content in order: paragraph texts (str) and nested tables (their lines)."""
    items: list[str | list[str]] = []
    for el in _block_elements(tc):
        if el.tag == _P:
            para = Paragraph(el, document)
            text = _paragraph_text(para)
            if text:
                if _is_list_item(para):
                    text = "  " * _list_level(para) + "- " + text
                items.append(text)
        else:
            nested = _table_lines(el, document)
            if nested:
                items.append(nested)
    return items
