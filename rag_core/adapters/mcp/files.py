"""Which files on this computer the MCP tool add_document may read (`docchat mcp --allow-writes --allow-dir DIR`).

An agent can be steered by a document it read, so its file access is confined: only regular files of the kinds
DocChat reads (rag_core.core.formats: PDF, Office files, spreadsheets, web pages, e-books, images, text…), only
under the folders named with --allow-dir (none: no local file at all), judged by the real path (".." and links
resolved, so a link inside an allowed folder leading out is refused), never anything under /proc, /sys or /dev (on
POSIX systems). The file is then opened one path component at a time from its allowed folder without following any
link and without blocking (POSIX `openat`), so a folder or the file swapped for a link or a FIFO after the check is
refused rather than followed; where the system has no `dir_fd` opening (Windows) it is opened by path and its real
path checked again. Either way the open descriptor must be the regular file that was checked. Every refusal is one
sentence (FileRefused), decided before the library is opened.
"""
from __future__ import annotations

import errno
import os
import stat
from collections.abc import Iterable
from pathlib import Path

from rag_core.core.config import Settings
from rag_core.core.errors import DocChatError, NotARegularFile, SettingsError
from rag_core.core.formats import ACCEPTED_EXTENSIONS, accepted_kinds
from rag_core.core.safe_files import describe_mode, read_up_to
from rag_core.ingest.folder_confine import LinkLeadsOut, open_from_folder, system_folder
from rag_core.ingest.loaders import check_size

SUPPORTED_SUFFIXES = frozenset(ACCEPTED_EXTENSIONS)
#: What open() says when a component it must not follow is a link (or a folder became something else).
_SWAPPED = frozenset({errno.ELOOP, errno.ENOTDIR, errno.EMLINK})
NO_FOLDER_ALLOWED = ("This DocChat server may not read files from this computer because it was started without "
                     "--allow-dir; to allow a folder, restart it with `docchat mcp --allow-writes --allow-dir FOLDER` "
                     "(repeatable), naming the folders whose files may be added.")


class FileRefused(DocChatError):
    """add_document may not read this path; the message says why and what to do instead."""


def _has_control(text: str) -> bool:
    return any(ord(ch) < 32 or 127 <= ord(ch) < 160 for ch in text)


def allowed_dirs(raw: Iterable[str | Path]) -> tuple[Path, ...]:
    """The --allow-dir folders, resolved (links followed); SettingsError for one that is not an existing folder
    or is a system folder."""
    out: list[Path] = []
    for given in raw:
        text = str(given)
        if not text or _has_control(text):
            raise SettingsError("--allow-dir needs the path of an existing folder.")
        try:
            folder = Path(text).expanduser().resolve(strict=True)
        except (OSError, RuntimeError) as e:
            raise SettingsError(f"--allow-dir {text}: there is no such folder; name an existing folder.") from e
        if not folder.is_dir():
            raise SettingsError(f"--allow-dir {text} is not a folder; name the folder that holds the documents.")
        if system_folder(folder):
            raise SettingsError(f"--allow-dir {text} is a system folder, not one of documents; name another.")
        out.append(folder)
    return tuple(dict.fromkeys(out))


def _listed(folders: tuple[Path, ...]) -> str:
    return ", ".join(f"“{f}”" for f in folders)


def confined_path(path: str, allowed: tuple[Path, ...]) -> tuple[Path, os.stat_result]:
    """The real path of `path` and its stat when add_document may read it (existing, a regular file of a supported
    kind, inside an allowed folder); else FileRefused (or NotARegularFile) with one sentence."""
    if not allowed:
        raise FileRefused(NO_FOLDER_ALLOWED)
    if _has_control(path):
        raise FileRefused("That path contains a NUL byte or another control character, so it is not a valid file "
                          "path; give the file's full path.")
    try:
        given = Path(path).expanduser()
    except RuntimeError:  # "~" with no home folder to expand to
        given = Path(path)
    if not given.is_absolute():
        raise FileRefused(f"“{path}” is not an absolute path; give the file's full path.")
    try:
        real = Path(os.path.realpath(given))
    except (OSError, ValueError) as e:
        raise FileRefused(f"“{path}” is not a valid file path; give the file's full path.") from e
    system = system_folder(real)
    if system:
        raise FileRefused(f"“{path}” is a system file (under {system}), not a document, so it was not read.")
    if not any(real.is_relative_to(folder) for folder in allowed):
        plain = Path(os.path.normpath(given))
        if any(plain.is_relative_to(folder) for folder in allowed):
            raise FileRefused(f"“{path}” is a link that leads outside the folders this server may read from "
                              f"({_listed(allowed)}), so it was not read; add the file it points to from inside "
                              "one of them instead.")
        raise FileRefused(f"“{path}” is outside the folders this server may read from ({_listed(allowed)}); copy "
                          "the file into one of them, or ask the user to restart the server with --allow-dir "
                          "naming its folder.")
    try:
        st = os.lstat(real)  # the real path has no link left in it: one there now loops or was just swapped in
    except FileNotFoundError as e:
        raise FileRefused(f"There is no file “{path}”; check the path and the file's name.") from e
    except OSError as e:
        raise FileRefused(f"“{path}” could not be opened ({e.strerror or 'an error'}).") from e
    if stat.S_ISLNK(st.st_mode):
        raise FileRefused(f"“{path}” is a link that could not be followed to a file (it loops, or it changed while "
                          "it was being checked), so it was not read; give the path of the file itself.")
    if not stat.S_ISREG(st.st_mode):
        raise NotARegularFile(real.name, describe_mode(st.st_mode))
    if real.suffix.lower() not in SUPPORTED_SUFFIXES:
        raise FileRefused(f"“{real.name}” is not a file type DocChat reads; add_document takes "
                          f"{accepted_kinds(extensions=True, last='and')} files.")
    return real, st


def read_confined(path: str, allowed: tuple[Path, ...], settings: Settings) -> tuple[Path, bytes]:
    """(real path, bytes) of a file add_document may read (see `confined_path`), read from the checked descriptor
    up to the upload limit; FileRefused, NotARegularFile or FileTooLarge otherwise."""
    real, checked = confined_path(path, allowed)
    try:
        fd = _open_inside(path, real, allowed)
    except FileNotFoundError as e:
        raise FileRefused(f"There is no file “{path}”; check the path and the file's name.") from e
    except OSError as e:
        if e.errno in _SWAPPED:
            raise _replaced(path) from e
        raise FileRefused(f"“{path}” could not be opened ({e.strerror or 'an error'}).") from e
    try:
        return real, _read_checked(fd, path, real, checked, settings)
    except OSError as e:
        raise FileRefused(f"“{path}” could not be read ({e.strerror or 'an error'}).") from e


def _replaced(path: str) -> FileRefused:
    """The refusal for a path that changed between its check and its opening."""
    return FileRefused(f"“{path}” was replaced while it was being opened, so it was not read; try again.")


def _open_inside(path: str, real: Path, allowed: tuple[Path, ...]) -> int:
    """A read-only, non-blocking descriptor of `real` (checked to be inside an allowed folder), opened so that no
    link is followed on the way (rag_core.ingest.folder_confine.open_from_folder; FileRefused when it changed)."""
    folder = max((f for f in allowed if real.is_relative_to(f)), key=lambda f: len(f.parts))
    try:
        return open_from_folder(folder, real)
    except LinkLeadsOut as e:
        raise _replaced(path) from e


def _read_checked(fd: int, path: str, real: Path, checked: os.stat_result, settings: Settings) -> bytes:
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise NotARegularFile(real.name, describe_mode(st.st_mode))
        if (st.st_dev, st.st_ino) != (checked.st_dev, checked.st_ino):
            raise _replaced(path)
        check_size(real.name, st.st_size, settings)
        data = read_up_to(f.fileno(), settings.max_upload_bytes + 1)
    check_size(real.name, len(data), settings)
    return data
