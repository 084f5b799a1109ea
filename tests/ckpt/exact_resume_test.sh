#!/bin/sh
# Issue 12's exact resume: on 2 processes with shuffling, 2K steps straight must give bit-identical
# parameters to K steps, a checkpoint saved mid-epoch, and K more steps in fresh processes.
# Usage: exact_resume_test.sh ACCEL_CLI RESUME_WORKER
set -eu
cli=$1
worker=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
launch() { "$cli" launch --nproc-per-node 2 --cpu --master-port 0 -- "$worker" "$@"; }

# K = 9: 6 batches per rank and epoch, so the checkpoint falls in the middle of the second epoch.
launch train 18 "$work/straight"
launch save 9 "$work/checkpoint"
launch resume 9 "$work/checkpoint" "$work/resumed"
cmp "$work/straight/model.safetensors" "$work/resumed/model.safetensors"

# The test can fail: resuming from the start (the checkpoint's first half skipped) must differ.
launch train 9 "$work/half"
if cmp -s "$work/straight/model.safetensors" "$work/half/model.safetensors"; then
  echo "9 steps gave the same parameters as 18: the comparison proves nothing" >&2
  exit 1
fi

# Rank 1's file damaged: rank 1 names it, rank 0 names rank 1, and neither restores anything.
head -c 100 "$work/checkpoint/rank1/states.safetensors" > "$work/truncated"
mv "$work/truncated" "$work/checkpoint/rank1/states.safetensors"
launch refuse 0 "$work/checkpoint" 2> "$work/refused"
grep -q "rank1/states.safetensors" "$work/refused"
grep -q "rank 1 cannot load the checkpoint" "$work/refused"
echo "exact resume: bit-identical"
