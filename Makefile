# Self-attention from scratch: build, test and run the book.  `make help` lists the targets.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONHASHSEED := 0

.PHONY: help setup book test unit nbval build-strict lab refresh lint clean

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with the pinned packages (done once; redone when requirements change)

book: $(STAMP)  ## execute every chapter and write the website to _build/html
	jupyter-book build . --keep-going
	@echo "Open _build/html/index.html in a browser."

test: unit nbval build-strict  ## unit tests, nbval over every chapter, and a warnings-as-errors book build

unit: $(STAMP)  ## unit tests of attn_helpers and the book's invariants
	$(PY) -m pytest tests -q

nbval: $(STAMP)  ## re-execute every chapter and compare each cell's output with the committed one
	$(PY) -m pytest --nbval chapters --nbval-sanitize-with tests/sanitize.cfg -n 2 --dist loadfile -q -p no:cacheprovider

build-strict: $(STAMP)  ## build the website, failing on any warning or broken reference
	jupyter-book build . -W -n --keep-going

lab: $(STAMP)  ## open the chapters in JupyterLab with the book's environment
	jupyter lab chapters/

refresh: $(STAMP)  ## re-execute every chapter in place (after editing one) and strip volatile metadata
	$(PY) scripts/run_chapters.py chapters/*.ipynb

lint: $(STAMP)  ## ruff over the package, tests, scripts and notebooks
	ruff check attn_helpers tests scripts chapters

clean:  ## remove the built site and caches (keeps .venv)
	rm -rf _build .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +
