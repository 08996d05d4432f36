#!/usr/bin/env bash
# `make test-kernels`: the tests whose numbers depend on the machine, run as other machines would run them
# (tests/machine_as/as_machine.py): each CPU decode kernel forced in turn as auto's choice (and all, and none), two
# torch threads, glibc's own allocator, and ATen's and oneDNN's narrower instruction sets (AVX2; no vector extension).
# One line a setting with its result; exit status 1 if any failed. Extra arguments go to pytest (e.g. -x, -k NAME).
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
# the tests that compare floats against a bound or each other, or sample under the decode kernels (not the slow ones)
FILES=$(grep -lE "allclose|pytest\.approx|isclose|atol|assert_close|<= bound|cpu_decode" tests/test_*.py)
ALL=packed+draw+attention+buffer+step
RUNS=(
  "kernels=eager" "kernels=$ALL" "kernels=packed" "kernels=draw" "kernels=attention" "kernels=buffer" "kernels=step"
  "threads=2" "allocator=system"
  "|ATEN_CPU_CAPABILITY=avx2 ONEDNN_MAX_CPU_ISA=AVX2"
  "|ATEN_CPU_CAPABILITY=default ONEDNN_MAX_CPU_ISA=SSE41"
)
# one setting alone: TEST_AS="kernels=draw threads=2" (and "...|ATEN_CPU_CAPABILITY=avx2" for an instruction set)
[[ -n "${TEST_AS:-}" ]] && RUNS=("$TEST_AS")
failed=0
for run in "${RUNS[@]}"; do
  as=${run%%|*}; isa=""; [[ $run == *"|"* ]] && isa=${run#*|}
  start=$(date +%s)
  out=$(env $isa REASONING_RL_TEST_AS="$as" $PY -m pytest -q -m "not slow" -n auto --maxprocesses="${TEST_WORKERS:-2}" \
        --dist worksteal -p no:cacheprovider $FILES "$@" 2>&1)
  rc=$?
  [[ $rc -ne 0 ]] && failed=1
  printf '%-70s %s (%ss)\n' "${as:-as this machine}${isa:+ $isa}" "$(echo "$out" | tail -1)" "$(( $(date +%s) - start ))"
  [[ $rc -ne 0 ]] && echo "$out" | grep -E "^(FAILED|ERROR)" | sed 's/^/    /'
done
exit $failed
