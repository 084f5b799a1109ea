#!/usr/bin/env bash
# Two ranks train the digits MLP (64-128-128-10: 26122 parameters, 104488 gradient bytes) for one epoch
# with the timeline on and a ring of 5 steps; the merged trace must nest and add up.
set -euo pipefail
accel=$1 train_digits=$2 model=$3 data=$4
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp "$model" "$work/digits_mlp.pt"
ACCEL_TIMELINE="$work/timeline" ACCEL_TIMELINE_STEPS=5 \
  "$accel" launch --nproc-per-node 2 --cpu --master-port 0 -- \
  "$train_digits" --project-dir "$work" --data "$data" --epochs 1 > "$work/log" 2>&1 || { cat "$work/log"; exit 1; }
"$accel" timeline merge "$work/timeline" --out "$work/timeline.json"
# The MLP 64-128-128-10's 26122 gradient elements and 2 of padding, after the 10-element bias, so that the
# next slot starts on 16 bytes: 26124 float32 a step.
/usr/bin/python3 "$(dirname "$0")/timeline_check.py" "$work/timeline.json" 104496 5 2
if "$accel" timeline merge "$work/nothing" 2>/dev/null; then echo "merging a missing directory succeeded"; exit 1; fi
"$accel" timeline plot "$work/timeline.json" --steps 2
[ -s "$work/timeline.png" ] || { echo "accel timeline plot wrote no picture"; exit 1; }
