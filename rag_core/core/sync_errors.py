"""Errors of linked folders (folder sync): each is one sentence that says what happened and what to do."""
from __future__ import annotations

from rag_core.core.error_base import DocChatError, duration


class FolderSyncError(DocChatError):
    """A linked folder could not be read, linked or compared with the library."""


class FolderNotFound(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"The folder “{folder}” is not there any more (moved, renamed, or on a drive that is not "
                         "connected). Nothing in your library was changed; check the path, or connect the drive it "
                         "is on.",
                         folder=folder)


class NotAFolder(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"“{folder}” is not a folder. Link a folder that holds your documents.", folder=folder)


class FolderUnreadable(FolderSyncError):
    def __init__(self, folder: str, reason: str) -> None:
        super().__init__(f"DocChat may not read the folder “{folder}” ({reason}). Nothing in your library was "
                         "changed; give DocChat access to it or link another folder.", folder=folder, reason=reason)


class FolderTooLarge(FolderSyncError):
    def __init__(self, folder: str, limit: int) -> None:
        super().__init__(f"The folder “{folder}” holds more than {limit:,} files; DocChat stopped looking at "
                         f"{limit:,}. Link a smaller folder inside it.", folder=folder, limit=limit)


class FolderScanTooSlow(FolderSyncError):
    def __init__(self, folder: str, seconds: float) -> None:
        super().__init__(f"Looking through the folder “{folder}” took longer than {duration(seconds)}, so DocChat "
                         "stopped. Nothing in your library was changed; link a smaller folder inside it.",
                         folder=folder, seconds=seconds)


class LinkingRefused(FolderSyncError):
    def __init__(self) -> None:
        super().__init__("Linking a folder works only when DocChat runs on your own computer; in the hosted demo, "
                         "upload the files instead.")


class LinkNeedsConfirmation(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"“{folder}” is outside your home folder and DocChat's data folder. Link it anyway only if "
                         "you mean to let DocChat read every document in it.", folder=folder)


class FolderNotLinked(FolderSyncError):
    def __init__(self, folder: str) -> None:
        super().__init__(f"“{folder}” is not a linked folder. Link it first on the Library page, or run "
                         "`docchat sync` with the folder.", folder=folder)


class FolderReplaced(FolderSyncError):
    def __init__(self, folder: str, now: str, confirmed: str) -> None:
        where = "is now a link to" if now != confirmed else "was replaced by another folder at"
        super().__init__(f"The linked folder “{folder}” {where} {now}, not the folder you confirmed; DocChat left it "
                         "alone. If this is intended, unlink it on the Library page and link it again.",
                         folder=folder, now=now, confirmed=confirmed)


class SystemFolderRefused(FolderSyncError):
    def __init__(self, folder: str, system: str) -> None:
        super().__init__(f"“{folder}” leads into {system}, a system folder, not one of documents; DocChat left it "
                         "alone. Link the folder that holds your documents.", folder=folder, system=system)
