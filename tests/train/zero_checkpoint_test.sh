#!/bin/sh
# A checkpoint saved under ZeRO stage 2 on 2 processes (the optimizer offloaded) resumes under stage 0 on 1
# process, and the reverse (also into stage 2 offloaded, into stage 1, and offloaded on 1 process), with the same continuation as the run
# that never stopped (tests/train/zero_worker.cpp, ZeroCheckpoint); `accel checkpoint inspect` shows the split,
# pieces of parameters included. Each rank saved the optimizer state of its pieces in its folder: one folder's
# file missing fails the load naming it, the weights untouched. Usage: zero_checkpoint_test.sh ACCEL_CLI ZERO_WORKER
set -eu
accel=$1
worker=$2
directory=$(mktemp -d)
trap 'rm -rf "$directory"' EXIT
run() {  # processes, stage, phase, and 1 to offload the optimizer (zero_cpu_offload)
  ZERO_CKPT_DIR=$directory ZERO_CKPT_STAGE=$2 ZERO_CKPT_PHASE=$3 ZERO_CKPT_OFFLOAD=${4:-0} \
    "$accel" launch --master-port 0 --cpu --nproc-per-node "$1" -- "$worker" --gtest_filter='ZeroCheckpoint.*'
}
run 2 2 save 1
"$accel" checkpoint inspect "$directory/checkpoint" > "$directory/inspect.txt"
grep -q '"zero_stage": 2' "$directory/inspect.txt" || { cat "$directory/inspect.txt"; echo "inspect shows no zero_stage"; exit 1; }
grep -q '"zero_split": \[\[' "$directory/inspect.txt" || { cat "$directory/inspect.txt"; echo "inspect shows no split"; exit 1; }
grep -q '"w1\[0:[0-9]*\]"' "$directory/inspect.txt" || { cat "$directory/inspect.txt"; echo "inspect shows no piece of w1"; exit 1; }
mkdir "$directory/damaged"
cp -r "$directory/checkpoint" "$directory/damaged/"
rm "$directory/damaged/checkpoint/rank1/states.safetensors"
ZERO_CKPT_DIR=$directory/damaged ZERO_CKPT_STAGE=0 ZERO_CKPT_PHASE=missing-part \
  "$accel" launch --master-port 0 --cpu --nproc-per-node 1 -- "$worker" --gtest_filter='ZeroCheckpoint.*'
run 1 0 resume
rm -rf "$directory/checkpoint" "$directory/never_stopped.bin"
run 1 0 save
run 2 2 resume 1
run 2 1 resume
run 1 2 resume 1
echo "zero checkpoints: stage 2 on 2 processes (offloaded) <-> stage 0 on 1 process, stage 1, offloaded on 1: bit for bit"
