"""ZIP-based documents (docx, pptx, xlsx, epub, odt…) checked by what they really hold, not by what they declare.

A ZIP's headers are written by whoever made the file: the member count, and each member's unpacked size, can lie.
- `count_members` walks the central directory itself and stops one past `MAX_ZIP_MEMBERS`, before `zipfile` builds
  an object per member (1.5 million members took 1.5 GB that way).
- `check_inflated` unpacks every member in small steps, counting the bytes that really come out and throwing them
  away: CorruptFile once the total passes the unpacked limit (a member whose header says 4,000 bytes but whose deflate
  stream gives gigabytes is caught at the limit), or when a member gives more or fewer bytes than its header says
  (then the libraries that read it would trust the header: Python's zipfile inflates a whole member in one call).
After it, the format libraries may read the archive: every size they go by is true and the total is bounded.
"""
from __future__ import annotations

import bz2
import io
import logging
import struct
import zipfile
import zlib
from collections.abc import Iterator

from rag_core.core.deadline import Deadline
from rag_core.core.errors import CorruptFile, IngestError
from rag_core.core.text import with_article

log = logging.getLogger(__name__)

MAX_ZIP_MEMBERS = 20_000
"""The most members a document's ZIP may hold: a long book has a few thousand (chapters, images, fonts)."""
MB = 1024 * 1024
_STEP = 1 << 20  # bytes inflated per step
_SMALL_STEP = 1 << 16  # bytes asked of zipfile per step
_EOCD = b"PK\x05\x06"
_EOCD64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"


def _central_directory(data: bytes) -> tuple[int, int] | None:
    """(offset, size) of the central directory from the end record (ZIP64 too), or None when there is none."""
    end = data.rfind(_EOCD, max(0, len(data) - 65_557))
    if end < 0 or end + 22 > len(data):
        return None
    size, offset = struct.unpack_from("<II", data, end + 12)
    cd_end, locator = end, end - 20
    if locator >= 0 and data[locator:locator + 4] == _EOCD64_LOCATOR:  # ZIP64: its end record comes first
        (record,) = struct.unpack_from("<Q", data, locator + 8)
        record += max(0, locator - 56 - record)  # as below: shifted by any data before the archive
        if record + 56 <= len(data) and data[record:record + 4] == b"PK\x06\x06":
            cd_end = record
            if size == 0xFFFFFFFF or offset == 0xFFFFFFFF:
                size, offset = struct.unpack_from("<QQ", data, record + 40)
    # Data before the archive (a self-extractor stub) shifts every offset; zipfile corrects it the same way.
    offset += max(0, cd_end - size - offset)
    return offset, size


def count_members(data: bytes, limit: int = MAX_ZIP_MEMBERS) -> int:
    """How many members the ZIP `data` lists in its central directory, counted up to `limit` + 1 (a broken
    directory is left to zipfile to report)."""
    where = _central_directory(data)
    if where is None:
        return 0
    pos, size = where
    stop = min(len(data), pos + size)
    count = 0
    while pos + 46 <= stop and data[pos:pos + 4] == _CENTRAL and count <= limit:
        name, extra, comment = struct.unpack_from("<HHH", data, pos + 28)
        pos += 46 + name + extra + comment
        count += 1
    return count


def check_members(data: bytes, file_name: str, what: str, limit: int = MAX_ZIP_MEMBERS) -> None:
    """CorruptFile when the ZIP `data` holds more than `limit` members (`what`: "Word document", …)."""
    if count_members(data, limit) > limit:
        log.warning("refusing %s: more than %d ZIP members", file_name, limit)
        raise CorruptFile(file_name, f"it holds more than {limit:,} files inside, more than {with_article(what)} has")


def check_inflated(data: bytes, file_name: str, limit_mb: int, what: str, deadline: Deadline | None = None) -> int:
    """The total bytes the ZIP `data` really unpacks to, found by unpacking every member in steps of 1 MB (nothing
    kept); CorruptFile when it passes `limit_mb` MB or a member's real size is not the one its header declares."""
    limit = limit_mb * MB
    total = 0
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                if info.is_dir() or info.flag_bits & 0x1:
                    continue  # folders hold nothing; an encrypted member is refused by the reader that needs it
                if deadline is not None:
                    deadline.check()
                real = _inflate(data, zf, info, limit - total, file_name, limit_mb, what)
                total += real
                if real != info.file_size:
                    log.warning("%s: member %s unpacks to %d bytes, its header says %d", file_name, info.filename,
                                real, info.file_size)
                    raise CorruptFile(file_name, f"a part inside it, {info.filename}, is not the size its header says")
    except IngestError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, NotImplementedError, ValueError, OSError,
            EOFError, struct.error) as e:
        raise CorruptFile(file_name, f"the {what}'s ZIP container is broken") from e
    return total


def _inflate(data: bytes, zf: zipfile.ZipFile, info: zipfile.ZipInfo, room: int, file_name: str, limit_mb: int,
             what: str) -> int:
    """The bytes member `info` really unpacks to; CorruptFile once they pass `room`."""
    if info.compress_type == zipfile.ZIP_DEFLATED:
        chunks = _raw_deflate(data, info)
    else:  # stored, bzip2, lzma: zipfile reads these in bounded steps and stops at the declared size
        chunks = _stream(data, zf, info)
    real = 0
    for size in chunks:
        real += size
        if real > info.file_size:
            break  # more than its header says: refused by the caller without unpacking the rest
        if real > room:
            log.warning("refusing %s: unpacks past %d MB (member %s)", file_name, limit_mb, info.filename)
            raise CorruptFile(file_name, f"it expands to more than {limit_mb} MB when unpacked, more than DocChat "
                                         f"allows for {with_article(what)}")
    return real


def _raw_deflate(data: bytes, info: zipfile.ZipInfo) -> Iterator[int]:
    """Sizes of the pieces a deflated member's stream gives, inflated 1 MB at a time from the raw bytes (so a header
    that understates the size cannot stop the count)."""
    stream = zlib.decompressobj(-15)
    pending = _raw_member(data, info)
    while pending and not stream.eof:
        out = stream.decompress(pending, _STEP)
        pending = stream.unconsumed_tail
        yield len(out)
    while not stream.eof:
        out = stream.decompress(b"", _STEP)
        if not out:
            break
        yield len(out)


def _stream(data: bytes, zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterator[int]:
    """Sizes of the blocks a member that is not deflated gives. A bzip2 member is inflated here 1 MB at a time:
    zipfile inflates each block it reads whole, and one 4 KB block of bzip2 can give 4 GB. Stored and LZMA members
    (at most ~30 MB from zipfile's 4 KB reads) are read by zipfile in small steps."""
    if info.compress_type == zipfile.ZIP_BZIP2:
        yield from (len(piece) for piece in _bzip2_pieces(data, info, _STEP))
        return
    with zf.open(info) as member:
        while block := member.read(_SMALL_STEP):
            yield len(block)


def _raw_member(data: bytes, info: zipfile.ZipInfo) -> bytes:
    """The compressed bytes of member `info`, found from its local header."""
    start = info.header_offset
    if data[start:start + 4] != _LOCAL:
        raise zipfile.BadZipFile(f"bad local header for {info.filename}")
    name_len, extra_len = struct.unpack_from("<HH", data, start + 26)
    begin = start + 30 + name_len + extra_len
    return data[begin:begin + info.compress_size]


def _bzip2_pieces(data: bytes, info: zipfile.ZipInfo, step: int) -> Iterator[bytes]:
    """A bzip2 member inflated at most `step` bytes at a time."""
    stream = bz2.BZ2Decompressor()
    pending = _raw_member(data, info)
    out = stream.decompress(pending, step)
    while True:
        if out:
            yield out
        if stream.eof or (not out and stream.needs_input):
            return
        out = stream.decompress(b"", step)


def read_head(data: bytes, zf: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    """At most `limit` bytes from the start of member `info`, never inflating much more than that, whatever the
    member's method and headers say (zipfile inflates a bzip2 block whole: 4 KB of it can give 4 GB). An encrypted
    member or an unknown method raises zipfile.BadZipFile."""
    if info.flag_bits & 0x1:
        raise zipfile.BadZipFile(f"{info.filename} is encrypted")
    if info.compress_type == zipfile.ZIP_BZIP2:
        return next(_bzip2_pieces(data, info, limit), b"")[:limit]
    try:
        with zf.open(info) as member:
            return member.read(limit)
    except NotImplementedError as e:  # a compression method zipfile does not know
        raise zipfile.BadZipFile(str(e)) from e


