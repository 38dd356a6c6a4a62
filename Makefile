# Two entry points, both working on a fresh clone: `make demo` and `make test`.
# Each creates .venv (Python 3.11) and installs sot with its pinned dependencies the first time, and
# rebuilds the C extension whenever its sources change.

PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sot-installed
EXT_SOURCES := $(wildcard sot/eval_frame_ext/*.c sot/eval_frame_ext/*.h)
export GLOG_minloglevel ?= 2

.PHONY: demo test

$(STAMP): pyproject.toml setup.py $(EXT_SOURCES)
	@command -v $(PYTHON) >/dev/null || { echo "sot needs $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test: $(STAMP)
	$(PY) -m pytest -q $(PYTEST_ARGS)
