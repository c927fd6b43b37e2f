"""How the command line starts, as a user starts it (a fresh process each): commands that embed nothing never load the
embedding model nor the search engine's client libraries (issue 28: `docchat list` took ~15 s and showed "Loading
weights"), --json keeps the Hugging Face progress bars off stderr, and every usage line names `docchat`."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.store_helpers import add_synthetic, open_bare_store

ROOT = Path(__file__).resolve().parents[2]
DOCCHAT = Path(sys.executable).with_name("docchat")  # the console script `pip install -e .` put beside python
# Modules that take seconds to import: the embedding model's stack, and langchain-qdrant / qdrant-client (only a
# search, an ingest or a library upgrade needs them).
HEAVY = ("onnxruntime", "torch", "sentence_transformers", "transformers", "langchain_qdrant", "qdrant_client")
# Runs the `docchat` entry point, then says on the last line of stderr which heavy modules the command imported.
GUARDED = ("import json, sys\n"
           "from rag_core.__main__ import main\n"
           "try:\n"
           "    code = main(sys.argv[1:])\n"
           "except SystemExit as e:\n"
           "    code = e.code if isinstance(e.code, int) else 0\n"
           f"heavy = sorted({{m.split('.')[0] for m in sys.modules}} & set({HEAVY!r}))\n"
           "print('IMPORTED ' + json.dumps(heavy), file=sys.stderr)\n"
           "sys.exit(code)\n")


def _env(data: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "HF_HUB_DISABLE_PROGRESS_BARS"}
    return {**env, "DOCCHAT_DATA_DIR": str(data)}


def guarded(data: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    """Run `docchat ARGS` in a new process; (the run, the heavy modules it imported)."""
    run = subprocess.run([sys.executable, "-c", GUARDED, *args], cwd=ROOT, env=_env(data), capture_output=True,
                         text=True, timeout=300)
    last = run.stderr.rstrip().splitlines()[-1]
    assert last.startswith("IMPORTED "), run.stderr
    return run, json.loads(last.removeprefix("IMPORTED "))


@pytest.fixture(scope="module")
def small_library(tmp_path_factory) -> Path:
    """A real Qdrant Edge library of two documents (vectors given, so no model is loaded to build it)."""
    data = tmp_path_factory.mktemp("startup") / "data"
    store = open_bare_store("edge", str(data))
    try:
        add_synthetic(store, "doc-one", 5)
        add_synthetic(store, "doc-two", 3, seed=1)
    finally:
        store.close()
    return data


@pytest.mark.parametrize("args", [["--help"], ["list"], ["list", "--json"], ["settings"], ["settings", "--json"],
                                  ["mcp", "--help"], ["migrate"]])
def test_commands_that_embed_nothing_load_no_model(small_library, args):
    run, heavy = guarded(small_library, *args)
    assert run.returncode == 0, run.stderr
    assert heavy == [], f"`docchat {' '.join(args)}` imported {heavy}"
    assert "Loading weights" not in run.stderr
    if args == ["list", "--json"]:
        assert sorted(d["title"] for d in json.loads(run.stdout)["documents"]) == ["Title doc-one", "Title doc-two"]


def test_delete_loads_no_model(small_library, tmp_path):
    import shutil

    data = tmp_path / "data"
    shutil.copytree(small_library, data)
    run, heavy = guarded(data, "delete", "doc-two", "--json")
    assert run.returncode == 0, run.stderr
    assert json.loads(run.stdout) == {"deleted": "doc-two", "title": "Title doc-two"}
    assert heavy == [] and "Loading weights" not in run.stderr
    run, _ = guarded(data, "list", "--json")
    assert [d["doc_id"] for d in json.loads(run.stdout)["documents"]] == ["doc-one"]


def test_search_loads_the_model_and_json_keeps_progress_bars_off_stderr(small_library):
    """A command that embeds does load the model, when it first needs it; with --json no "Loading weights" bar."""
    run, heavy = guarded(small_library, "search", "lighthouse keeper", "-k", "2", "--json")
    assert run.returncode == 0, run.stderr
    assert "onnxruntime" in heavy and not {"torch", "sentence_transformers", "transformers"} & set(heavy)
    assert len(json.loads(run.stdout)["hits"]) == 2
    assert "Loading weights" not in run.stderr and "%|" not in run.stderr, run.stderr


@pytest.mark.parametrize("command", [[sys.executable, "-m", "rag_core"], [str(DOCCHAT)]])
def test_every_usage_line_names_docchat(command):
    """`docchat mcp --help` said "usage: python -m rag_core mcp"; started either way, it is the command to type."""
    for args in (["--help"], ["mcp", "--help"], ["list", "--help"]):
        run = subprocess.run([*command, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stderr
        first = run.stdout.splitlines()[0]
        assert first.startswith("usage: docchat" + (f" {args[0]}" if len(args) > 1 else "")), first
