# Two entry points: `make demo` (set up, run the main job) and `make test` (set up, run the tests).
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
DATA ?= ../shared/data
export ORTHOTUNE_DATA_ROOT ?= $(DATA)
export ORTHOTUNE_CACHE ?= $(CURDIR)/runs/cache

$(BIN)/orthotune: pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0
	@# setuptools prints an informational notice on every editable install through a path
	@# finder (the root is the orthotune package); nothing else is filtered
	PYTHONWARNINGS='ignore:Editable installation' $(BIN)/pip install -q -e '.[test]'
	touch $@

setup: $(BIN)/orthotune

STORE ?= runs/store
# Expanded once (`:=`): a recursive variable would call date on every use, and a recipe that
# crosses a second boundary wrote the two reports into different folders.
ifndef SEARCH
SEARCH := quick-$(shell date +%Y%m%d-%H%M%S)
endif

# A real search (the quick preset) on the local embedded Ray; prints the best config and
# writes the report (Markdown with its plots, and one self-contained HTML file).
demo: setup
	$(BIN)/orthotune launch --space quick --store $(STORE) --name $(SEARCH)
	$(BIN)/orthotune report --store $(STORE) --search $(SEARCH) -o runs/$(SEARCH)/report.md -o runs/$(SEARCH)/report.html
	@echo "report: runs/$(SEARCH)/report.md and runs/$(SEARCH)/report.html"
	@echo "the commands orthotune prints run in its environment: source $(BIN)/activate (README: First steps)"

# The README's picture: the verdicts and paired table of the HTML report of bench/verdict-full.yaml
# (Cora and Wisconsin, both arms beside the structure-agnostic baseline; about half an hour on
# 2 cores; started, continued or read by name), shot in a headless chromium (docs/_screenshot.py).
PICTURE_STORE ?= runs/verdict
picture: setup
	$(BIN)/orthotune launch --space bench/verdict-full.yaml --store $(PICTURE_STORE) --name verdict-full --start-or-resume
	$(BIN)/orthotune report --store $(PICTURE_STORE) --search verdict-full -o $(PICTURE_STORE)/report.html
	$(BIN)/python docs/_screenshot.py $(PICTURE_STORE)/report.html -o docs/img/verdict.png

# The manual (mkdocs.yml, docs/) into runs/site; --strict turns a broken link or anchor, or a
# page missing from the nav, into a failure (NO_MKDOCS_2_WARNING: Material's banner about MkDocs 2,
# which mkdocs<2 in pyproject keeps away).
docs: setup
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Needs no root: the HTML report's browser check uses a chromium or Chrome found on PATH and
# is skipped with one line without one (.ci/run installs Debian's chromium first).
test: docs
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

# The tests not marked slow (no real searches): a quick check while working.
test-fast: setup
	$(BIN)/python -m pytest -q -m "not slow"

.PHONY: setup demo picture docs test test-fast
