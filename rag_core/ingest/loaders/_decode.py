"""Bytes to text for every text format (plain text, Markdown, CSV/TSV, web pages without a usable declared charset).

One order for all of them: a byte-order mark (UTF-8, UTF-16, UTF-32), else UTF-32 or UTF-16 without a mark when the
NUL bytes sit where those put them, else NUL bytes mean binary data, else strict UTF-8, else the encoding charset-normalizer finds in
the first 256 KB (Shift-JIS, GB18030, KOI8-R, Windows-1251, Windows-1252…). Its guess is bounded: it reads only that
sample (cut at a line break, so no character is cut in two), and the whole file is then decoded once. Where several
encodings fit the sample equally well (short files, Western text that is also valid Central European), Windows-1252 is
preferred, as browsers do; Latin-1 and ASCII are read as Windows-1252 too. Text that is still mostly control
characters or undecodable bytes is refused as binary data.
"""
from __future__ import annotations

import codecs
import logging
import re
from collections import Counter

import charset_normalizer

from rag_core.core.errors import UnsupportedFileType

log = logging.getLogger(__name__)

BINARY_DETAIL = "it looks like binary data, not text"
_NUL_SNIFF_BYTES = 8192  # NUL bytes looked for here (and UTF-16 without a mark)
_GUESS_BYTES = 262_144  # the sample charset-normalizer guesses the encoding from
_SAMPLE_CHARS = 65536  # characters looked at for control characters / undecodable bytes
_UTF8_STEP_BYTES = 262_144  # UTF-8 validity checked this much at a time
_MAX_BAD_SHARE = 0.08  # control characters / undecodable bytes tolerated in a text sample
_MIN_BAD_CHARS = 16  # ...and a few stray ones in a tiny file do not make it binary
_WESTERN = "cp1252"
# Labels read as Windows-1252 (WHATWG Encoding): it is Latin-1 with printable characters in place of C1 controls.
_AS_WESTERN = frozenset({"ascii", "latin_1", "iso8859_1"})
_BOMS = ((codecs.BOM_UTF8, "utf-8-sig"), (codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
         (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16"))

# C0/C1 control characters other than \t \n \v \f \r, plus the replacement character.
_BAD_CHAR_RE = re.compile("[\x00-\x08\x0e-\x1f\x7f-\x9f\ufffd]")


def decode_text(data: bytes, file_name: str) -> str:
    """`data` as text, by the order in the module docstring; UnsupportedFileType when it is binary data."""
    return data.decode(text_encoding(data, file_name), errors="replace")  # a byte-order mark is dropped


def text_encoding(data: bytes, file_name: str) -> str:
    """The codec to decode `data` with, by the order in the module docstring, for readers that decode as they read
    (CSV): it looks at bounded samples only and copies nothing. UnsupportedFileType when it is binary data."""
    encoding = _encoding_of(data, file_name)
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    if _looks_binary(decoder.decode(data[:_SAMPLE_CHARS * 4])):  # a character cut at the end waits in the decoder
        raise UnsupportedFileType(file_name, BINARY_DETAIL)
    return encoding


def _encoding_of(data: bytes, file_name: str) -> str:
    """The codec to decode `data` with (see the module docstring)."""
    for bom, encoding in _BOMS:
        if data.startswith(bom):
            return encoding
    wide = _bomless_utf32(data) or _bomless_utf16(data)
    if wide:
        return wide
    if b"\x00" in data[:_NUL_SNIFF_BYTES]:
        raise UnsupportedFileType(file_name, BINARY_DETAIL)
    if _is_utf8(data):
        return "utf-8"
    encoding = guess_encoding(data)
    log.info("%s is not UTF-8; decoding it as %s", file_name, encoding)
    return encoding


def _is_utf8(data: bytes) -> bool:
    """True when all of `data` is valid UTF-8, checked in steps (no copy of the whole text is made)."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    view = memoryview(data)
    try:
        for start in range(0, len(data), _UTF8_STEP_BYTES):
            decoder.decode(view[start:start + _UTF8_STEP_BYTES], final=start + _UTF8_STEP_BYTES >= len(data))
    except UnicodeDecodeError:
        return False
    return True


def guess_encoding(data: bytes) -> str:
    """The encoding charset-normalizer finds in the first 256 KB of `data` (cut after its last line break),
    Windows-1252 when it finds none or among equally good guesses."""
    sample = data[:_GUESS_BYTES]
    if len(data) > _GUESS_BYTES and b"\n" in sample:
        sample = sample[:sample.rindex(b"\n") + 1]  # no ASCII-based encoding uses the byte 0x0A inside a character
    matches = list(charset_normalizer.from_bytes(sample))
    if not matches:
        return _WESTERN
    best = matches[0]
    tied = [m for m in matches if m.chaos == best.chaos and m.coherence == best.coherence]
    if any(_WESTERN in m.could_be_from_charset for m in tied):
        return _WESTERN
    encoding = best.encoding
    try:
        codecs.lookup(encoding)
    except LookupError:
        return _WESTERN
    return _WESTERN if encoding in _AS_WESTERN else encoding


def _bomless_utf32(data: bytes) -> str | None:
    """'utf-32-le'/'utf-32-be' when the two high bytes of every 4-byte unit are NUL and the lowest almost never is
    (text in any script of the Basic Multilingual Plane), and the sample decodes."""
    sample = data[:_NUL_SNIFF_BYTES - _NUL_SNIFF_BYTES % 4]
    sample = sample[:len(sample) - len(sample) % 4]
    units = len(sample) // 4
    if units < 2:
        return None
    for encoding, high, low in (("utf-32-le", (2, 3), 0), ("utf-32-be", (0, 1), 3)):
        if all(sample[i::4].count(0) == units for i in high) and sample[low::4].count(0) <= 0.02 * units:
            try:
                sample.decode(encoding)
            except UnicodeDecodeError:
                continue
            return encoding
    return None


def _bomless_utf16(data: bytes) -> str | None:
    """'utf-16-le'/'utf-16-be' when the NUL bytes sit almost all on one side (mostly-ASCII UTF-16 text)."""
    sample = data[:_NUL_SNIFF_BYTES]
    if len(sample) < 4 or len(sample) % 2:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    half = len(sample) // 2
    if odd_nuls >= 0.6 * half and even_nuls <= 0.02 * half:
        return "utf-16-le"
    if even_nuls >= 0.6 * half and odd_nuls <= 0.02 * half:
        return "utf-16-be"
    # One alphabet (Cyrillic, Greek, Hebrew, Arabic…): the high bytes are that block's and NUL (spaces, digits)
    for encoding, high, low in (("utf-16-le", sample[1::2], sample[0::2]), ("utf-16-be", sample[0::2], sample[1::2])):
        common = Counter(high).most_common(2)
        if (len(common) == 2 and 0 in dict(common) and common[0][1] + common[1][1] >= 0.9 * half
                and min(c for _, c in common) >= 0.05 * half and low.count(0) <= 0.02 * half):
            return encoding
    return None


def _looks_binary(text: str) -> bool:
    """True when a sample has too many control characters or undecodable bytes to be real text."""
    sample = text[:_SAMPLE_CHARS]
    if not sample:
        return False
    bad = len(_BAD_CHAR_RE.findall(sample))
    return bad >= _MIN_BAD_CHARS and bad / len(sample) > _MAX_BAD_SHARE
