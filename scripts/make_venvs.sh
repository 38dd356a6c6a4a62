#!/usr/bin/env bash
# Create one virtual environment per extra CPython version, for running the
# test suite on versions other than 3.11 (`make test-versions`, CI):
#
#   .venv-3.10  .venv-3.12  .venv-3.13     (the 3.11 one is .venv, see Makefile)
#
# Each gets sot's dependencies as pinned in pyproject.toml (paddlepaddle==3.3.1,
# bytecode, numpy) plus pytest, pytest-xdist and coverage (the test extra), and sot itself
# installed editable without dependencies (`pip install -e . --no-deps`),
# which builds sot/eval_frame_ext/_eval_frame.cpython-3XX-*.so in the source
# tree, then `setup.py build_ext --inplace` for the optional C++ extension
# _autograd_errors (built against the venv's Paddle headers). Idempotent: an
# existing venv, installed packages and up-to-date extensions are left alone;
# the extensions are rebuilt when their sources are newer than the built files.
#
# Usage: scripts/make_venvs.sh [VERSION...]      (default: 3.10 3.12 3.13)
# The interpreters are looked up as $PYENV_ROOT/versions/X.Y.*/bin/python
# (PYENV_ROOT defaults to ~/.pyenv), then as pythonX.Y on PATH; set
# PYTHON_3_10=/path/to/python (etc.) to choose one explicitly.
#
# Then, for example:
#   .venv-3.12/bin/python -m pytest -q tests          (or: make test-3.12)
set -euo pipefail

cd "$(dirname "$0")/.."
ROOT=$(pwd)
PYENV_ROOT=${PYENV_ROOT:-$HOME/.pyenv}
# (keep in line with pyproject.toml's dependencies and test extra)
PACKAGES=("paddlepaddle==3.3.1" "bytecode>=0.16,<0.20" "numpy>=1.24" "pytest>=8" "pytest-xdist>=3.5" "coverage>=7.4")

say() { printf '[make_venvs] %s\n' "$*"; }

find_python() {
    local v=$1 var="PYTHON_${1/./_}" cand
    if [[ -n "${!var:-}" ]]; then
        echo "${!var}"
        return 0
    fi
    # Highest installed patch release of X.Y under pyenv.
    cand=$(ls -d "$PYENV_ROOT"/versions/"$v".[0-9]* 2>/dev/null | sort -V | tail -n 1 || true)
    if [[ -n "$cand" && -x "$cand/bin/python" ]]; then
        echo "$cand/bin/python"
        return 0
    fi
    if command -v "python$v" >/dev/null 2>&1; then
        command -v "python$v"
        return 0
    fi
    return 1
}

# True if every requirement in PACKAGES is installed in the venv.
packages_present() {
    local py=$1
    "$py" - "${PACKAGES[@]}" <<'PY'
import sys
from importlib import metadata
import re
for req in sys.argv[1:]:
    name = re.split(r"[=<>!~]", req, maxsplit=1)[0]
    want = req.split("==", 1)[1] if "==" in req else ""
    try:
        have = metadata.version(name)
    except metadata.PackageNotFoundError:
        sys.exit(1)
    if want and have != want:
        sys.exit(1)
PY
}

# True if sot is installed editable and the extension for this interpreter
# is newer than its sources.
extension_current() {
    local py=$1 suffix so src
    # (run outside the repository: sot.egg-info there would be found instead)
    (cd / && "$py" -c 'import importlib.metadata as m; m.version("sot")') >/dev/null 2>&1 || return 1
    suffix=$("$py" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    [[ -f "sot/eval_frame_ext/_eval_frame$suffix" ]] || return 1
    # (the optional C++ extension is not built where Paddle's headers are missing: checked only if there)
    for so in "sot/eval_frame_ext/_eval_frame$suffix" "sot/eval_frame_ext/_autograd_errors$suffix"; do
        [[ -f "$so" ]] || continue
        for src in setup.py sot/eval_frame_ext/*.c sot/eval_frame_ext/*.h sot/eval_frame_ext/*.cpp; do
            [[ "$src" -nt "$so" ]] && return 1
        done
    done
    return 0
}

make_one() {
    local v=$1 venv=".venv-$1" base py
    if ! base=$(find_python "$v"); then
        say "Python $v: no interpreter found (looked in $PYENV_ROOT/versions and for python$v on PATH); skipped"
        return 1
    fi
    py="$ROOT/$venv/bin/python"
    if [[ -x "$py" ]]; then
        say "$venv: exists ($("$py" -V 2>&1))"
    else
        say "$venv: creating with $base"
        "$base" -m venv "$venv"
        "$py" -m pip install -q --upgrade pip
    fi
    # Keep the venv out of git status (the repository's .gitignore lists only .venv/).
    [[ -f "$venv/.gitignore" ]] || echo '*' > "$venv/.gitignore"

    if packages_present "$py"; then
        say "$venv: ${PACKAGES[*]} already installed"
    else
        say "$venv: pip install ${PACKAGES[*]}"
        "$py" -m pip install -q "${PACKAGES[@]}"
    fi

    if extension_current "$py"; then
        say "$venv: sot installed editable, extension up to date"
    else
        say "$venv: pip install -e . --no-deps (builds the extension for Python $v)"
        # (the build backend's editable-install notice is filtered out)
        "$py" -m pip install -q -e . --no-deps 2>&1 | grep -v -e 'BuildBackendWarning' -e '^ *!!$' \
            -e '^ *\*\*\*\**$' -e 'Please be careful with folders' -e 'name as your package as they' \
            -e 'with strategy, WheelFile' -e '^ *$' || true
        # (pip's isolated build cannot see Paddle: the optional C++ extension is built against the venv's)
        "$py" setup.py -q build_ext --inplace
        extension_current "$py" || { say "$venv: building the extension failed"; return 1; }
    fi
}

versions=("$@")
[[ ${#versions[@]} -gt 0 ]] || versions=(3.10 3.12 3.13)
status=0
for v in "${versions[@]}"; do
    make_one "$v" || status=1
done
if [[ $status -eq 0 ]]; then
    say "done. Run the tests with e.g.: .venv-${versions[0]}/bin/python -m pytest -q tests"
fi
exit $status
