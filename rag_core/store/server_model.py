"""One library, one model on a Qdrant server (issue 46): the side collection, the plan and the one-step switch.

A library on a server (QDRANT_URL; rag_core.store.backends.client.ClientBackend) is re-embedded into a side
collection on the same server, `<collection>__model-<hash of the model>` (and its registry
`<collection>__model-<hash>__library`), while searches and uploads keep using the library. The switch is one alias
request: the library's names `<collection>` and `<collection>__library` become aliases of the side collection and its
registry (ClientBackend.switch_alias), so every client that opens `<collection>` gets the new library from then on.
The old collection is then dropped.

The plan ({"folder": side collection, "model"}) is kept in the library's collection metadata under "reembed", so
the next start, wherever it runs, resumes it (same model asked for) or discards it (`stale_collections` names what
to drop). The very first switch of a library has to delete its collections before their names can become aliases;
the side collection is marked ("replaces": the library's name) before, and a start that finds the library's name
missing finishes that switch (`finish_switch`). No other moment of a switch leaves the library without its name.
"""
from __future__ import annotations

import hashlib
import logging
from typing import TYPE_CHECKING

from rag_core.store.model_record import ReembedPlan

if TYPE_CHECKING:
    from rag_core.store.backends.client import ClientBackend

log = logging.getLogger(__name__)

PLAN_KEY = "reembed"
MARK_KEY = "replaces"
SIDE_INFIX = "__model-"


def side_collection(collection: str, model: str) -> str:
    """The side collection a re-embedding of `collection` with `model` builds."""
    return f"{collection}{SIDE_INFIX}{hashlib.sha256(model.encode()).hexdigest()[:12]}"


def read_plan(backend: ClientBackend) -> ReembedPlan | None:
    """The re-embedding under way for the library of `backend`, if any."""
    data = (backend.read_meta() or {}).get(PLAN_KEY)
    if not isinstance(data, dict) or not isinstance(data.get("folder"), str) or not isinstance(data.get("model"), str):
        return None
    return ReembedPlan(data["folder"], data["model"])


def write_plan(backend: ClientBackend, plan: ReembedPlan) -> None:
    meta = backend.read_meta() or {}
    backend.write_meta({**meta, PLAN_KEY: {"folder": plan.folder, "model": plan.model}})


def drop_plan(backend: ClientBackend) -> None:
    meta = backend.read_meta()
    if meta is not None and meta.get(PLAN_KEY) is not None:  # None, not removed: a server merges metadata
        backend.write_meta({**meta, PLAN_KEY: None})


def switch(backend: ClientBackend, collection: str, side: str) -> None:
    """Make `side` the library `collection`, in one step (after marking it, for a first switch cut short)."""
    marked = backend.sibling(side)
    try:
        marked.write_meta({**(marked.read_meta() or {}), MARK_KEY: collection})
    finally:
        marked.close()
    backend.switch_alias(collection, side)


def finish_switch(backend: ClientBackend, collection: str) -> bool:
    """At start: when a first switch was cut short (the library's name gone, a side collection marked to replace
    it), finish it; True when it did."""
    names = backend.collection_names()
    if collection in names or backend.alias_target(collection) is not None:
        return False
    for name in _sides(names, collection):
        side = backend.sibling(name)
        try:
            marked = (side.read_meta() or {}).get(MARK_KEY) == collection
        finally:
            side.close()
        if marked:
            log.warning("Finishing the switch of %s to its re-embedded collection %s", collection, name)
            backend.switch_alias(collection, name)
            return True
    return False


def stale_collections(backend: ClientBackend, collection: str, keep: ReembedPlan | None = None) -> list[str]:
    """Side collections of `collection` that are neither the library nor the plan's (`keep`): a discarded or stopped
    re-embedding's, and the old library after a switch."""
    active = backend.alias_target(collection)
    return [n for n in _sides(backend.collection_names(), collection)
            if n != active and (keep is None or n != keep.folder)]


def drop_collection(backend: ClientBackend, name: str) -> None:
    """Delete the side collection `name` and its registry."""
    side = backend.sibling(name)
    try:
        side.drop()
    finally:
        side.close()


def _sides(names: list[str], collection: str) -> list[str]:
    from rag_core.store.backends.client import REGISTRY_SUFFIX

    prefix = f"{collection}{SIDE_INFIX}"
    return sorted(n for n in names if n.startswith(prefix) and not n.endswith(REGISTRY_SUFFIX))


__all__ = ["drop_collection", "drop_plan", "finish_switch", "read_plan", "side_collection", "stale_collections",
           "switch", "write_plan"]
