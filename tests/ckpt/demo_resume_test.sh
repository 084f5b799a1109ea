#!/bin/sh
# The demo's --checkpoint-every and --resume: 30 optimizer steps straight, and 14 steps with a checkpoint
# (mid-epoch) then --resume to 30 in fresh processes, end with bit-identical models.
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
echo "demo resume: bit-identical"
