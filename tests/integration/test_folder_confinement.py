"""A linked folder stays inside itself, end to end (issue 47, item 6): the real `docchat sync` and the real library
(embedded store, bundled model) on folders and symbolic links made here. Nothing of /etc is listed or added, a folder
replaced by a link to /etc or /proc is refused with one sentence (the /proc one at once), and a file swapped for a link
between the check and the apply is refused by the apply."""
from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from rag_core.service.folder_sync import Bucket, apply_change, diff_folder
from rag_core.service.library import Library
from rag_core.service.linked_folders import FolderLinks

pytestmark = [pytest.mark.skipif(os.name == "nt", reason="symbolic links need privileges on Windows"),
              pytest.mark.skipif(not Path("/etc/passwd").exists() or not Path("/proc/self").exists(),
                                 reason="needs /etc/passwd and /proc (Linux)")]

SECRET = "The vault combination is seven, nineteen, forty-two, and it must never leave this room."


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "Reports"
    (root / "sub").mkdir(parents=True)
    (root / "keeper.txt").write_text("The lighthouse keeper lights the lamp each evening for the passing ships.")
    (root / "sub" / "bees.md").write_text("# Bees\n\nHoney bees dance to show the hive where the flowers grow.")
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "vault.txt").write_text(SECRET)
    return root


def _titles(cli, data: str) -> list[str]:
    return sorted(d["title"] for d in json.loads(cli("list", "--json", "--data-dir", data).stdout)["documents"])


def test_sync_leaves_links_to_etc_and_out_of_the_folder_out(cli, folder, tmp_path):
    (folder / "etc").symlink_to("/etc")
    (folder / "passwd.txt").symlink_to("/etc/passwd")
    (folder / "sub" / "vault.txt").symlink_to("../../outside/vault.txt")
    (folder / "alias.md").symlink_to("sub/bees.md")  # inside: followed
    data = str(tmp_path / "data")
    run = cli("sync", str(folder), "--json", "--yes", "--data-dir", data)
    got = json.loads(run.stdout)
    assert run.returncode == 0 and got["new"] == ["alias.md", "keeper.txt", "sub/bees.md"]
    assert sorted(got["notes"]) == [
        "“etc” is a link that leads outside the folder; it was left out.",
        "“passwd.txt” is a link that leads outside the folder; it was left out.",
        "“sub/vault.txt” is a link that leads outside the folder; it was left out."]
    assert _titles(cli, data) == ["Bees", "keeper"]  # alias.md is the same content as bees.md
    found = cli("search", "root:x:0:0 vault combination seven nineteen", "--json", "--data-dir", data).stdout
    assert "root:" not in found and "vault combination" not in found
    human = cli("sync", str(folder), "--dry-run", "--data-dir", data).stdout
    assert "note: “etc” is a link that leads outside the folder; it was left out." in human
    assert "passwd" not in human.replace("“passwd.txt” is a link", "")


def test_a_linked_folder_replaced_by_a_link_to_etc_is_refused(cli, folder, tmp_path):
    data = str(tmp_path / "data")
    assert cli("sync", str(folder), "--yes", "--data-dir", data).returncode == 0
    shutil.rmtree(folder)
    folder.symlink_to("/etc")
    run = cli("sync", str(folder), "--data-dir", data)
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert (f"The linked folder “{folder}” is now a link to /etc, not the folder you confirmed; DocChat left it "
            "alone.") in run.stderr
    assert _titles(cli, data) == ["Bees", "keeper"]  # nothing added, nothing removed
    run = cli("sync", str(folder), "--dry-run", "--json", "--data-dir", data)
    assert run.returncode == 2 and "is now a link to /etc" in json.loads(run.stdout)["error"]


def test_a_linked_folder_replaced_by_a_link_to_proc_is_refused_at_once(cli, folder, tmp_path):
    data = str(tmp_path / "data")
    assert cli("sync", str(folder), "--yes", "--data-dir", data).returncode == 0
    shutil.rmtree(folder)
    folder.symlink_to("/proc")
    started = time.monotonic()
    run = cli("sync", str(folder), "--json", "--data-dir", data)
    took = time.monotonic() - started
    assert run.returncode == 2 and "leads into /proc, a system folder" in json.loads(run.stdout)["error"]
    assert "new" not in json.loads(run.stdout) and took < 10, took  # before: 29,000 "new" files, past 300 s
    assert _titles(cli, data) == ["Bees", "keeper"]


def test_proc_is_never_linked(cli, tmp_path):
    run = cli("sync", "/proc", "--yes", "--data-dir", str(tmp_path / "data"))
    assert run.returncode == 2 and "“/proc” leads into /proc, a system folder" in run.stderr
    assert "/proc" not in (tmp_path / "data" / "linked_folders.json").read_text()


@pytest.mark.remembered_vectors
def test_a_file_swapped_for_a_link_between_the_check_and_the_apply_is_refused(settings, embedder, folder):
    lib = Library(settings, embedder=embedder)
    try:
        links = FolderLinks(settings)
        links.link(folder)
        diff = diff_folder(lib, links, folder)
        assert [c.rel for c in diff.bucket(Bucket.NEW)] == ["keeper.txt", "sub/bees.md"]
        (folder / "keeper.txt").unlink()
        (folder / "keeper.txt").symlink_to(folder.parent / "outside" / "vault.txt")
        results = [apply_change(lib, links, diff.folder, c) for c in diff.pending]
        assert [r.status for r in results] == ["failed", "added"]
        assert results[0].error == ("“keeper.txt” is now a link that leads outside the folder (or was swapped while "
                                    "DocChat opened it), so it was not read; nothing was changed.")
        assert [d.title for d in lib.documents()] == ["Bees"]
        passages = lib.search("vault combination", k=5)
        assert passages and not any("vault" in p.chunk.text for p in passages)  # only the bees answer

        shutil.rmtree(folder)  # the whole folder swapped for a link after the check
        folder.symlink_to(folder.parent / "outside")
        result = apply_change(lib, links, diff.folder, diff.bucket(Bucket.NEW)[0])
        assert result.status == "failed" and "is now a link to" in (result.error or "")
        assert [d.title for d in lib.documents()] == ["Bees"]
    finally:
        lib.close()


@pytest.mark.remembered_vectors
def test_the_library_page_never_links_proc_and_its_check_says_a_folder_was_replaced(settings, embedder, folder):
    from rag_core.core.errors import SystemFolderRefused
    from rag_core.service.jobs import IngestQueue
    from rag_core.service.workspace import LocalWorkspace

    lib = Library(settings, embedder=embedder)
    try:
        ws = LocalWorkspace(lib, IngestQueue(lib))
        proc = folder.parent / "proc-link"
        proc.symlink_to("/proc")
        with pytest.raises(SystemFolderRefused, match="leads into /proc, a system folder"):
            ws.link_folder(str(proc), confirmed=True)
        assert ws.linked_folders() == []

        ws.link_folder(str(folder), confirmed=True)
        assert ws.linked_folders()[0].pin is not None
        folder.rename(folder.parent / "Reports.moved")
        folder.symlink_to("/etc")
        check = ws.check_folder(str(folder))
        assert check.diff is None and check.needs_review
        assert check.error and check.error.startswith(f"The linked folder “{folder}” is now a link to /etc")
    finally:
        lib.close()
