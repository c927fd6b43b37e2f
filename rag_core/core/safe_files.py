"""Reading DocChat's own files in its data folder (preferences, conversations, saved originals) without trusting them.

A file there may have been replaced by a named pipe (opening it would wait for a writer forever), linked to a device
such as /dev/zero (endless, while `stat` says 0 bytes) or grown past any sensible size. So a file is opened only when
`stat` (following links) says it is a regular file, opened non-blocking where the platform has that flag, checked
again with `fstat` on the open descriptor (the path may have changed in between), and read only up to a limit, one
byte past it telling "too large" whatever `stat` said. Every refusal is an `UnsafeFile`, an OSError, so callers that
already treat an unreadable file as missing keep doing so.
"""
from __future__ import annotations

import codecs
import json
import os
import re
import stat
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

# O_NONBLOCK (POSIX): opening a FIFO returns at once instead of waiting for a writer; O_NOCTTY: a terminal device
# never becomes the controlling one; O_BINARY (Windows): no newline translation.
_FLAGS = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_BINARY", 0))
_BLOCK = 1 << 20
_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


class UnsafeFile(OSError):
    """A file of the data folder that is not read: not a regular file, or larger than its limit (`reason` says which,
    as words that can follow "could not be opened", e.g. "it is a named pipe (FIFO), not a regular file")."""

    def __init__(self, path: Path, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path, self.reason = str(path), reason


def describe_mode(mode: int) -> str:
    """What a file that is not regular is, in words ("a folder", "a named pipe (FIFO)", "a device", ...)."""
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def _size(n: int) -> str:
    return f"{n / 2**20:g} MB" if n >= 2**20 else f"{n} bytes"


def _check_regular(path: Path, mode: int) -> None:
    if not stat.S_ISREG(mode):
        raise UnsafeFile(path, f"it is {describe_mode(mode)}, not a regular file")


@contextmanager
def _open_regular(path: Path) -> Iterator[int]:
    """A read-only descriptor of `path`, a regular file (UnsafeFile otherwise, before anything is read)."""
    _check_regular(path, os.stat(path).st_mode)  # a link to a device or a pipe is refused before it is opened
    fd = os.open(path, _FLAGS)
    try:
        _check_regular(path, os.fstat(fd).st_mode)  # what was opened, should the path have been swapped meanwhile
        yield fd
    finally:
        os.close(fd)


def read_up_to(fd: int, size: int) -> bytes:
    """At most `size` bytes from `fd`, read in blocks until the end of the file."""
    parts: list[bytes] = []
    got = 0
    while got < size:
        block = os.read(fd, min(_BLOCK, size - got))
        if not block:
            break
        parts.append(block)
        got += len(block)
    return b"".join(parts)


def is_regular(path: Path) -> bool:
    """True when `path` (its link followed) is a regular file; never opens it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def read_bytes(path: Path, limit: int) -> bytes:
    """The whole of a regular file of at most `limit` bytes (UnsafeFile when not regular or larger, whatever `stat`
    says; FileNotFoundError when missing; other OSErrors as the system reports them)."""
    with _open_regular(path) as fd:
        data = read_up_to(fd, limit + 1)
    if len(data) > limit:
        raise UnsafeFile(path, f"it is larger than {_size(limit)}")
    return data


def read_head(path: Path, size: int) -> bytes:
    """The first `size` bytes of a regular file (fewer when it is shorter); UnsafeFile when it is not regular."""
    with _open_regular(path) as fd:
        return read_up_to(fd, size)


def read_json(path: Path, limit: int) -> Any:
    """The JSON value in a regular file of at most `limit` bytes (ValueError when it is not UTF-8 JSON; the OSErrors
    of `read_bytes`; RecursionError for absurdly nested data)."""
    return json.loads(read_bytes(path, limit).decode("utf-8"))


def _skip(text: str, pos: int) -> int:
    match = _SPACE.match(text, pos)
    return match.end() if match else pos


def json_members_before(head: bytes, stop: str, complete: bool = False) -> tuple[dict[str, Any], str | None]:
    """The members of the JSON object a file starts with, up to member `stop`, read from `head` (the file's first
    bytes; all of them when `complete`), and the text from `stop`'s value on (None when the object has no `stop`).

    So a small header can be read without parsing what follows it. ValueError when `head` is not the start of a JSON
    object, or ends before `stop` (or the object's end) is reached.
    """
    text = codecs.getincrementaldecoder("utf-8")().decode(head, final=complete)
    members: dict[str, Any] = {}
    pos = _skip(text, 0)
    if text[pos:pos + 1] != "{":
        raise ValueError("not a JSON object")
    pos = _skip(text, pos + 1)
    if text[pos:pos + 1] == "}":
        return members, None
    while True:
        key, pos = _DECODER.raw_decode(text, pos)  # JSONDecodeError (a ValueError) when cut off or malformed
        pos = _skip(text, pos)
        if not isinstance(key, str) or text[pos:pos + 1] != ":":
            raise ValueError("not a JSON object")
        pos = _skip(text, pos + 1)
        if key == stop:
            return members, text[pos:]
        members[key], pos = _DECODER.raw_decode(text, pos)
        pos = _skip(text, pos)
        if text[pos:pos + 1] == "}":
            return members, None
        if text[pos:pos + 1] != ",":
            raise ValueError("not a JSON object (or more of it than the head holds comes first)")
        pos = _skip(text, pos + 1)
