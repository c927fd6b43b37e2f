"""Looking through a linked folder (rag_core.ingest.folder_scan) and keeping the list of linked folders
(rag_core.service.linked_folders): real folders, links and files."""
from __future__ import annotations

import os
import sys

import pytest

from rag_core.core.config import Settings
from rag_core.core.errors import FolderNotFound, FolderNotLinked, FolderTooLarge, FolderUnreadable, NotAFolder
from rag_core.ingest.folder_scan import hash_file, scan_folder
from rag_core.service.linked_folders import FileRecord, FolderLinks, folder_key


def _tree(root):
    (root / "sub" / "deeper").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.md").write_text("# beta")
    (root / "sub" / "deeper" / "c.PDF").write_bytes(b"%PDF-1.4 not really")
    (root / "notes.xyz").write_text("not a kind DocChat reads")
    (root / ".hidden.txt").write_text("hidden")
    (root / "sub" / "~$lock.docx").write_bytes(b"lock")
    return root


def test_scan_finds_readable_kinds_recursively(tmp_path):
    scan = scan_folder(_tree(tmp_path / "docs"))
    assert [f.rel for f in scan.files] == ["a.txt", "sub/b.md", "sub/deeper/c.PDF"]
    assert scan.files[0].size == 5 and scan.files[0].mtime_ns == (tmp_path / "docs" / "a.txt").stat().st_mtime_ns
    assert scan.notes == ()


@pytest.mark.skipif(sys.platform == "win32", reason="symbolic links need privileges on Windows")
def test_symlink_loop_is_skipped_with_a_sentence(tmp_path):
    root = _tree(tmp_path / "docs")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    (root / "broken.txt").symlink_to(tmp_path / "nowhere.txt")
    scan = scan_folder(root)
    assert [f.rel for f in scan.files] == ["a.txt", "sub/b.md", "sub/deeper/c.PDF"]
    assert any("sub/loop" in n and "loop of links" in n for n in scan.notes)
    assert any("broken.txt" in n for n in scan.notes)


@pytest.mark.skipif(sys.platform == "win32" or os.geteuid() == 0, reason="permissions do not stop root")
def test_unreadable_subfolder_is_left_out_and_said(tmp_path):
    root = _tree(tmp_path / "docs")
    (root / "sub").chmod(0)
    try:
        scan = scan_folder(root)
    finally:
        (root / "sub").chmod(0o755)
    assert [f.rel for f in scan.files] == ["a.txt"]
    assert any("“sub”" in n and "could not be read" in n for n in scan.notes)


def test_vanished_folder_and_a_file_are_one_sentence(tmp_path):
    with pytest.raises(FolderNotFound, match="is not there any more"):
        scan_folder(tmp_path / "gone")
    (tmp_path / "f.txt").write_text("x")
    with pytest.raises(NotAFolder, match="is not a folder"):
        scan_folder(tmp_path / "f.txt")
    assert issubclass(FolderUnreadable, Exception)


def test_too_many_files_stops_with_a_sentence(tmp_path):
    for i in range(12):
        (tmp_path / f"{i}.txt").write_text(str(i))
    assert len(scan_folder(tmp_path, max_files=12).files) == 12
    with pytest.raises(FolderTooLarge, match="more than 11 files"):
        scan_folder(tmp_path, max_files=11)
    with pytest.raises(FolderTooLarge):
        scan_folder(tmp_path, max_entries=5)


def test_hash_says_when_a_file_changed_since_it_was_listed(tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("alpha")
    st = f.stat()
    assert hash_file(f, st.st_size, st.st_mtime_ns) == "8ed3f6ad685b959ead7022518e1af76cd816f8e8ec7ccdda1ed4018e8f2223f8"
    f.write_text("alpha, longer")
    assert hash_file(f, st.st_size, st.st_mtime_ns) is None
    f.unlink()
    with pytest.raises(FileNotFoundError):
        hash_file(f, st.st_size, st.st_mtime_ns)


def test_linked_folders_are_kept_and_survive_a_damaged_file(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    links = FolderLinks(settings)
    assert links.all() == []
    with pytest.raises(FolderNotLinked):
        links.get(tmp_path / "docs")
    link = links.link(tmp_path / "docs")
    assert link.path == folder_key(tmp_path / "docs") and link.linked_at
    assert links.link(tmp_path / "docs") == link  # linking twice keeps one
    links.record(tmp_path / "docs", {"a.txt": FileRecord(5, 123, "abc"), "b.txt": FileRecord(1, 2, "def")})
    links.record(tmp_path / "docs", {"b.txt": None})
    again = FolderLinks(settings).get(tmp_path / "docs")
    assert dict(again.files) == {"a.txt": FileRecord(5, 123, "abc")}
    assert not list(settings.library.data_dir.glob(".*.tmp"))  # written atomically, nothing left behind
    assert links.unlink(tmp_path / "docs") and not links.unlink(tmp_path / "docs")
    (settings.library.data_dir / "linked_folders.json").write_text("{not json")
    assert FolderLinks(settings).all() == []


def test_records_of_applied_files_are_written_later_but_seen_at_once(tmp_path):
    settings = Settings(data_dir=tmp_path / "data")
    links = FolderLinks(settings)
    links.link(tmp_path / "docs")
    links.record(tmp_path / "docs", {"a.txt": FileRecord(1, 1, "aaa")})  # now: written
    on_disk = (settings.library.data_dir / "linked_folders.json").read_bytes()
    links.record(tmp_path / "docs", {"b.txt": FileRecord(2, 2, "bbb"), "a.txt": None}, later=True)
    assert (settings.library.data_dir / "linked_folders.json").read_bytes() == on_disk  # within WRITE_EVERY_S: not yet
    assert dict(FolderLinks(settings).get(tmp_path / "docs").files) == {"b.txt": FileRecord(2, 2, "bbb")}
    FolderLinks(settings).flush()
    assert b"bbb" in (settings.library.data_dir / "linked_folders.json").read_bytes()
    assert b"aaa" not in (settings.library.data_dir / "linked_folders.json").read_bytes()
