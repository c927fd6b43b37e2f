"""Imported Wikipedia articles in the folder review (issue 39): a newer revision appears in the diff's own
"wikipedia" bucket without anything being fetched or written, and applying it replaces the old revision in one step.
Against the local replay server (tests/wiki_server.py) with the real recordings."""
from __future__ import annotations

import json

import pytest
from wiki_server import FIXTURES, WikiReplayServer  # tests/ is on the path (pytest.ini)

from rag_core.core.config import Settings
from rag_core.service import wiki_sync
from rag_core.service.folder_sync import Bucket
from rag_core.service.library import Library
from rag_core.service.linked_folders import FolderLinks
from rag_core.service.wiki_changes import ARTICLES, apply_any, wikipedia_changes
from rag_core.sources import wikipedia as W

DA_ID = 8091


def _recorded(name: str):
    return json.loads((FIXTURES / name).read_text(encoding="utf-8"))


def adams_body(rev: int | None = None, by_pageid: bool = False) -> dict:
    """The recorded redirect "Adams, Douglas" -> "Douglas Adams" with the plain-text extract of the REST summary
    recording (REPLACED, as in test_wikipedia.py); `rev` ADDED when given."""
    body = _recorded("redirect_query-fv2_adams-douglas.json")
    page = body["query"]["pages"][0]
    page["extract"] = _recorded("rest_page-summary_douglas-adams.json")["extract"]
    if rev is not None:
        page["lastrevid"] = rev
    if by_pageid:
        del body["query"]["redirects"]
    return body


DA_REV = _recorded("redirect_query-fv2_adams-douglas.json")["query"]["pages"][0]["lastrevid"]


def info_body(rev: int) -> dict:
    return {"batchcomplete": "", "query": {"pages": {str(DA_ID): {"pageid": DA_ID, "ns": 0, "title": "Douglas Adams",
                                                                 "lastrevid": rev}}}}  # ADDED


@pytest.fixture
def server():
    with WikiReplayServer() as s:
        yield s


def test_a_new_revision_is_its_own_bucket_and_applies_in_one_step(server, tmp_path, embedder):
    settings = Settings(data_dir=tmp_path / "data", wikipedia_api=server.url_template, wikipedia_timeout_s=5.0,
                        wikipedia_backoff_s=0.02, wikipedia_contact="docchat-tests@example.invalid")
    lib = Library(settings, embedder=embedder)
    try:
        server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())
        da = wiki_sync.import_article(lib, settings, "Adams, Douglas")
        assert da.status == "added"

        server.respond({"prop": "info", "pageids": str(DA_ID)}, info_body(DA_REV))
        same = wikipedia_changes(lib)
        assert same.pending == () and [c.rel for c in same.bucket(Bucket.UNCHANGED)] == ["Douglas Adams"]

        new_rev = DA_REV + 7
        server.clear()
        server.respond({"prop": "info", "pageids": str(DA_ID)}, info_body(new_rev))
        diff = wikipedia_changes(lib)
        assert diff.folder == ARTICLES and diff.summary() == "1 article changed on Wikipedia"
        [change] = diff.bucket(Bucket.WIKIPEDIA)
        assert (change.rel, change.old_doc_id) == ("Douglas Adams", da.doc_id)
        assert server.count({"prop": "extracts"}) == 0  # the review fetched no article
        assert [d.doc_id for d in lib.documents()] == [da.doc_id]

        server.respond({"pageids": str(DA_ID), "prop": "extracts"}, adams_body(rev=new_rev, by_pageid=True))
        seen = []
        real = lib.store.backend.set_status
        lib.store.backend.set_status = lambda doc_id, status: seen.append(lib.store.gate._swapping) or real(
            doc_id, status)
        result = apply_any(lib, FolderLinks(settings), diff.folder, change)
        assert result.status == "added" and result.doc_id == W.make_doc_id("en", DA_ID, new_rev)
        assert [(d.doc_id, d.revision_id) for d in lib.documents()] == [(result.doc_id, new_rev)]
        assert seen and all(seen)  # the old revision was swapped for the new one behind the gate
        assert lib.store.count_chunks() == lib.documents()[0].chunks
    finally:
        lib.close()


def test_cli_sync_lists_and_applies_the_wikipedia_bucket(server, tmp_path, embedder, monkeypatch, capsys):
    from rag_core.adapters.cli.main import main

    settings = Settings(data_dir=tmp_path / "data", wikipedia_api=server.url_template, wikipedia_timeout_s=5.0,
                        wikipedia_backoff_s=0.02, wikipedia_contact="docchat-tests@example.invalid")
    lib = Library(settings, embedder=embedder)
    server.respond({"titles": "Adams, Douglas", "prop": "extracts"}, adams_body())
    assert wiki_sync.import_article(lib, settings, "Adams, Douglas").status == "added"
    lib.close()
    folder = tmp_path / "Notes"
    folder.mkdir()
    (folder / "a.txt").write_text("A short note about the harbour and its ferries.")
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_API", server.url_template)
    monkeypatch.setenv("DOCCHAT_WIKIPEDIA_BACKOFF", "0.02")
    server.respond({"prop": "info", "pageids": str(DA_ID)}, info_body(DA_REV + 3))
    data = str(tmp_path / "data")
    assert main(["sync", str(folder), "--dry-run", "--wikipedia", "--json", "--data-dir", data]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["counts"] == {"new": 1, "changed": 0, "removed": 0, "unchanged": 0, "wikipedia": 1}
    assert got["wikipedia"] == ["Douglas Adams"]
    assert main(["sync", str(folder), "--dry-run", "--data-dir", data]) == 0  # without the flag: files only
    assert "wikipedia" not in capsys.readouterr().out

    server.respond({"pageids": str(DA_ID), "prop": "extracts"}, adams_body(rev=DA_REV + 3, by_pageid=True))
    assert main(["sync", str(folder), "--wikipedia", "--yes", "--data-dir", data]) == 0
    out = capsys.readouterr().out
    assert "1 new, 0 changed, 0 removed, 0 unchanged, 1 wikipedia" in out and "Applied 2 of 2 changes." in out
    lib = Library(settings, embedder=embedder)
    try:
        assert sorted((d.kind, d.revision_id) for d in lib.documents()) == [("txt", None),
                                                                          ("wikipedia", DA_REV + 3)]
    finally:
        lib.close()
