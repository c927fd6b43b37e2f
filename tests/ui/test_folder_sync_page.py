"""The Library page's linked folders (issue 39) with AppTest, the real library and ingest queue: link a folder
(outside home: asked first), review the buckets, untick a file, apply, edit a file on disk, see the badge after a
check, review and apply again, Undo a removal; the hosted demo refuses linking with one sentence."""
from __future__ import annotations

import os

import pytest
from ui_helpers import button, new_app, plain, texts, wait_for_jobs

from rag_core.core.errors import LinkingRefused
from rag_core.service.folder_watch import watch_for
from rag_core.service.folder_workspace import LinkedFolders


def _page(at) -> str:
    return plain(" ".join(texts(at.markdown) + texts(at.warning) + texts(at.info) + texts(at.caption)
                          + [e.label for e in at.expander]))


@pytest.fixture
def folder(tmp_path):
    root = tmp_path / "Reports"
    root.mkdir()
    (root / "keeper.txt").write_text("The lighthouse keeper lights the lamp each evening for the passing ships.")
    (root / "bees.md").write_text("# Bees\n\nHoney bees dance to show the hive where the flowers grow.")
    (root / "volcano.txt").write_text("A volcano erupts when magma pushes molten rock up to the surface.")
    return root


def test_link_review_apply_edit_badge_and_review_again(app, folder):
    at = new_app("pages/library.py")
    at.text_input(key="link_path").input(str(folder))
    button(at, "Link folder").click().run()
    assert not at.exception
    assert "outside your home folder" in _page(at)  # /tmp: asked first, nothing linked yet
    assert app.library.documents() == [] and watch_for(app.library).links.all() == []
    button(at, "Link it anyway").click().run()
    assert not at.exception
    page = _page(at)
    assert "3 files changed in Reports" in page and "3 new · 0 changed · 0 removed · 0 unchanged" in page
    assert sorted(plain(c.label) for c in at.checkbox) == ["bees.md", "keeper.txt", "volcano.txt"]
    assert app.library.documents() == []  # nothing changes before Apply

    next(c for c in at.checkbox if plain(c.label) == "volcano.txt").uncheck().run()
    button(at, "Apply 2 changes").click().run()
    assert not at.exception
    wait_for_jobs(at, app.queue)
    assert sorted(d.file_name for d in app.library.documents()) == ["bees.md", "keeper.txt"]
    assert "Added **keeper.txt**" in [plain(s.label).split(" — ")[0] for s in at.status]

    # edited on disk, found by a check (as the interval re-check makes): a badge, never applied silently
    old = (folder / "keeper.txt").stat().st_mtime_ns
    (folder / "keeper.txt").write_text("The lighthouse keeper now keeps a ledger of every ship that passes.")
    os.utime(folder / "keeper.txt", ns=(old + 2_000_000_000, old + 2_000_000_000))
    (folder / "bees.md").unlink()
    watch_for(app.library).check_all()
    at.run()
    assert not at.exception
    page = _page(at)
    assert "3 files changed in Reports — review below." in [plain(w.value) for w in at.warning][0]
    assert "1 new · 1 changed · 1 removed · 0 unchanged" in page
    assert sorted(d.file_name for d in app.library.documents()) == ["bees.md", "keeper.txt"]
    button(at, "Apply 3 changes").click().run()
    assert not at.exception
    wait_for_jobs(at, app.queue)
    assert sorted(d.file_name for d in app.library.documents()) == ["keeper.txt", "volcano.txt"]
    assert "Removed “Bees” from your library" in _page(at)
    assert any("ledger" in h.chunk.text for h in app.library.search("lighthouse keeper ledger", k=3))

    other = new_app("pages/library.py")  # another tab (or a reload): the removal is listed there with its Undo
    assert "Removed from linked folders (1)" in [e.label for e in other.expander]

    button(at, "Undo").click().run()
    assert not at.exception
    assert sorted(d.file_name for d in app.library.documents()) == ["bees.md", "keeper.txt", "volcano.txt"]
    button(at, "Check for changes").click().run()
    assert "Reports is up to date" in _page(at) and not at.warning


def test_a_vanished_folder_is_one_sentence(app, folder):
    at = new_app("pages/library.py")
    at.text_input(key="link_path").input(str(folder / "nowhere"))
    button(at, "Link folder").click().run()
    assert not at.exception
    assert "is not there any more" in plain(" ".join(texts(at.error)))


def test_the_hosted_demo_refuses_linking():
    from rag_core.demo.workspace import DemoWorkspace

    assert DemoWorkspace.link_folder is LinkedFolders.link_folder  # the demo keeps the refusal
    with pytest.raises(LinkingRefused, match="only when DocChat runs on your own computer"):
        LinkedFolders().link_folder("/home/someone")
