#!/usr/bin/env bash
# Usage: scripts/pytest_crash_report.sh PYTHON PYTEST_ARGS...
#
# Runs `PYTHON -m pytest PYTEST_ARGS...` with its exit status. When a test process dies by a signal (a
# segmentation fault in Paddle or in sot's C extensions), it also prints what a crash that shows once in a full
# CI run needs to be understood, where faulthandler alone prints only the Python frames of the crashing thread:
# - the node id of the test that was running: with pytest-xdist (`make test` runs two workers) xdist names the
#   test of a crashed worker and reports it failed; a serial run that dies itself (`pytest -q` names no test) is
#   named from $SOT_CURRENT_TEST_FILE, where tests/conftest.py writes the node id at the start of each test;
# - the C stack of every thread, from the core file, when the machine writes core files into the working
#   directory (core_pattern "core") and gdb is installed. The core file is removed afterwards.
set -uo pipefail

python=$1
shift
marker=$(mktemp)
trap 'rm -f "$marker"' EXIT
ulimit -c unlimited 2>/dev/null || true  # (a hard limit may refuse it: then no C stack, the rest still works)

# The C stacks of every thread of each core file this run wrote (newer than the marker, made before pytest
# started), which are removed; without gdb, only that there was one.
print_core_stacks() {
    local core
    for core in core core.[0-9]*; do
        if [ -f "$core" ] && [ "$core" -nt "$marker" ]; then
            if command -v gdb >/dev/null 2>&1; then
                echo "== C stacks of every thread (gdb, $core):"
                gdb -batch -nx -iex "set auto-load safe-path /" -ex "set pagination off" -ex "info threads" \
                    -ex "thread apply all bt 40" "$python" "$core" 2>&1 | grep -v "^\[New LWP\|^warning: "
            else
                echo "== a core file was written ($core) but gdb is not installed: no C stacks"
            fi
            rm -f "$core"
        fi
    done
}

SOT_CURRENT_TEST_FILE=$marker "$python" -m pytest "$@"
status=$?
if [ "$status" -eq 0 ]; then
    # (a subprocess of a test that crashed, on purpose or not, may have left a core file: not kept)
    for core in core core.[0-9]*; do
        if [ -f "$core" ] && [ "$core" -nt "$marker" ]; then rm -f "$core"; fi
    done
    exit 0
fi
if [ "$status" -le 128 ]; then
    # Failed tests; a crashed xdist worker (named in the report above as "worker ... crashed while running")
    # left a core file, or else a test's subprocess did.
    print_core_stacks
    exit "$status"
fi

running=$(cat "$marker" 2>/dev/null || echo '(unknown)')
echo "== pytest died by signal $((status - 128)) while running: $running"
if [ -n "${SOT_FAILED_TESTS_FILE:-}" ]; then
    echo "$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])'): $running (died by signal $((status - 128)))" \
        >> "$SOT_FAILED_TESTS_FILE"
fi
print_core_stacks
exit "$status"
