"""The app with a file whose name is not UTF-8 (Latin-1 bytes) in a linked folder (issue 47): the review lists it
as "caf�.txt", Apply adds it from its real name, the Library page shows its title, no exception anywhere. AppTest,
the real library and ingest queue."""
from __future__ import annotations

import os

import pytest
from ui_helpers import button, new_app, plain, texts, wait_for_jobs

pytestmark = pytest.mark.skipif(os.name == "nt", reason="Windows file names are UTF-16, never bytes")


def test_a_latin1_name_is_reviewed_applied_and_listed(app, tmp_path):
    folder = tmp_path / "Stick"
    folder.mkdir()
    with open(os.path.join(os.fsencode(folder), b"caf\xe9.txt"), "wb") as f:
        f.write(b"The cafe roasts its espresso beans from Ethiopia every Monday morning.\n")
    at = new_app("pages/library.py")
    at.text_input(key="link_path").input(str(folder))
    button(at, "Link folder").click().run()
    button(at, "Link it anyway").click().run()
    assert not at.exception
    assert [plain(c.label) for c in at.checkbox] == ["caf\ufffd.txt"]
    button(at, "Apply 1 change").click().run()
    assert not at.exception
    wait_for_jobs(at, app.queue)
    [doc] = app.library.documents()
    assert (doc.file_name, doc.title) == ("caf\ufffd.txt", "caf\ufffd")
    again = new_app("pages/library.py")
    assert not again.exception
    shown = plain(" ".join(texts(again.markdown) + texts(again.caption) + [e.label for e in again.expander]))
    assert "caf\ufffd" in shown
