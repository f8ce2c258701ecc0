# Self-attention from scratch: build, test and run the book.  `make help` lists the targets.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)
export PYTHONHASHSEED := 0
# Tests of the built website: they run after build-strict, not with the unit tests.
SITE_TESTS := tests/test_links.py tests/test_browser.py
# Where the website is built: BOOK_OUT/_build/html (scripts/bench.py builds elsewhere from clean).
BOOK_OUT ?= .

.PHONY: help setup lock book test unit nbval build-strict browser bench lab refresh lint clean student nbgrader grade

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

setup: $(STAMP)  ## create .venv with the pinned packages (done once; redone when requirements change)

# pip-compile runs in its own small environment, so the book's stays exactly the lock. The sed: a local
# CPU wheel reports torch 2.13.0+cpu; PyPI's has no such label, and ==2.13.0 matches both.
LOCK_VENV := .venv-lock
lock:  ## regenerate requirements.txt, the complete lock, from requirements.in with pip-tools' pip-compile
	test -x $(LOCK_VENV)/bin/pip-compile || { python3 -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install --quiet pip-tools==7.6.2; }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --allow-unsafe --strip-extras \
		--no-emit-find-links --no-emit-index-url --no-emit-trusted-host -o requirements.txt requirements.in
	sed -i -E 's/^(torch==[0-9.]+)\+cpu$$/\1/' requirements.txt

book: $(STAMP)  ## execute every chapter and write the website to _build/html
	$(PY) scripts/execute_cache.py --cache $(BOOK_OUT)/_build/.jupyter_cache
	jupyter-book build . --path-output $(BOOK_OUT) --keep-going
	@echo "Open $(BOOK_OUT)/_build/html/index.html in a browser."

test: $(STAMP)  ## lint, unit tests + nbval over every chapter (2 processes), strict website build, link and browser tests
	ruff check attn_helpers tests scripts chapters _ext
	$(PY) -m pytest tests chapters --nbval --nbval-sanitize-with tests/sanitize.cfg -n 2 --dist loadfile -q -p no:cacheprovider $(addprefix --ignore=,$(SITE_TESTS))
	$(MAKE) --no-print-directory build-strict browser

unit: $(STAMP)  ## unit tests of attn_helpers and the book's invariants
	$(PY) -m pytest tests -q $(addprefix --ignore=,$(SITE_TESTS))

nbval: $(STAMP)  ## re-execute every chapter and compare each cell's output with the committed one
	$(PY) -m pytest --nbval chapters --nbval-sanitize-with tests/sanitize.cfg -n 2 --dist loadfile -q -p no:cacheprovider

build-strict: $(STAMP)  ## build the website from the committed outputs, failing on any warning or broken reference
	BOOK_EXECUTE=off jupyter-book build . --path-output $(BOOK_OUT) -W -n --keep-going

browser: $(STAMP)  ## check the built website: internal links, and every page in headless Chromium (screenshots)
	BOOK_HTML=$(BOOK_OUT)/_build/html $(PY) -m pytest $(SITE_TESTS) -q -p no:cacheprovider

bench: $(STAMP)  ## time make test, unit tests, website builds, import, ah.attention and ah.softmax, GloVe loading
	$(PY) scripts/bench.py $(BENCH_ARGS)

lab: $(STAMP)  ## open the chapters in JupyterLab with the book's environment
	jupyter lab chapters/

refresh: $(STAMP)  ## re-execute every chapter in place (after editing one) and strip volatile metadata
	$(PY) scripts/run_chapters.py chapters/*.ipynb

student: $(STAMP)  ## write student editions (stubs for solutions, plain Markdown for JupyterLab) to student/
	$(PY) scripts/make_student.py chapters/*.ipynb --out student

nbgrader: $(STAMP)  ## write an nbgrader course (source/chNN/NN_slug.ipynb) to nbgrader-course/
	$(PY) scripts/make_nbgrader.py chapters/*.ipynb --out nbgrader-course

grade: $(STAMP)  ## run the self-checks on submitted notebooks: make grade SUBMISSIONS=path/to/folder
	@test -n "$(SUBMISSIONS)" || { echo "Usage: make grade SUBMISSIONS=path/to/folder [GRADES=grades.csv]"; exit 2; }
	$(PY) scripts/grade.py "$(SUBMISSIONS)" $(if $(GRADES),--csv "$(GRADES)")

lint: $(STAMP)  ## ruff over the package, tests, scripts and notebooks
	ruff check attn_helpers tests scripts chapters _ext

clean:  ## remove the built site and caches (keeps .venv)
	rm -rf _build .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -prune -exec rm -rf {} +
