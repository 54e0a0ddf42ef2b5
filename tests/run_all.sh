#!/usr/bin/env bash
# The whole test suite, stage by stage, with each stage's run time:
#   1. lint (ruff) and types (mypy on mtlib/)  2. unit tests of mtlib (+ coverage of the core modules)
#   3. strict nbval on every chapter, with each notebook's execution time against its budget
#   4. a clean, warning-free book build (-W -n)
#   5. every page of the built book in a real browser (chromium), offline (tests/test_browser.py)
# It runs with the network cut (unshare -n, loopback only, which nbval's kernels need) when
# the machine allows it, which proves that nothing downloads anything. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "${MTLIB_OFFLINE:-}" != 1 ] && command -v unshare >/dev/null && unshare -n true 2>/dev/null; then
    echo "network: cut (unshare -n, loopback only)"
    exec unshare -n bash -c 'ip link set lo up && MTLIB_OFFLINE=1 exec bash tests/run_all.sh'
fi
[ "${MTLIB_OFFLINE:-}" = 1 ] || echo "network: left on (unshare -n is not available here)"
export MTLIB_DEVICE="${MTLIB_DEVICE:-cpu}"  # the committed outputs are CPU outputs
export PYDEVD_DISABLE_FILE_VALIDATION=1  # no MPLBACKEND here: the notebooks need the inline backend

declare -a summary
stage() {  # stage NAME COMMAND...: run it, time it, stop at the first failure
    local name=$1 start end
    shift
    echo; echo "=== $name: $*"
    start=$EPOCHREALTIME
    "$@"
    end=$EPOCHREALTIME
    summary+=("$(awk -v n="$name" -v a="$start" -v b="$end" 'BEGIN { printf "%-10s %7.1f s", n, b - a }')")
    echo "=== $name passed in $(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }') s"
}

total_start=$EPOCHREALTIME
stage lint ruff check mtlib tests chapters
stage types mypy
stage unit python -m pytest tests -q -p no:cacheprovider --cov=mtlib --cov-report=term
stage coverage python -m coverage report --fail-under=90 \
    --include='*/mtlib/attention.py,*/mtlib/masks.py,*/mtlib/positional.py,*/mtlib/blocks.py,*/mtlib/transformer.py,*/mtlib/loading.py,*/mtlib/_checks.py'
# the bug zoo: every mutant of tests/mutants/catalogue.py must be killed (about 4-7 min)
stage mutants python -m tests.mutants
stage nbval python -m pytest chapters -q -p no:cacheprovider --nbval --nbval-current-env --nbval-sanitize-with tests/nbval_sanitize.cfg \
    -p tests.nbval_timing  # prints each notebook's time; budgets: 90 s each, 12 min in all
rm -rf _build
stage book jupyter-book build . -W -n --keep-going
# Needs chromium (Debian package; .ci/run installs it). Screenshots go to _build/screenshots/.
stage browser env MTLIB_BROWSER=1 python -m pytest tests/test_browser.py -q -p no:cacheprovider

echo; echo "=== stage times"
printf '%s\n' "${summary[@]}"
awk -v a="$total_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "total      %7.1f s\n", b - a }'
