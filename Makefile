# `make demo` and `make test` create or reuse .venv and install everything they need.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# torch first: the pinned CPU wheel; a bare `torch` (or stanza first) would pull a multi-GB CUDA build
	$(PY) -m pip install -q torch==2.13.0
	$(PY) -m pip install -q -e '.[all,dev]'
	touch $(STAMP)

lint: $(STAMP)
	$(VENV)/bin/ruff check synprep syntrain tests benchmarks

test: lint
	# one process per core (pytest-xdist), a test file's tests together in one of them (its fixtures made once)
	$(VENV)/bin/pytest -q -n auto --dist loadfile

demo: $(STAMP)
	bash sample_data/demo.sh

bench: $(STAMP)
	for script in benchmarks/bench_*.py; do echo "== $$script"; $(PY) $$script || exit 1; done

clean:
	rm -rf $(VENV) demo_out .pytest_cache
