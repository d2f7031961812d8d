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
	$(BIN)/pip install -q -e '.[test]'
	touch $@

setup: $(BIN)/orthotune

demo: setup
	$(BIN)/orthotune train --dataset cora --setting full --split 0 --backbone gcn --depth 8 --ortho --T 4 --beta 0.4 --lam 5e-4 --seed 0

test: setup
	$(BIN)/ruff check .
	$(BIN)/python -m pytest -q

.PHONY: setup demo test
