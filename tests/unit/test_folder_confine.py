"""A linked folder stays inside itself (issue 47, item 6): real folders and symbolic links made here. Links leading out
(to /etc, `../outside`, /dev) are left out with one sentence, links inside are followed, loops skipped; a folder
replaced by a link (to /etc, to /proc) is refused before it is walked; a file swapped for a link between the check
and the read is refused, not followed."""
from __future__ import annotations

import os
import shutil
import time
from pathlib import Path

import pytest

import rag_core.ingest.folder_confine as confine
from rag_core.core.errors import FolderReplaced, NotARegularFile, SystemFolderRefused
from rag_core.ingest.folder_confine import LinkLeadsOut, open_inside, pin, verify
from rag_core.ingest.folder_scan import hash_file, scan_folder

pytestmark = pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows")
POSIX_SYSTEM = pytest.mark.skipif(not Path("/proc/self").exists() or not Path("/etc/passwd").exists(),
                                  reason="needs /etc/passwd and /proc (Linux)")


@pytest.fixture
def docs(tmp_path):
    root = tmp_path / "Docs"
    (root / "sub").mkdir(parents=True)
    (root / "a.txt").write_text("alpha")
    (root / "sub" / "b.md").write_text("beta")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret.txt").write_text("not for DocChat")
    return root


@POSIX_SYSTEM
def test_links_to_etc_are_left_out_with_one_sentence(docs):
    (docs / "etc").symlink_to("/etc")
    (docs / "passwd.txt").symlink_to("/etc/passwd")
    scan = scan_folder(docs)
    assert [f.rel for f in scan.files] == ["a.txt", "sub/b.md"]  # nothing of /etc
    assert sorted(scan.notes) == ["“etc” is a link that leads outside the folder; it was left out.",
                                  "“passwd.txt” is a link that leads outside the folder; it was left out."]


def test_relative_link_out_of_the_folder_is_left_out(docs):
    (docs / "sub" / "out").symlink_to("../../outside")
    (docs / "sub" / "s.txt").symlink_to("../../outside/secret.txt")
    scan = scan_folder(docs)
    assert [f.rel for f in scan.files] == ["a.txt", "sub/b.md"]
    assert len(scan.notes) == 2 and all("leads outside the folder" in n for n in scan.notes)


def test_many_links_out_are_one_sentence(docs):
    for i in range(12):
        (docs / f"l{i:02}.txt").symlink_to(docs.parent / "outside" / "secret.txt")
    (docs / "plain").symlink_to(docs.parent / "outside" / "secret.txt")  # a kind never read: not worth a word
    scan = scan_folder(docs)
    assert [f.rel for f in scan.files] == ["a.txt", "sub/b.md"]
    assert scan.notes == ("12 links lead outside the folder and were left out (“l00.txt”, “l01.txt”, “l02.txt”, …).",)


def test_links_inside_the_folder_are_followed_and_loops_skipped(docs):
    (docs / "alias.txt").symlink_to("a.txt")
    (docs / "sub" / "up").symlink_to("..")  # a loop back to the folder itself
    (docs / "again").symlink_to("sub")  # the same subfolder twice
    (docs / "self.txt").symlink_to("self.txt")  # a link that loops on itself
    (docs / "x.txt").symlink_to("y.txt")
    (docs / "y.txt").symlink_to("x.txt")
    scan = scan_folder(docs)
    assert [f.rel for f in scan.files] == ["a.txt", "alias.txt", "sub/b.md"] or [f.rel for f in scan.files] == [
        "a.txt", "again/b.md", "alias.txt"]
    assert sum("links back to a folder" in n for n in scan.notes) == 2
    assert sorted(n for n in scan.notes if "loops back on itself" in n) == [
        "“self.txt” is a link that loops back on itself; it was skipped.",
        "“x.txt” is a link that loops back on itself; it was skipped.",
        "“y.txt” is a link that loops back on itself; it was skipped."]
    assert not any("outside" in n for n in scan.notes)


@pytest.mark.skipif(not hasattr(os, "mkfifo") or not Path("/dev/null").exists(), reason="needs FIFOs and /dev")
def test_links_to_a_fifo_and_a_device_are_never_opened(docs):
    os.mkfifo(docs / "pipe")
    (docs / "pipe.txt").symlink_to("pipe")  # inside, but not a regular file: listed never, opened never
    (docs / "null.txt").symlink_to("/dev/null")
    started = time.monotonic()
    scan = scan_folder(docs)
    assert [f.rel for f in scan.files] == ["a.txt", "sub/b.md"]
    assert scan.notes == ("“null.txt” is a link that leads outside the folder; it was left out.",)
    with pytest.raises(NotARegularFile):
        open_inside(pin(docs), "pipe.txt")
    assert time.monotonic() - started < 5


@POSIX_SYSTEM
def test_folder_replaced_by_a_link_to_etc_is_refused(docs, tmp_path):
    confirmed = pin(docs)
    shutil.rmtree(docs)
    docs.symlink_to("/etc")
    with pytest.raises(FolderReplaced) as e:
        scan_folder(docs, confirmed=confirmed)
    assert str(e.value) == (f"The linked folder “{docs}” is now a link to /etc, not the folder you confirmed; DocChat "
                            "left it alone. If this is intended, unlink it on the Library page and link it again.")


@POSIX_SYSTEM
@pytest.mark.parametrize("pinned", [True, False])
def test_folder_replaced_by_a_link_to_proc_is_refused_at_once(docs, pinned):
    confirmed = pin(docs) if pinned else None
    shutil.rmtree(docs)
    docs.symlink_to("/proc")
    started = time.monotonic()
    with pytest.raises(SystemFolderRefused, match="leads into /proc, a system folder"):
        scan_folder(docs, confirmed=confirmed)
    assert time.monotonic() - started < 2  # refused before a single name of /proc is listed


def test_folder_recreated_at_the_same_place_is_accepted_by_a_check_not_by_an_apply(docs):
    confirmed = pin(docs)
    docs.rename(docs.parent / "Docs.old")  # kept, so the new folder cannot get the old one's inode number
    (docs / "sub").mkdir(parents=True)
    (docs / "c.txt").write_text("gamma")
    assert [f.rel for f in scan_folder(docs, confirmed=confirmed).files] == ["c.txt"]
    with pytest.raises(FolderReplaced, match="was replaced by another folder"):
        verify(docs, confirmed, same_identity=True)


def test_a_file_swapped_for_a_link_before_it_is_read_is_refused(docs):
    root = pin(docs)
    st = (docs / "a.txt").stat()
    assert hash_file(Path("a.txt"), st.st_size, st.st_mtime_ns, root) is not None
    (docs / "a.txt").unlink()
    (docs / "a.txt").symlink_to(docs.parent / "outside" / "secret.txt")
    with pytest.raises(LinkLeadsOut):
        hash_file(Path("a.txt"), st.st_size, st.st_mtime_ns, root)
    with pytest.raises(LinkLeadsOut):
        open_inside(root, "a.txt")


def _swap_after(monkeypatch, owner, name: str, swap) -> None:
    """Call `swap` right after the checker's `owner.name` (a race made certain: the path changes between the check
    and the open)."""
    real = getattr(owner, name)

    def checked(*args, **kwargs):
        result = real(*args, **kwargs)
        monkeypatch.undo()
        swap()
        return result

    monkeypatch.setattr(owner, name, checked)


def test_a_file_swapped_after_its_real_path_was_resolved_is_refused(docs, monkeypatch):
    root = pin(docs)

    def swap() -> None:
        (docs / "a.txt").unlink()
        (docs / "a.txt").symlink_to(docs.parent / "outside" / "secret.txt")

    _swap_after(monkeypatch, confine.os.path, "realpath", swap)
    with pytest.raises(LinkLeadsOut):
        open_inside(root, "a.txt")


def test_a_subfolder_swapped_for_a_link_after_the_check_is_refused(docs, monkeypatch):
    root = pin(docs)
    (docs.parent / "outside" / "b.md").write_text("outside, same name")

    def swap() -> None:
        shutil.rmtree(docs / "sub")
        (docs / "sub").symlink_to(docs.parent / "outside")

    _swap_after(monkeypatch, confine.os, "lstat", swap)  # after the file was checked, before it is opened
    with pytest.raises(LinkLeadsOut):
        open_inside(root, "sub/b.md")
