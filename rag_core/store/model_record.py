"""One library, one embedding model (issue 46): which model made a library's vectors, and which folder is the library.

The record is the library metadata every store already keeps ({"embedding_model", "dim"}; rag_core.store.backends):
a library without it is the bundled MiniLM's (every library before the record existed was). A store is opened only
with the record's model (another is refused with one sentence, EmbeddingModelMismatch, before any search), and its
model and store are swapped together; a server answering vectors of another size is refused per request
(rag_core.store.server_embeddings, EmbeddingSizeWrong). So no search ever mixes two models' vectors.

Re-embedding with another model (rag_core.service.reembed) builds a side library next to the current one,
`<data_dir>/edge/.<collection>.model-<hash of the model>/`, and the switch is one atomic step: the pointer file
`<data_dir>/edge/<collection>.active.json` ({"folder", "model", "dim"}), written with write_atomic (a temporary file,
fsync, rename). Without a pointer the library is `<data_dir>/edge/<collection>/`, as before. While a re-embed runs,
the plan file `<collection>.reembed.json` ({"folder", "model"}) says which side folder is being built; a process
killed meanwhile leaves the pointer (so the old library) untouched, and the next start resumes the plan (same
model asked for) or discards it (`stale_folders` names what to remove).

The model asked for is DOCCHAT_EMBEDDING_MODEL's, unless the Settings page chose another since: its choice file
`<collection>.choice.json` ({"model", "setting"}) names the model chosen and the DOCCHAT_EMBEDDING_MODEL value it was
chosen under. The latest decision wins: while the variable still has that value the choice holds; once the variable
is changed, the variable does (`wanted_model`).
"""
from __future__ import annotations

import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from rag_core.core.config import DEFAULT_EMBEDDING_MODEL
from rag_core.core.files import write_atomic

if TYPE_CHECKING:
    from rag_core.core.config import Settings

log = logging.getLogger(__name__)

LEGACY_DIM = 384  # all-MiniLM-L6-v2's vectors: what a library without a record holds
POINTER_SUFFIX = ".active.json"
PLAN_SUFFIX = ".reembed.json"
CHOICE_SUFFIX = ".choice.json"


@dataclass(frozen=True)
class ModelRecord:
    """The embedding model that made a library's vectors, and their size."""

    name: str
    dim: int

    @classmethod
    def from_meta(cls, meta: dict[str, Any] | None) -> ModelRecord:
        """The record in a library's metadata; none there (a library older than the record): the bundled MiniLM."""
        meta = meta or {}
        name = meta.get("embedding_model") or DEFAULT_EMBEDDING_MODEL
        dim = meta.get("dim") or (LEGACY_DIM if name == DEFAULT_EMBEDDING_MODEL else 0)
        return cls(str(name), int(dim))

    @classmethod
    def of_store(cls, store: _HasBackend) -> ModelRecord:
        """The record of an open store (rag_core.store.vector_store.Store), read from its metadata."""
        return cls.from_meta(store.backend.read_meta())


class _MetaReader(Protocol):
    def read_meta(self) -> dict[str, Any] | None: ...


class _HasBackend(Protocol):
    @property
    def backend(self) -> _MetaReader: ...


@dataclass(frozen=True)
class ReembedPlan:
    """A re-embedding under way: the side folder being built and the model building it."""

    folder: str
    model: str


def edge_root(settings: Settings) -> Path:
    """The folder that holds the embedded libraries."""
    return settings.library.data_dir / "edge"


def pointer_path(settings: Settings) -> Path:
    return edge_root(settings) / f"{settings.library.collection}{POINTER_SUFFIX}"


def plan_path(settings: Settings) -> Path:
    return edge_root(settings) / f"{settings.library.collection}{PLAN_SUFFIX}"


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:  # a damaged pointer cannot happen (atomic writes); say so and ignore it
        log.warning("Ignoring the unreadable %s (%s)", path, e)
        return None
    return data if isinstance(data, dict) else None


def active_folder(settings: Settings) -> Path:
    """The folder of this collection's library: the pointer's, else `<data_dir>/edge/<collection>/`."""
    pointer = _read_json(pointer_path(settings))
    folder = pointer.get("folder") if pointer else None
    if isinstance(folder, str) and _safe_name(folder):
        return edge_root(settings) / folder
    return edge_root(settings) / settings.library.collection


def side_folder(settings: Settings, model: str) -> Path:
    """Where a re-embedding with `model` builds its library (hidden, one per model)."""
    digest = hashlib.sha256(model.encode()).hexdigest()[:12]
    return edge_root(settings) / f".{settings.library.collection}.model-{digest}"


def _safe_name(folder: str) -> bool:
    return bool(re.fullmatch(r"[^/\\]+", folder)) and folder not in (".", "..")


def write_pointer(settings: Settings, folder: Path, record: ModelRecord) -> None:
    """Make `folder` the library, in one atomic step (the switch)."""
    data = {"folder": folder.name, "model": record.name, "dim": record.dim}
    write_atomic(pointer_path(settings), json.dumps(data).encode())


def read_plan(settings: Settings) -> ReembedPlan | None:
    data = _read_json(plan_path(settings))
    if not data or not isinstance(data.get("folder"), str) or not isinstance(data.get("model"), str):
        return None
    return ReembedPlan(data["folder"], data["model"]) if _safe_name(data["folder"]) else None


def write_plan(settings: Settings, plan: ReembedPlan) -> None:
    write_atomic(plan_path(settings), json.dumps({"folder": plan.folder, "model": plan.model}).encode())


def drop_plan(settings: Settings) -> None:
    plan_path(settings).unlink(missing_ok=True)


def choice_path(settings: Settings) -> Path:
    return edge_root(settings) / f"{settings.library.collection}{CHOICE_SUFFIX}"


def write_choice(settings: Settings, model: str) -> None:
    """Remember the model chosen on the Settings page (under the current DOCCHAT_EMBEDDING_MODEL value)."""
    if model == settings.library.embedding_model:
        choice_path(settings).unlink(missing_ok=True)
        return
    edge_root(settings).mkdir(parents=True, exist_ok=True)
    data = {"model": model, "setting": settings.library.embedding_model}
    write_atomic(choice_path(settings), json.dumps(data).encode())


def wanted_model(settings: Settings) -> str:
    """The model the library should have: the Settings page's choice while DOCCHAT_EMBEDDING_MODEL is unchanged
    since it was made, else DOCCHAT_EMBEDDING_MODEL's."""
    data = _read_json(choice_path(settings))
    if data and data.get("setting") == settings.library.embedding_model and isinstance(data.get("model"), str):
        return str(data["model"])
    return settings.library.embedding_model


def library_model(settings: Settings) -> str:
    """The model the library's vectors were made with, without opening it: the pointer's after a switch, else
    DOCCHAT_EMBEDDING_MODEL's (what the command line and the MCP server open it with; they never re-embed)."""
    pointer = None if settings.library.qdrant_url else _read_json(pointer_path(settings))
    model = pointer.get("model") if pointer else None
    return model if isinstance(model, str) and model else settings.library.embedding_model


def stale_folders(settings: Settings, keep: ReembedPlan | None = None) -> list[Path]:
    """Side folders of this collection that are neither the library nor the plan's (`keep`): left by a discarded
    or finished re-embedding, and the old folder after a switch."""
    root, active = edge_root(settings), active_folder(settings)
    if not root.is_dir():
        return []
    prefix, out = f".{settings.library.collection}.model-", []
    for path in root.iterdir():
        ours = path.name == settings.library.collection or path.name.startswith(prefix)
        if ours and path.is_dir() and path != active and (keep is None or path.name != keep.folder):
            out.append(path)
    return out


__all__ = ["ModelRecord", "ReembedPlan", "active_folder", "choice_path", "drop_plan", "edge_root", "library_model",
           "plan_path", "pointer_path", "read_plan", "side_folder", "stale_folders", "wanted_model", "write_choice", "write_plan",
           "write_pointer"]
