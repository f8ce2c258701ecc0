# Self-attention from scratch: build, test and run the book.  `make help` lists the targets.
SHELL := /bin/bash
VENV  := .venv
PY    := $(VENV)/bin/python
STAMP := $(VENV)/.installed
# axe-core (the accessibility engine of tests/test_browser.py), from npm at the version package-lock.json pins.
NODE_STAMP := node_modules/.package-lock.json
export PATH := $(abspath $(VENV))/bin:$(PATH)
# Python's default, even where the environment turns it off (as container images often do): compiled modules
# are cached in __pycache__ (ignored by git), so the many processes of a test run do not each compile the
# book's modules and rewrite its tests' asserts again.
unexport PYTHONDONTWRITEBYTECODE
# Tests in a browser, and of the built website (test_explorer_chNN_browser.py: each chapter's explorers): they run
# after build-strict, not with the unit tests; so does test_editions_match_site.py (the editions' numbers are the
# built website's). The learners' JupyterLab test (test_lab_browser.py) needs no built site, but a browser, as
# test_browser.py does.
SITE_TESTS := tests/test_links.py tests/test_editions_match_site.py $(wildcard tests/test_*browser.py)
# pytest over the tests and chapters: two processes (one per core), each with one torch thread (two threads
# in each of two processes would only contend for the two cores; the outputs are the same, as nbval shows).
# Whole files are handed out in collection order, which tests/conftest.py sorts longest first.
PYTEST := OMP_NUM_THREADS=1 $(PY) -m pytest -n 2 --dist loadfile --no-loadscope-reorder -q -p no:cacheprovider
# Where the website is built: BOOK_OUT/_build/html (scripts/bench.py builds elsewhere from clean).
BOOK_OUT ?= .
# The chapters, as _toc.yml lists them (scripts/book_toc.py, the one answer; read when a recipe uses them).
# make refresh CHAPTERS=chapters/04_queries_keys_values.ipynb re-executes one.
CHAPTERS ?= $(shell $(PY) scripts/book_toc.py)
# make book: jupyter-cache fills Jupyter Book's execution cache, one kernel per core (one torch thread each),
# before the build, which then finds every chapter cached; a chapter whose code did not change is not
# executed again.
JCACHE := JUPYTERCACHE=$(BOOK_OUT)/_build/.jupyter_cache jcache
EXEC_TIMEOUT := $(shell sed -n 's/^  timeout: *\([0-9]*\).*/\1/p' _config.yml)

.PHONY: help setup lock book test unit-nbval portable site unit nbval portability torch-versions margins tolerances build-strict browser bench lab editions refresh lint clean student nbgrader grade

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed 's/:.*## /\t/' | expand -t 16

$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -m pip install --quiet --no-deps -e .
	touch $(STAMP)

$(NODE_STAMP): package.json package-lock.json
	@command -v npm >/dev/null || { echo "make setup needs npm (Debian: apt-get install -y npm) for axe-core"; exit 1; }
	npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $(NODE_STAMP)

setup: $(STAMP) $(NODE_STAMP)  ## create .venv and node_modules/ with the pinned packages (redone when they change)

# pip-compile runs in its own small environment, so the book's stays exactly the lock. The sed: a local
# CPU wheel reports torch 2.13.0+cpu; PyPI's has no such label, and ==2.13.0 matches both.
LOCK_VENV := .venv-lock
lock:  ## regenerate requirements.txt, the complete lock, from requirements.in with pip-tools' pip-compile
	test -x $(LOCK_VENV)/bin/pip-compile || { python3 -m venv $(LOCK_VENV) && $(LOCK_VENV)/bin/pip install --quiet pip-tools==7.6.2; }
	CUSTOM_COMPILE_COMMAND="make lock" $(LOCK_VENV)/bin/pip-compile --quiet --allow-unsafe --strip-extras \
		--no-emit-find-links --no-emit-index-url --no-emit-trusted-host -o requirements.txt requirements.in
	sed -i -E 's/^(torch==[0-9.]+)\+cpu$$/\1/' requirements.txt

book: $(STAMP) $(NODE_STAMP)  ## execute every chapter (one kernel per core) and write the website to _build/html
	@mkdir -p $(BOOK_OUT)/_build/.jupyter_cache
	$(JCACHE) notebook add $(CHAPTERS) > /dev/null
	OMP_NUM_THREADS=1 $(JCACHE) project execute --executor local-parallel --timeout $(EXEC_TIMEOUT)
	jupyter-book build . --path-output $(BOOK_OUT) --keep-going
	@echo "Open $(BOOK_OUT)/_build/html/index.html in a browser."

# make test: lint; then, side by side, the unit tests with nbval, and the website (built, then tested); then
# every chapter once more under another kernel set (portable). The website's half leaves much of a core idle
# (a single-process build, a browser waiting on pages), which the others fill. Each part's output is printed
# in one piece when it ends.
test: $(STAMP) $(NODE_STAMP) lint  ## lint; unit tests + nbval over every chapter, the strict website build + its browser tests, and nbval under torch's scalar kernels
	$(MAKE) --no-print-directory -j2 --output-sync=recurse unit-nbval site portable

unit-nbval: $(STAMP)  ## unit tests and nbval over every chapter, in one pytest run (2 processes)
	$(PYTEST) tests chapters --nbval --nbval-sanitize-with tests/sanitize.cfg $(addprefix --ignore=,$(SITE_TESTS))

# The outputs were made with this CPU's own kernels (make refresh sets nothing); make test compares them once
# more under torch's scalar kernels and another MKL code path, as a CPU without AVX computes them.
portable: $(STAMP)  ## nbval over every chapter under one other kernel set (torch's scalar kernels)
	$(PY) scripts/portability.py --config default $(CHAPTERS)

portability: $(STAMP)  ## nbval over every chapter under each kernel set of scripts/portability.py: 0 differing cells
	$(PY) scripts/portability.py $(CHAPTERS)

# make torch-versions: its own target, never part of make test (its first run downloads several GB of torch).
torch-versions: $(STAMP)  ## every chapter under the oldest torch pyproject.toml accepts and the newest pip installs: errors, then differing outputs
	$(PY) scripts/torch_versions.py $(CHAPTERS)

margins: $(STAMP)  ## the trained claims' asserted bounds, measured over 10 seeds under each kernel set (CONTRIBUTING.md)
	$(PY) scripts/margins.py $(MARGINS_ARGS)

tolerances: $(STAMP)  ## every tolerance's room under each kernel set, into tests/tolerance_room.json (CONTRIBUTING.md)
	$(PY) scripts/tolerances.py $(TOLERANCES_ARGS)

site: $(STAMP) $(NODE_STAMP)  ## the strict website build, then the link and browser tests of what it built, and chapter 1 in the learners' JupyterLab
	$(MAKE) --no-print-directory build-strict
	$(MAKE) --no-print-directory browser

unit: $(STAMP)  ## unit tests of attn_helpers and the book's invariants (2 processes)
	$(PYTEST) tests $(addprefix --ignore=,$(SITE_TESTS))

nbval: $(STAMP)  ## re-execute every chapter and compare each cell's output with the committed one
	$(PYTEST) --nbval chapters --nbval-sanitize-with tests/sanitize.cfg

build-strict: $(STAMP) $(NODE_STAMP)  ## build the website from the committed outputs, failing on any warning or broken reference
	BOOK_EXECUTE=off jupyter-book build . --path-output $(BOOK_OUT) -W -n --keep-going

browser: $(STAMP) $(NODE_STAMP)  ## check the built website (internal links, every page in headless Chromium) and run chapter 1 in the learners' JupyterLab
	BOOK_HTML=$(BOOK_OUT)/_build/html $(PY) -m pytest $(SITE_TESTS) -q -p no:cacheprovider

bench: $(STAMP)  ## time make test, unit tests, website builds, each chapter alone, import, ah.attention and ah.softmax, GloVe loading
	$(PY) scripts/bench.py $(BENCH_ARGS)

# make lab: the learners' editions of the chapters (scripts/lab.py, book_editions.learners.LAB) go into LAB_DIR, the learner's own
# folder (git ignores it); a copy the learner edited is kept, and the fresh edition goes beside it.
LAB_DIR ?= my-notebooks
lab: $(STAMP)  ## make the learners' editions into my-notebooks/ (your edited copies are kept) and open JupyterLab there
	$(PY) scripts/lab.py --folder $(LAB_DIR)

editions: $(STAMP)  ## remake editions/, the committed learners' editions that the Colab and Binder buttons open
	$(PY) scripts/make_editions.py $(CHAPTERS) --out editions

refresh: $(STAMP)  ## re-execute the chapters in place (after editing one), strip what changes from run to run, remake their editions
	OMP_NUM_THREADS=1 jupyter nbconvert --to notebook --execute --inplace --ExecutePreprocessor.timeout=$(EXEC_TIMEOUT) $(CHAPTERS)
	jupyter nbconvert --coalesce-streams --inplace $(CHAPTERS)  # one stream per cell, however the kernel split it
	nbstripout --keep-output --keep-count --keep-id --extra-keys "metadata.language_info.version" $(CHAPTERS)
	$(PY) scripts/make_editions.py $(CHAPTERS) --out editions

student: $(STAMP)  ## write student editions (stubs for solutions, plain Markdown for JupyterLab and Colab) to student/
	$(PY) scripts/make_student.py $(CHAPTERS) --out student

nbgrader: $(STAMP)  ## write an nbgrader course (source/chNN/NN_slug.ipynb) to nbgrader-course/
	$(PY) scripts/make_nbgrader.py $(CHAPTERS) --out nbgrader-course

grade: $(STAMP)  ## grade submitted notebooks, each in a sandbox: make grade SUBMISSIONS=folder [CHAPTER=01] [TIMEOUT=60] [NOTEBOOK_TIMEOUT=300] [GRADES=grades.csv] [JOBS=1]
	@test -n "$(SUBMISSIONS)" || { echo "Usage: make grade SUBMISSIONS=path/to/folder [CHAPTER=01] [TIMEOUT=60] [NOTEBOOK_TIMEOUT=300] [GRADES=grades.csv] [JOBS=1]"; exit 2; }
	$(PY) scripts/grade.py "$(SUBMISSIONS)" $(if $(CHAPTER),--chapter "$(CHAPTER)") $(if $(TIMEOUT),--timeout "$(TIMEOUT)") \
		$(if $(NOTEBOOK_TIMEOUT),--notebook-timeout "$(NOTEBOOK_TIMEOUT)") $(if $(GRADES),--csv "$(GRADES)") $(if $(JOBS),--jobs "$(JOBS)")

lint: $(STAMP)  ## ruff over the package, tests, scripts and notebooks
	ruff check attn_helpers tests scripts chapters _ext

clean:  ## remove the built site and caches (keeps .venv)
	rm -rf _build .pytest_cache .ruff_cache
	find . -name __pycache__ -not -path './$(VENV)/*' -not -path './.venv-torch/*' -prune -exec rm -rf {} +
