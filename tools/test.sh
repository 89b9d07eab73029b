#!/usr/bin/env bash
# `make test` (and so CI): setup with both stacks, lint, then every test, each phase timed; the
# last line says where the time went against the suite's budget (docs/testing.md: 40 minutes on
# 2 cores, setup included). The tests run in two phases:
#   - parallel: all but those marked `exclusive`, on TEST_WORKERS pytest-xdist workers, a test
#     file a unit (tests/conftest.py);
#   - exclusive: the files that need the repository or the machine to themselves (no other
#     test's Snakemake running in it), one test at a time.
# Exit status: the first of setup and lint that failed, else the first failing test phase's.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET_S=2400
PYTEST_ARGS="${PYTEST_ARGS:-}"
TEST_WORKERS="${TEST_WORKERS:-2}"
declare -a names=() secs=()

timed() {  # timed NAME COMMAND...: run it, keep its wall time
  local name="$1" t0 rc
  shift
  t0=$(date +%s)
  "$@"
  rc=$?
  names+=("$name")
  secs+=("$(($(date +%s) - t0))")
  return "$rc"
}

summary() {
  local total=0 line="" i
  for i in "${!names[@]}"; do
    total=$((total + secs[i]))
    line+="${names[i]} ${secs[i]} s, "
  done
  printf 'make test wall time: %d s (%d min %02d s): %s' "$total" $((total / 60)) $((total % 60)) "$line"
  if ((total > BUDGET_S)); then
    echo "OVER the budget of $BUDGET_S s (docs/testing.md)"
  else
    echo "within the budget of $BUDGET_S s (docs/testing.md)"
  fi
}
trap summary EXIT

timed setup bash tools/setup.sh --with-tensorflow || exit $?
timed lint make --no-print-directory lint || exit $?
export IOSWEEP_STRICT=1
# shellcheck disable=SC2086
timed parallel-tests .venv/bin/pytest -n "$TEST_WORKERS" --dist loadfile -m "not exclusive" $PYTEST_ARGS
rc=$?
# shellcheck disable=SC2086
timed exclusive-tests .venv/bin/pytest -m exclusive $PYTEST_ARGS
rc2=$?
if ((rc2 == 5)); then  # pytest's "no tests collected": no file is marked exclusive now
  rc2=0
fi
exit $((rc != 0 ? rc : rc2))
