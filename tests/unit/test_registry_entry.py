"""Registry entries are frozen dataclasses (RegistryEntry) whose on-disk JSON form is the one earlier releases wrote:
an entry read and written again comes out key for key, in the same order, and a library whose registry was written
by an earlier release (plain dict payloads) still opens, lists, flags and deletes."""
from __future__ import annotations

import dataclasses
import time

import pytest
from qdrant_client import QdrantClient, models
from store_helpers import SERVER_FOLDER, add_synthetic, open_bare_store

from rag_core.core.models import DocumentInfo
from rag_core.store.backends import COMPLETE, DELETING, PENDING, REMOVED, RegistryEntry, registry_point_id

# Payloads as the previous release wrote them (tests/fixtures/legacy_library's registry, two of its entries).
OLD_MD = {"doc_id": "b0a2c91b18e378d4", "title": "Capitals of the European Union", "kind": "md", "pages": None,
          "chunks": 6, "added_at": "2026-11-30T20:21:08+00:00", "file_name": "eu_capitals.md", "url": None,
          "sha256": "b0a2c91b18e378d4828ec558f3742d029874190f37376e4aa01aa08ddd6a968f", "revision_id": None,
          "lang": None, "page_id": None, "owner": None, "flags": [], "status": "complete",
          "started": 1796070069.0310645}
OLD_WIKI = {"doc_id": "wp-sample-14362805d833e5d7", "title": "Python (programming language)", "kind": "wikipedia",
            "pages": None, "chunks": 58, "added_at": "2026-11-30T20:21:09+00:00",
            "file_name": "Python (programming language)",
            "url": "https://en.wikipedia.org/wiki/Python_(programming_language)",
            "sha256": "a9940d65b481594e985a246f7d7bb1eca0da4bb11c3a7be5b486a8ac95ab8a07", "revision_id": None,
            "lang": "en", "page_id": 23862, "owner": "s-" + "a" * 24, "flags": ["removed upstream"],
            "status": "complete", "started": 1796070071.354478}


@pytest.mark.parametrize("payload", [
    OLD_MD, OLD_WIKI,
    {**OLD_MD, "status": "pending", "replaces": "0123456789abcdef"},  # a replacement not finished
    {**OLD_MD, "status": "removed", "removed_at": 1796070100.5},  # a linked folder's file gone, kept for Undo
    {**OLD_MD, "written_by": "a later release"},  # a key this release does not know is kept
])
def test_payload_round_trips_key_for_key(payload):
    entry = RegistryEntry.from_payload(payload)
    assert list(entry.to_payload().items()) == list(payload.items())
    assert dataclasses.is_dataclass(entry)
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.status = PENDING  # type: ignore[misc]


def test_fields_and_listing():
    entry = RegistryEntry.from_payload(OLD_WIKI)
    assert (entry.doc_id, entry.status, entry.flags, entry.page_id, entry.replaces) == (
        OLD_WIKI["doc_id"], COMPLETE, ("removed upstream",), 23862, None)
    assert entry.info() == DocumentInfo(
        doc_id=OLD_WIKI["doc_id"], title="Python (programming language)", kind="wikipedia", pages=None, chunks=58,
        added_at="2026-11-30T20:21:09+00:00", file_name="Python (programming language)", url=OLD_WIKI["url"],
        sha256=OLD_WIKI["sha256"], lang="en", page_id=23862, owner="s-" + "a" * 24, flags=("removed upstream",))
    assert entry.with_status(REMOVED, removed_at=5.0).to_payload() == {**OLD_WIKI, "status": "removed",
                                                                        "removed_at": 5.0}


def test_a_sparse_payload_reads_with_defaults():
    entry = RegistryEntry.from_payload({"doc_id": "doc-ghost", "status": PENDING, "started": 0})
    assert (entry.title, entry.chunks, entry.flags, entry.started) == ("", 0, (), 0)


def test_a_new_entry_is_written_in_the_old_layout(tmp_path):
    store = open_bare_store("edge", str(tmp_path))
    try:
        add_synthetic(store, "doc-new", 3)
        entry = store.backend.get_entry("doc-new")
    finally:
        store.close()
    assert entry is not None
    assert list(entry.to_payload()) == list(OLD_MD)  # the same keys in the same order
    assert (entry.status, entry.chunks, entry.kind, entry.flags) == (COMPLETE, 3, "txt", ())


def _raw_entries(folder, collection="docchat") -> dict[str, dict]:
    client = QdrantClient(path=str(folder))
    try:
        found, _ = client.scroll(f"{collection}__library", limit=100, with_payload=True)
    finally:
        client.close()
    return {str(p.id): dict(p.payload or {}) for p in found}


def test_a_registry_written_in_the_old_form_still_opens(tmp_path):
    """Entries put into the registry as the previous release did (plain dicts, straight through qdrant-client) are
    listed, flagged and deleted; what is written back keeps their form."""
    open_bare_store("server", str(tmp_path)).close()  # the collections
    folder = tmp_path / SERVER_FOLDER
    client = QdrantClient(path=str(folder))
    try:
        ghost = {"doc_id": "doc-ghost", "status": DELETING, "started": time.time(), "title": "Ghost"}
        client.upsert("docchat__library", wait=True, points=[
            models.PointStruct(id=registry_point_id(p["doc_id"]), vector={}, payload=p)
            for p in ({**OLD_MD, "chunks": 0}, {**OLD_WIKI, "chunks": 0}, ghost)])
    finally:
        client.close()
    store = open_bare_store("server", str(tmp_path))  # cleanup_pending finishes the half-deleted ghost
    try:
        listed = {d.doc_id: d for d in store.list_documents()}
        assert set(listed) == {OLD_MD["doc_id"], OLD_WIKI["doc_id"]}
        assert listed[OLD_WIKI["doc_id"]].flags == ("removed upstream",)
        assert store.list_documents(owners=[None])[0].title == OLD_MD["title"]
        store.set_flags(OLD_MD["doc_id"], ["removed upstream"])
        store.delete(OLD_WIKI["doc_id"])
    finally:
        store.close()
    raw = _raw_entries(folder)
    assert raw == {registry_point_id(OLD_MD["doc_id"]): {**OLD_MD, "chunks": 0, "flags": ["removed upstream"]}}
    assert list(raw[registry_point_id(OLD_MD["doc_id"])]) == list(OLD_MD)
