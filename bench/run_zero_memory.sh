#!/usr/bin/env bash
# ZeRO's memory, shown (run by `./dev bench zero-memory`; needs root and the cgroup v1 memory controller).
#   bench/run_zero_memory.sh BIN_DIR MODEL_DIR   BIN_DIR holds accel and train_accel (build/bin); MODEL_DIR
#                                                receives zero_deep_mlp.pt (build/bench)
# A deep MLP 784-2048x12-10 (bench/make_deep_mlp.py: 47.8 M parameters, 191 MB of fp32, gradient buckets of
# two layers), AdamW, batch 64 per process, trained by
# bench/train_accel.c on 2 processes under zero_stage 0, 1 and 2, each run in a memory cgroup of its own:
#   1. without a limit: the peak memory of the two processes together (the cgroup's max_usage_in_bytes,
#      page cache and shared-memory segments included) and each rank's optimizer_state_bytes and
#      gradient_bytes, one line per stage:
#        zero-memory: malloc=M stage=S peak_mb=P optimizer_state_mb=O gradient_mb=G step_ms=T
#   2. with a limit halfway between stage 2's peak and stage 0's, stage 0 and then stage 2 again:
#        zero-memory-limit: malloc=M limit_mb=L stage=S result=trained|killed
#      (killed: the kernel's OOM killer ended a rank, which accel launch reports).
# Both twice: with glibc's malloc as it comes (malloc=default) and with a fixed mmap threshold
# (malloc=mmap-threshold-1MiB, MALLOC_MMAP_THRESHOLD_=1048576), under which freed large blocks go back to
# the system: stage 2 allocates its gradients and buckets afresh each backward, and glibc's dynamic
# threshold keeps them on a fragmented heap.
set -euo pipefail
BIN=${1:?usage: bench/run_zero_memory.sh BIN_DIR MODEL_DIR}
MODEL_DIR=${2:?usage: bench/run_zero_memory.sh BIN_DIR MODEL_DIR}
PYTHON=${PYTHON:-/usr/bin/python3}
STEPS=${ZERO_MEMORY_STEPS:-10}
CGROUP_ROOT=/sys/fs/cgroup/memory
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
if [ ! -w "$CGROUP_ROOT" ]; then
  echo "zero-memory: skipped: needs root and a writable cgroup v1 memory controller at $CGROUP_ROOT" >&2
  exit 0
fi
MODEL=$MODEL_DIR/zero_deep_mlp.pt
if [ "$(dirname "${BASH_SOURCE[0]}")/make_deep_mlp.py" -nt "$MODEL" ]; then
  "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/make_deep_mlp.py" "$MODEL" 784 2048 12 10
fi

group=$CGROUP_ROOT/accel_zero_memory_$$
cleanup() { [ -d "$group" ] && rmdir "$group" 2>/dev/null || true; }
trap cleanup EXIT

# run_in_group STAGE LIMIT_BYTES [VARIABLE=VALUE...]: trains in a fresh cgroup (LIMIT_BYTES 0: no limit),
# the processes started with the variables added to their environment; prints the train_accel line (empty
# when a rank was killed) then the group's peak in bytes.
run_in_group() {
  cleanup
  mkdir "$group"
  [ "$2" = 0 ] || echo "$2" > "$group/memory.limit_in_bytes"
  local line
  line=$(bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$group" env "${@:3}" \
    "$BIN/accel" launch --nproc-per-node 2 --cpu --master-port 0 -- \
    "$BIN/train_accel" "$MODEL" "$STEPS" 2 optimizer=adamw "zero_stage=$1" 2>/dev/null | grep '^accel ' || true)
  echo "$line"
  cat "$group/memory.max_usage_in_bytes"
}

mb() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

# measure MALLOC_NAME [VARIABLE=VALUE...]: parts 1 and 2 above, the variables added to the processes' environment.
measure() {
  local name=$1 stage line bytes limit
  shift
  local -A peak
  for stage in 0 1 2; do
    { read -r line; read -r bytes; } < <(run_in_group "$stage" 0 "$@")
    [ -n "$line" ] || { echo "zero-memory: stage $stage did not train" >&2; exit 1; }
    peak[$stage]=$bytes
    echo "zero-memory: malloc=$name stage=$stage peak_mb=$(mb "$bytes")" \
      "optimizer_state_mb=$(mb "$(value "$line" optimizer_state_bytes)") gradient_mb=$(mb "$(value "$line" gradient_bytes)")" \
      "step_ms=$(value "$line" step_ms)"
  done
  limit=$(( (peak[0] + peak[2]) / 2 ))
  for stage in 0 2; do
    { read -r line; read -r bytes; } < <(run_in_group "$stage" "$limit" "$@")
    echo "zero-memory-limit: malloc=$name limit_mb=$(mb "$limit") stage=$stage result=$([ -n "$line" ] && echo trained || echo killed)"
  done
}

measure default
measure mmap-threshold-1MiB MALLOC_MMAP_THRESHOLD_=1048576
