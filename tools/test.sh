#!/usr/bin/env bash
# `make test` (and so CI): setup with both stacks, lint, then every test, each phase timed; the
# last line says where the time went against the suite's budget (docs/testing.md: 40 minutes on
# 2 cores, setup included). The tests run in two phases:
#   - parallel: all but those marked `exclusive`, on TEST_WORKERS pytest-xdist workers, a test
#     file a unit (tests/conftest.py); beside them, in a pytest of its own, the tests marked
#     `slurm`, which wait on the scheduler most of the time (alone they kept 0.8 of 2 cores busy:
#     docs/testing.md), so that their wait overlaps the workers' instead of holding one;
#   - exclusive: the files that need the repository or the machine to themselves (no other
#     test's Snakemake running in it), one test at a time.
# JUNIT_DIR=DIR: each test phase also writes DIR/PHASE.xml (pytest's JUnit XML), for
# tools/test_durations.py (where the time went; one file for all phases would keep only the last).
# Exit status: the first of setup and lint that failed, else the first failing test phase's.
set -uo pipefail
cd "$(dirname "$0")/.."
BUDGET_S=2400
PYTEST_ARGS="${PYTEST_ARGS:-}"
TEST_WORKERS="${TEST_WORKERS:-2}"
JUNIT_DIR="${JUNIT_DIR:-}"
declare -a names=() secs=()

junit() {  # junit PHASE: the phase's --junitxml option where JUNIT_DIR is set, else nothing
  if [[ -n "$JUNIT_DIR" ]]; then echo "--junitxml=$JUNIT_DIR/$1.xml"; fi
}

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
no_tests_ok() {  # no_tests_ok RC: pytest's 5, "no tests collected" (PYTEST_ARGS chose none), is 0
  if (($1 == 5)); then return 0; fi
  return "$1"
}
beside_slurm() {  # the SLURM tests' own pytest; its log is printed when it ends, its wall time kept
  local t0 rc
  t0=$(date +%s)
  # shellcheck disable=SC2086,SC2046
  .venv/bin/pytest -m "slurm and not exclusive" --basetemp "$slurm_log.tmp" $(junit slurm) $PYTEST_ARGS >"$slurm_log" 2>&1
  rc=$?
  echo "$(($(date +%s) - t0))" >"$slurm_log.s"
  return "$rc"
}
slurm_log=$(mktemp)
beside_slurm &
slurm_pid=$!
# shellcheck disable=SC2086,SC2046
timed parallel-tests .venv/bin/pytest -n "$TEST_WORKERS" --dist loadfile -m "not exclusive and not slurm" \
  $(junit parallel) $PYTEST_ARGS
no_tests_ok $?
rc=$?
t0=$(date +%s)
wait "$slurm_pid"
no_tests_ok $?
rc_slurm=$?
waited=$(($(date +%s) - t0))
echo "--- the SLURM tests (run beside the parallel phase) ---"
cat "$slurm_log"
slurm_s="?"  # unknown if its pytest was killed before it could say
read -r slurm_s <"$slurm_log.s"
rm -f "$slurm_log" "$slurm_log.s"
if ((rc_slurm == 0)); then  # a failure's files stay for a look
  rm -rf "$slurm_log.tmp"
else
  echo "the SLURM tests' files: $slurm_log.tmp"
fi
names+=("slurm-tests (beside, ${slurm_s} s in all; waited for after)")
secs+=("$waited")
if ((rc == 0)); then rc=$rc_slurm; fi
# shellcheck disable=SC2086,SC2046
timed exclusive-tests .venv/bin/pytest -m exclusive $(junit exclusive) $PYTEST_ARGS
no_tests_ok $?
rc2=$?
exit $((rc != 0 ? rc : rc2))
