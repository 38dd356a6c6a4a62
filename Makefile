# Two entry points, both working on a fresh clone: `make demo` and `make test` (what CI runs, see .ci/run).
# `make demo` creates .venv (Python 3.11) and installs sot with its pinned dependencies the first time, and
# rebuilds the C extension whenever its sources change. `make test` runs the whole suite on 3.11 (in .venv),
# then on 3.10, 3.12 and 3.13 (in .venv-3.X, made by scripts/make_venvs.sh) the tests of what differs between
# Python versions (VERSION_TESTS below), each with pytest-xdist on two workers (one per core of a CI machine).
# While developing: `make test-3.11` (or test-3.12, ...) runs one version, `make test-versions` the others;
# `make test-3.12 VERSION_TESTS=tests` the whole suite on 3.12; PYTEST_WORKERS=0 runs in one process.

PYTHON ?= python3.11
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.sot-installed
EXT_SOURCES := $(wildcard sot/eval_frame_ext/*.c sot/eval_frame_ext/*.h sot/eval_frame_ext/*.cpp)
export GLOG_minloglevel ?= 2

OTHER_PYTHONS ?= 3.10 3.12 3.13
PYTEST_WORKERS ?= 2
XDIST := -n $(PYTEST_WORKERS)
# On the other versions: the bytecode simulation and the hook (opcode_translator, eval_frame_ext), generated
# code under stress (reliability, fuzz), the public API, layers and reports, and the model zoo but its slow
# models. Left to 3.11 alone: SIR compilation (tests/symbolic) and the CLI's subprocess runs, which go through
# no version-specific code of their own, and the slow models (about 7 of the 21 minutes of one serial run).
VERSION_TESTS ?= tests/opcode_translator tests/eval_frame_ext tests/reliability tests/fuzz tests/models \
	tests/test_api.py tests/test_layer.py tests/test_export.py tests/test_report.py tests/test_profile.py \
	tests/test_psdb.py tests/test_translated_layer_copy.py
VERSION_MARKS ?= not slow

.PHONY: demo test test-3.11 test-versions $(addprefix test-,$(OTHER_PYTHONS))

$(STAMP): pyproject.toml setup.py $(EXT_SOURCES)
	@command -v $(PYTHON) >/dev/null || { echo "sot needs $(PYTHON) on PATH (set PYTHON=...)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	@# (pip's isolated build cannot see Paddle: the optional C++ extension is built against the venv's)
	$(PY) setup.py -q build_ext --inplace
	@touch $(STAMP)

demo: $(STAMP)
	$(PY) examples/demo.py

test-3.11: $(STAMP)
	scripts/pytest_crash_report.sh $(PY) -q $(XDIST) $(PYTEST_ARGS)

# One extra version: create/refresh its venv (idempotent, rebuilds the extension when needed), run its tests.
$(addprefix test-,$(OTHER_PYTHONS)): test-%:
	scripts/make_venvs.sh $*
	scripts/pytest_crash_report.sh .venv-$*/bin/python -q -p no:cacheprovider $(XDIST) -m "$(VERSION_MARKS)" \
		$(PYTEST_ARGS) $(VERSION_TESTS)

# Every extra version, even when one of them fails; fails at the end if any did.
test-versions:
	@failed=""; for v in $(OTHER_PYTHONS); do \
		echo "== Python $$v"; \
		$(MAKE) --no-print-directory test-$$v || failed="$$failed $$v"; \
	done; \
	if [ -n "$$failed" ]; then echo "test suite failed on Python$$failed"; exit 1; fi

# At the end, every failing test of every version (tests/conftest.py notes them in SOT_FAILED_TESTS_FILE): a
# CI log cut in the middle still names them.
test:
	@status=0; failed=$$(mktemp); export SOT_FAILED_TESTS_FILE=$$failed; \
	echo "== Python 3.11"; $(MAKE) --no-print-directory test-3.11 || status=1; \
	$(MAKE) --no-print-directory test-versions || status=1; \
	if [ -s $$failed ]; then echo "== failing tests, every version:"; cat $$failed; fi; rm -f $$failed; exit $$status
