#!/bin/sh
# Issue 12's elastic restart: under `accel launch --max-restarts 1`, rank 1 SIGKILLs itself after step 10
# (two steps past the checkpoint of step 8); the launcher stops rank 0, starts both again, they resume from
# the latest checkpoint by themselves and end with the parameters of 18 uninterrupted steps, bit for bit.
# Usage: elastic_restart_test.sh ACCEL_CLI RESUME_WORKER
set -eu
cli=$1
worker=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launch() { "$cli" launch --nproc-per-node 2 --cpu --master-port 0 "$@"; }

launch -- "$worker" train 18 "$work/straight"
launch --max-restarts 1 -- "$worker" restartable 18 "$work/project" "$work/restarted" >"$work/out" 2>"$work/err" || {
  cat "$work/out" "$work/err" >&2
  exit 1
}
grep "restarting the job (restart 1 of 1)" "$work/err"
# Restarting from scratch would give the same parameters too: the resume itself must be seen.
grep "restart 1: resumed after step 8" "$work/out"
cmp "$work/straight/model.safetensors" "$work/restarted/model.safetensors"
# Steps 4 and 8 of the first attempt, 12 and 16 of the second numbered after the one it loaded.
test -d "$work/project/checkpoints/checkpoint_3"
test ! -e "$work/project/checkpoints/checkpoint_4"

# Without restarts left the same failure ends the job, with the killed rank's status.
status=0
launch -- "$worker" restartable 18 "$work/once" "$work/never" 2>"$work/err" || status=$?
test "$status" -eq 137
grep -q "rank 1 (local rank 1, pid [0-9]*) was killed by signal 9" "$work/err"
if grep -q "restarting" "$work/err"; then
  echo "restarted without --max-restarts" >&2
  exit 1
fi
test ! -e "$work/never"
echo "elastic restart: bit-identical"
