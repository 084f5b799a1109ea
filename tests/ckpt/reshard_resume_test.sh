#!/bin/sh
# Resume on another number of processes (issue 32, item 4): with the global batch kept (per-process batch x
# processes), a loader checkpointed mid-epoch on N processes and resumed on M sees every remaining sample
# once, in the order an uninterrupted run on M processes would: 2 -> 1, 1 -> 2 and 2 -> 3 processes, the
# run crossing into the next epoch (26 samples, 6 a step). Another global batch is refused on every rank.
# Usage: reshard_resume_test.sh ACCEL_CLI RESHARD_RESUME_WORKER
set -eu
cli=$1
worker=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launch() { processes=$1; shift; "$cli" launch --nproc-per-node "$processes" --cpu --master-port 0 -- "$worker" "$@"; }

saved_after=3  # mid-way through the first epoch (5 steps of 6 samples)
total=9
for move in "2 3 1 6" "1 6 2 3" "2 3 3 2"; do
  set -- $move
  from=$1 from_batch=$2 to=$3 to_batch=$4
  launch "$to" order "$to_batch" "$total" "$work/straight"
  launch "$from" save "$from_batch" "$saved_after" "$work/checkpoint"
  launch "$to" resume "$to_batch" $((total - saved_after)) "$work/checkpoint" "$work/resumed"
  tail -n +$((saved_after + 1)) "$work/straight" > "$work/expected"
  if ! cmp -s "$work/expected" "$work/resumed"; then
    echo "$from -> $to processes: the resumed steps differ from the uninterrupted run's" >&2
    diff "$work/expected" "$work/resumed" >&2 || true
    exit 1
  fi
  rm -rf "$work/checkpoint"
done

# The test can fail: a run that starts over instead of resuming sees the first steps again.
launch 1 order 6 $((total - saved_after)) "$work/from_start"
if cmp -s "$work/from_start" "$work/resumed"; then
  echo "starting over gave the resumed steps: the comparison proves nothing" >&2
  exit 1
fi

# Another global batch (2 x 3 saved, 1 x 3 resumed) is refused by every rank, naming both; `accel checkpoint
# inspect` shows the loader's place and the global batch to keep.
launch 2 save 3 "$saved_after" "$work/checkpoint"
"$cli" checkpoint inspect "$work/checkpoint" > "$work/inspected"
grep -q '"loaders_saved": \[{"epoch": 0, "mid_epoch": true, "steps_taken": 3, "saved_by_processes": 2, "global_batch": 6}\]' \
  "$work/inspected"
launch 1 refuse 3 "$work/checkpoint" 2> "$work/refused"
grep -q "saved mid-epoch by 2 processes taking 6 samples a step; this run has 1 taking 3" "$work/refused"
echo "resume on another number of processes: every remaining sample once, in order"
