#!/bin/sh
# The demo's --checkpoint-every and --resume: 30 optimizer steps straight, and 14 steps with a checkpoint
# (mid-epoch) then --resume to 30 in fresh processes, or a restart by accel launch, end with bit-identical
# models.
# Usage: demo_resume_test.sh ACCEL_CLI TRAIN_DIGITS MODEL DIGITS_CSV
set -eu
cli=$1
demo=$2
model=$3
data=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { "$cli" launch --nproc-per-node 2 --cpu --master-port 0 -- "$demo" --model "$model" --data "$data" --epochs 3 "$@"; }

run --project-dir "$work/straight" --max-steps 30 >/dev/null
run --project-dir "$work/resumed" --max-steps 14 --checkpoint-every 14 >/dev/null
test -d "$work/resumed/checkpoints/checkpoint_0"
run --project-dir "$work/resumed" --max-steps 30 --resume | grep "resumed from the latest checkpoint"
cmp "$work/straight/model/model.safetensors" "$work/resumed/model/model.safetensors"

# Restarted by `accel launch --max-restarts 1`: the first attempt saves a checkpoint at step 14, then rank 1
# dies by SIGKILL; the second attempt resumes from it by itself (ACCEL_RESTART_COUNT=1) and ends like the
# straight run.
# shellcheck disable=SC2016 # the ranks expand their own variables
"$cli" launch --nproc-per-node 2 --cpu --master-port 0 --max-restarts 1 -- sh -c '
  if [ "$ACCEL_RESTART_COUNT" = 0 ]; then
    "$@" --max-steps 14 --checkpoint-every 14 >/dev/null
    if [ "$RANK" = 1 ]; then kill -KILL $$; fi
    exit 0
  fi
  exec "$@" --max-steps 30' sh "$demo" --model "$model" --data "$data" --epochs 3 --project-dir "$work/restarted" \
  >"$work/out" 2>"$work/err"
grep "restarting the job (restart 1 of 1)" "$work/err"
grep "resumed from the latest checkpoint" "$work/out"
cmp "$work/straight/model/model.safetensors" "$work/restarted/model/model.safetensors"
echo "demo resume and restart: bit-identical"
