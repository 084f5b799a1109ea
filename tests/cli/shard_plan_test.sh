#!/usr/bin/env bash
# Tests of `accel shard-plan`: conformance vectors of accelerate-semantics.md 1.4, 1.9 and 1.11 through the
# JSON it prints, the dispatch default for iterable datasets, and the exits for bad usage.
# Usage: shard_plan_test.sh ACCEL_BIN
# `$(plan N B)` is left unquoted on purpose: it expands to several arguments.
# shellcheck disable=SC2046
set -euo pipefail

if [[ $# -ne 1 || ! -x $1 ]]; then
  echo "usage: $0 ACCEL_BIN" >&2
  exit 2
fi
ACCEL=$1
PYTHON=/usr/bin/python3

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=tests/cli/check.sh
source "$(dirname "$0")/check.sh"

# expect_batches EXPECTED ARGS...: one JSON object whose ranks 0..P-1 yield EXPECTED (a JSON list of each
# rank's batches), each with len equal to its number of batches.
expect_batches() {
  local expected=$1
  shift
  "$ACCEL" shard-plan "$@" >"$WORK/out" || return 1
  "$PYTHON" -c '
import json, sys
plan = json.load(open(sys.argv[1]))
expected = json.loads(sys.argv[2])
ranks = plan["processes"]
ok = ([r["batches"] for r in ranks] == expected and [r["rank"] for r in ranks] == list(range(len(expected)))
      and all(r["len"] == len(r["batches"]) for r in ranks))
if not ok:
    print("  got      " + json.dumps([r["batches"] for r in ranks]), file=sys.stderr)
    print("  lens     " + json.dumps([r["len"] for r in ranks]), file=sys.stderr)
    print("  expected " + json.dumps(expected), file=sys.stderr)
sys.exit(0 if ok else 1)' "$WORK/out" "$expected"
}

# expect_remainder VALUE ARGS...
expect_remainder() {
  local expected=$1
  shift
  "$ACCEL" shard-plan "$@" >"$WORK/out" || return 1
  "$PYTHON" -c 'import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["remainder"] == int(sys.argv[2]) else 1)' \
    "$WORK/out" "$expected"
}

# same_plan "ARGS A" "ARGS B": both print the same JSON (each string is split into arguments).
same_plan() {
  # shellcheck disable=SC2086
  "$ACCEL" shard-plan $1 >"$WORK/a" && "$ACCEL" shard-plan $2 >"$WORK/b" && cmp -s "$WORK/a" "$WORK/b"
}

different_plan() { ! same_plan "$1" "$2"; }

# usage_error PATTERN ARGS...: exit 2, nothing on stdout, a message matching PATTERN on stderr.
usage_error() {
  local pattern=$1
  shift
  local rc=0
  "$ACCEL" shard-plan "$@" >"$WORK/out" 2>"$WORK/err" || rc=$?
  if [[ $rc -ne 2 || -s $WORK/out ]] || ! grep -q -- "$pattern" "$WORK/err"; then
    echo "  exit $rc, stdout: $(cat "$WORK/out"), stderr: $(cat "$WORK/err")" >&2
    return 1
  fi
}

help_works() {
  "$ACCEL" shard-plan --help >"$WORK/out" && grep -q "usage: accel shard-plan" "$WORK/out" &&
    grep -q -- "--iterable" "$WORK/out"
}

plan() { echo "--dataset-len $1 --batch-size $2 --num-processes 2"; }

check "help" help_works

# 1.4 A: split_batches=False, even_batches=True (P=2).
ROUND3='[[[0,1,2],[6,7,8],[12,13,14],[18,19,20]],[[3,4,5],[9,10,11],[15,16,17],[21,22,23]]]'
THREE3='[[[0,1,2],[6,7,8],[12,13,14]],[[3,4,5],[9,10,11],[15,16,17]]]'
check "BS(24,3,False)" expect_batches "$ROUND3" $(plan 24 3)
check "BS(24,3,True)" expect_batches "$ROUND3" $(plan 24 3) --drop-last
check "BS(21,3,False)" expect_batches \
  '[[[0,1,2],[6,7,8],[12,13,14],[18,19,20]],[[3,4,5],[9,10,11],[15,16,17],[0,1,2]]]' $(plan 21 3)
check "BS(21,3,True)" expect_batches "$THREE3" $(plan 21 3) --drop-last
check "BS(22,3,False)" expect_batches \
  '[[[0,1,2],[6,7,8],[12,13,14],[18,19,20]],[[3,4,5],[9,10,11],[15,16,17],[21,0,1]]]' $(plan 22 3)
check "BS(20,3,False)" expect_batches \
  '[[[0,1,2],[6,7,8],[12,13,14],[18,19,0]],[[3,4,5],[9,10,11],[15,16,17],[1,2,3]]]' $(plan 20 3)
check "BS(20,3,True)" expect_batches "$THREE3" $(plan 20 3) --drop-last
check "BS(2,3,False)" expect_batches '[[[0,1,0]],[[1,0,1]]]' $(plan 2 3)
check "BS(2,3,True)" expect_batches '[[],[]]' $(plan 2 3) --drop-last

# 1.4 B: split_batches=True, even_batches=True (P=2).
check "BS(24,4,False) split" expect_batches \
  '[[[0,1],[4,5],[8,9],[12,13],[16,17],[20,21]],[[2,3],[6,7],[10,11],[14,15],[18,19],[22,23]]]' \
  $(plan 24 4) --split-batches
check "BS(22,4,False) split" expect_batches \
  '[[[0,1],[4,5],[8,9],[12,13],[16,17],[20,21]],[[2,3],[6,7],[10,11],[14,15],[18,19],[0,1]]]' \
  $(plan 22 4) --split-batches
check "BS(21,4,False) split" expect_batches \
  '[[[0,1],[4,5],[8,9],[12,13],[16,17],[20,0]],[[2,3],[6,7],[10,11],[14,15],[18,19],[1,2]]]' \
  $(plan 21 4) --split-batches
check "BS(21,4,True) split" expect_batches \
  '[[[0,1],[4,5],[8,9],[12,13],[16,17]],[[2,3],[6,7],[10,11],[14,15],[18,19]]]' \
  $(plan 21 4) --split-batches --drop-last
check "BS(2,4,False) split" expect_batches '[[[0,1]],[[0,1]]]' $(plan 2 4) --split-batches

# even_batches=False (upstream's vectors): leftovers as they are, len is what each rank yields.
check "BS(22,3,False) no even" expect_batches \
  '[[[0,1,2],[6,7,8],[12,13,14],[18,19,20]],[[3,4,5],[9,10,11],[15,16,17],[21]]]' $(plan 22 3) --no-even-batches
check "BS(21,4,False) split no even" expect_batches \
  '[[[0,1],[4,5],[8,9],[12,13],[16,17],[20]],[[2,3],[6,7],[10,11],[14,15],[18,19]]]' \
  $(plan 21 4) --split-batches --no-even-batches

# 1.9 / 2.5: 9 samples, batch 5, 2 processes; gather_for_metrics keeps 9.
check "dispatch 9 samples" expect_batches '[[[0,1,2,3,4]],[[5,6,7,8,0]]]' $(plan 9 5) --dispatch
check "dispatch remainder 9" expect_remainder 9 $(plan 9 5) --dispatch
check "shard remainder 9" expect_remainder 9 $(plan 9 5)
check "dispatch split pads the last step" expect_batches '[[[0,1],[4,5],[8]],[[2,3],[6,7],[0]]]' \
  $(plan 9 4) --dispatch --split-batches
check "drop_last remainder" expect_remainder -1 $(plan 9 5) --drop-last

# Iterable datasets: dispatched by default, IterableDatasetShard with --no-dispatch.
check "iterable dispatched by default" same_plan "$(plan 10 2) --iterable" "$(plan 10 2) --iterable --dispatch"
check "iterable dispatch vector" expect_batches '[[[0,1],[4,5],[8]],[[2,3],[6,7],[9]]]' $(plan 10 2) --iterable
check "iterable shard vector" expect_batches '[[[0,1],[4,5],[8,9]],[[2,3],[6,7],[0,1]]]' \
  $(plan 10 2) --iterable --no-dispatch
check "iterable shard differs" different_plan "$(plan 10 2) --iterable" "$(plan 10 2) --iterable --no-dispatch"
check "map-style not dispatched by default" same_plan "$(plan 10 2)" "$(plan 10 2) --no-dispatch"

# 1.11: skip_first_batches(DataLoader(range(16), batch_size=4), 2).
check "skip_first_batches" expect_batches '[[[8,9,10,11],[12,13,14,15]]]' \
  --dataset-len 16 --batch-size 4 --num-processes 1 --skip-batches=2

# Bad usage and impossible settings.
check "split needs a round multiple" usage_error "round multiple" $(plan 20 3) --split-batches
check "negative dataset length" usage_error "negative" --dataset-len -1 --batch-size 2 --num-processes 2
check "batch size 0" usage_error "batch_size" $(plan 4 0)
check "no processes" usage_error "num_processes" --dataset-len 4 --batch-size 2 --num-processes 0
check "negative skip" usage_error "skip" $(plan 4 2) --skip-batches -1
check "missing dataset length" usage_error "required" --batch-size 2 --num-processes 2
check "not an integer" usage_error "integer" --dataset-len four --batch-size 2 --num-processes 2
check "missing value" usage_error "needs a value" $(plan 4 2) --skip-batches
check "switch with a value" usage_error "takes no value" $(plan 4 2) --drop-last=1
check "unknown option" usage_error "unknown option" $(plan 4 2) --shuffle

# Plans too large to compute or print are refused up front (the largest length used to abort).
check "largest dataset length" usage_error "too large to compute" \
  --dataset-len 9223372036854775807 --batch-size 2 --num-processes 3
check "padding past int64" usage_error "too large to compute" \
  --dataset-len 1 --batch-size 9223372036854775807 --num-processes 1
check "global batch past int64" usage_error "too large" \
  --dataset-len 1 --batch-size 4611686018427387904 --num-processes 3
check "too many ranks to walk the epoch" usage_error "is 16040000, the limit is 10000000" \
  --dataset-len 10 --batch-size 1 --num-processes 4000
check "length past int64" usage_error "integer" --dataset-len 9223372036854775808 --batch-size 2 --num-processes 3

report
