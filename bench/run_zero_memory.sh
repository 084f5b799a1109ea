#!/usr/bin/env bash
# ZeRO's memory, shown (run by `./dev bench zero-memory`; needs root and the cgroup v1 memory controller;
# ZERO_MEMORY_PARTS=torch runs parts 3 and 4 alone, ZERO_MEMORY_PARTS=step part 4, =residual part 5, =script
# parts 1, 2, 5 and 6: the TorchScript models, =offload part 6).
#   bench/run_zero_memory.sh BIN_DIR MODEL_DIR   BIN_DIR holds accel and train_accel (build/bin); MODEL_DIR
#                                                receives zero_deep_mlp.pt (build/bench)
# A deep MLP 784-2048x12-10 (bench/make_deep_mlp.py: 47.8 M parameters, 191 MB of fp32, gradient buckets of
# two layers), AdamW, batch 64 per process, trained by
# bench/train_accel.c on 2 processes under zero_stage 0, 1, 2 and 3 (the TorchScript nn.Sequential run a
# child at a time under 3, each Linear a unit), each run in a memory cgroup of its own:
#   1. without a limit: the peak memory of the two processes together (the cgroup's max_usage_in_bytes,
#      page cache and shared-memory segments included) and each rank's optimizer_state_bytes and
#      gradient_bytes, one line per stage:
#        zero-memory: malloc=M stage=S peak_mb=P optimizer_state_mb=O gradient_mb=G step_ms=T
#   2. with a limit halfway between stage 2's peak and stage 0's, stage 0, then stages 2 and 3 again:
#        zero-memory-limit: malloc=M limit_mb=L stage=S result=trained|killed
#      (killed: the kernel's OOM killer ended a rank, which accel launch reports).
# Both twice: with glibc's malloc as it comes (malloc=default) and with a fixed mmap threshold
# (malloc=mmap-threshold-1MiB, MALLOC_MMAP_THRESHOLD_=1048576), under which freed large blocks go back to
# the system: stage 2 allocates its gradients and buckets afresh each backward, and glibc's dynamic
# threshold keeps them on a fragmented heap.
#   3. Stage 3 shards models of the caller's tensors: the same MLP as an eager torch module trained through
#      the Python package (bench/train_torch_sharded.py, DeepSpeedPlugin(zero_stage=S), each Linear a unit),
#      stage 0 against stage 3, with the fixed mmap threshold, then under a limit halfway between their
#      peaks:
#        zero-memory-torch: stage=S peak_mb=P parameter_mb=M optimizer_state_mb=O step_ms=T prepare_vs_built=Q
#        zero-memory-torch-limit: limit_mb=L stage=S result=trained|killed
#      (parameter_mb: what rank 0 holds of the parameters between steps; Q: the processes' peak resident
#      memory just after prepare against just before it, summed, each having built the model), and stage 3's per-process bounds
#      (PyTorch's for fully_shard, rank 0; P the model's parameters, N the processes):
#        zero-memory-torch-bounds: share_mb=S forward_peak_mb=F forward_bound_mb=B after_step_mb=A
#          after_step_bound_mb=C met=yes|no
#      (S: P/N with alignment; F: S plus the most parameter memory gathered at once in a forward, bound
#      B = S + 3 x the largest unit; A: S plus the share's gradients and AdamW's state, bound C = 4 x S);
#      then stage 3 again with a
#      save_state after the steps (the units gathered one at a time, the next one in flight while process 0
#      writes one, each
#      process writing the optimizer state of its own share), with torch's AdamW and with accel's, and with
#      torch's and the model saved in each process's pieces (checkpoint_model "sharded": nothing gathered,
#      every process writing its shares):
#        zero-memory-torch-save: optimizer=torch|accel model=whole|sharded stage=3 peak_mb=P peak_vs_training=R
#          rss_vs_training=Q save_ms=W
#      (target Q <= 1.2: the processes' peak resident memory, summed, against the same run's before the
#      save; R is the cgroup's peak against the training run's, which counts the written files' page cache;
#      W the save_state's wall time),
#      and under the limit above, where stage 3 trained:
#        zero-memory-torch-save-limit: optimizer=torch|accel model=whole|sharded limit_mb=L result=saved|killed
#      then fresh stage 3 processes resume from that checkpoint (load_state; each reads the saving processes'
#      parts one at a time and keeps its own share), without a limit and under the one above:
#        zero-memory-torch-load: optimizer=torch|accel model=whole|sharded stage=3 peak_mb=P rss_vs_training=Q
#        zero-memory-torch-load-limit: optimizer=torch|accel model=whole|sharded limit_mb=L result=loaded|killed
#      (Q: the loading processes' peak resident memory, summed, against the saving run's while training)
#   4. Stage 3's step time on the training benchmark's MLP 784-1024-1024-10 (AdamW, batch 64 per process),
#      stage 0, stage 3 and stage 3 without prefetching (ZERO_PREFETCH=off) interleaved, ZERO_STEP_ROUNDS
#      rounds (default 5) of 100 steps, medians:
#        zero-step-torch: model=mlp stage0_ms=A stage3_ms=B stage3_vs_stage0=R   (target R <= 1.3)
#        zero-step-prefetch: model=mlp stage3_ms=B no_prefetch_ms=C prefetch_vs_none=Q gather_wait_ms=W
#          no_prefetch_gather_wait_ms=V
#      (W, V: the time per step the units' gathers waited for their all-gathers, which prefetching hides);
#      then the same for part 3's deep MLP (model=deep), ZERO_STEP_ROUNDS rounds of 10 steps. Both with
#      glibc's malloc as it comes: under the fixed mmap threshold of part 3 every unit's buffer is a fresh
#      mapping, whose page faults the step pays (part 3's step_ms).
#   5. The deep MLP as a residual TorchScript model (make_deep_mlp.py's "residual": an nn.ModuleList looped
#      over, a forward that is no chain, cut between its layers under stage 3), and the same with a parameter
#      of the root's own multiplying the first layer's output ("residual-gate": held through the forward,
#      the layers still cut), stages 0 and 3 by train_accel without a limit, with the fixed mmap threshold:
#        zero-memory-residual: model=M stage=S peak_mb=P step_ms=T
#        zero-memory-residual: model=M stage3_vs_stage0=R   (the two processes' peaks)
#   6. ZeRO-Offload under stages 1 and 2 (zero_cpu_offload: the optimizer stepping host copies of each process's
#      pieces) against the same stage without it, the deep MLP by train_accel, ZERO_OFFLOAD_ROUNDS (3)
#      interleaved rounds, medians, with the fixed mmap threshold. On the CPU the host is the device: the
#      copies add to the memory and the step what offload takes off a GPU's memory, which this cannot show:
#        zero-offload: stage=S offload=0|1 peak_mb=P optimizer_state_mb=O step_ms=T
#        zero-offload: stage=S peak_vs_on_device=Q step_vs_on_device=R
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
LIBACCEL=$(cd "$BIN/../lib" && pwd)/libaccel.so  # what accel's Python package opens (part 3)
MODEL=$MODEL_DIR/zero_deep_mlp.pt
if [ "$(dirname "${BASH_SOURCE[0]}")/make_deep_mlp.py" -nt "$MODEL" ]; then
  "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/make_deep_mlp.py" "$MODEL" 784 2048 12 10
fi
for residual in residual residual-gate; do
  if [ "$(dirname "${BASH_SOURCE[0]}")/make_deep_mlp.py" -nt "$MODEL_DIR/zero_$residual.pt" ]; then
    "$PYTHON" "$(dirname "${BASH_SOURCE[0]}")/make_deep_mlp.py" "$MODEL_DIR/zero_$residual.pt" 784 2048 12 10 "$residual"
  fi
done

group=$CGROUP_ROOT/accel_zero_memory_$$
cleanup() { [ -d "$group" ] && rmdir "$group" 2>/dev/null || true; }
trap cleanup EXIT

# in_group LIMIT_BYTES PREFIX COMMAND...: runs COMMAND on 2 processes in a fresh cgroup (LIMIT_BYTES 0: no
# limit); prints its line starting with PREFIX (empty when a rank was killed) then the group's peak in bytes.
in_group() {
  cleanup
  mkdir "$group"
  [ "$1" = 0 ] || echo "$1" > "$group/memory.limit_in_bytes"
  local line
  line=$(bash -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$group" \
    "$BIN/accel" launch --nproc-per-node 2 --cpu --master-port 0 -- "${@:3}" 2>/dev/null | grep "^$2 " || true)
  echo "$line"
  cat "$group/memory.max_usage_in_bytes"
}

# run_in_group STAGE LIMIT_BYTES [VARIABLE=VALUE...]: train_accel in_group, the processes started with the
# variables added to their environment; TRAIN_ACCEL_OPTIONS, more of train_accel's arguments.
run_in_group() {
  # shellcheck disable=SC2086  # the options are words
  in_group "$2" accel env "${@:3}" "$BIN/train_accel" "$MODEL" "$STEPS" 2 optimizer=adamw "zero_stage=$1" \
    ${TRAIN_ACCEL_OPTIONS:-}
}

# run_torch_in_group STAGE LIMIT_BYTES [SAVE_DIR]: bench/train_torch_sharded.py in_group (part 3).
run_torch_in_group() {
  in_group "$2" accel-torch env MALLOC_MMAP_THRESHOLD_=1048576 ACCEL_LIBRARY="$LIBACCEL" "$PYTHON" \
    "$(dirname "${BASH_SOURCE[0]}")/train_torch_sharded.py" "$1" "$STEPS" 784 2048 12 10 "${@:3}"
}

# run_torch_load_in_group LIMIT_BYTES DIR OPTIMIZER: fresh stage 3 processes load_state(DIR) in_group (part 3).
run_torch_load_in_group() {
  in_group "$1" accel-torch-load env MALLOC_MMAP_THRESHOLD_=1048576 ACCEL_LIBRARY="$LIBACCEL" "$PYTHON" \
    "$(dirname "${BASH_SOURCE[0]}")/train_torch_sharded.py" 3 "$STEPS" 784 2048 12 10 "$2" "$3" load
}

mb() { awk -v b="$1" 'BEGIN { printf "%.0f", b / 1048576 }'; }

# measure MALLOC_NAME [VARIABLE=VALUE...]: parts 1 and 2 above, the variables added to the processes' environment.
measure() {
  local name=$1 stage line bytes limit
  shift
  local -A peak
  for stage in 0 1 2 3; do
    { read -r line; read -r bytes; } < <(run_in_group "$stage" 0 "$@")
    [ -n "$line" ] || { echo "zero-memory: stage $stage did not train" >&2; exit 1; }
    peak[$stage]=$bytes
    echo "zero-memory: malloc=$name stage=$stage peak_mb=$(mb "$bytes")" \
      "optimizer_state_mb=$(mb "$(value "$line" optimizer_state_bytes)") gradient_mb=$(mb "$(value "$line" gradient_bytes)")" \
      "step_ms=$(value "$line" step_ms)"
  done
  limit=$(( (peak[0] + peak[2]) / 2 ))
  for stage in 0 2 3; do
    { read -r line; read -r bytes; } < <(run_in_group "$stage" "$limit" "$@")
    echo "zero-memory-limit: malloc=$name limit_mb=$(mb "$limit") stage=$stage result=$([ -n "$line" ] && echo trained || echo killed)"
  done
}

measure_torch() {
  local stage line bytes limit
  local -A peak
  for stage in 0 3; do
    { read -r line; read -r bytes; } < <(run_torch_in_group "$stage" 0)
    [ -n "$line" ] || { echo "zero-memory: the torch module did not train at stage $stage" >&2; exit 1; }
    peak[$stage]=$bytes
    echo "zero-memory-torch: stage=$stage peak_mb=$(mb "$bytes") parameter_mb=$(mb "$(value "$line" parameter_bytes)")" \
      "optimizer_state_mb=$(mb "$(value "$line" optimizer_state_bytes)") step_ms=$(value "$line" step_ms)" \
      "prepare_vs_built=$(ratio "$(value "$line" rss_prepare_kb)" "$(value "$line" rss_built_kb)")"
    [ "$stage" = 3 ] || continue
    local forward bound after after_bound
    forward=$(value "$line" forward_peak_bytes)
    bound=$(value "$line" forward_bound_bytes)
    after=$(value "$line" after_step_bytes)
    after_bound=$(value "$line" after_step_bound_bytes)
    echo "zero-memory-torch-bounds: share_mb=$(mb "$(value "$line" share_bytes)") forward_peak_mb=$(mb "$forward")" \
      "forward_bound_mb=$(mb "$bound") after_step_mb=$(mb "$after") after_step_bound_mb=$(mb "$after_bound")" \
      "met=$([ "$forward" -le "$bound" ] && [ "$after" -le "$after_bound" ] && echo yes || echo no)"
  done
  limit=$(( (peak[0] + peak[3]) / 2 ))
  for stage in 0 3; do
    { read -r line; read -r bytes; } < <(run_torch_in_group "$stage" "$limit")
    echo "zero-memory-torch-limit: limit_mb=$(mb "$limit") stage=$stage result=$([ -n "$line" ] && echo trained || echo killed)"
  done
  local saved optimizer run model_files
  for run in torch:whole accel:whole torch:sharded; do
    optimizer=${run%%:*}
    model_files=${run#*:}
    export ZERO_CHECKPOINT_MODEL=$model_files
    saved=$(mktemp -d)
    { read -r line; read -r bytes; } < <(run_torch_in_group 3 0 "$saved/checkpoint" "$optimizer")
    [ -n "$line" ] || { echo "zero-memory: the torch module did not save at stage 3 ($optimizer)" >&2; exit 1; }
    echo "zero-memory-torch-save: optimizer=$optimizer model=$model_files stage=3 peak_mb=$(mb "$bytes")" \
      "peak_vs_training=$(ratio "$bytes" "${peak[3]}")" \
      "rss_vs_training=$(ratio "$(value "$line" rss_peak_kb)" "$(value "$line" rss_training_kb)")" \
      "save_ms=$(value "$line" save_ms)"
    local training_kb load_line
    training_kb=$(value "$line" rss_training_kb)
    { read -r load_line; read -r bytes; } < <(run_torch_load_in_group 0 "$saved/checkpoint" "$optimizer")
    [ -n "$load_line" ] || { echo "zero-memory: stage 3 did not load its checkpoint ($optimizer)" >&2; exit 1; }
    echo "zero-memory-torch-load: optimizer=$optimizer model=$model_files stage=3 peak_mb=$(mb "$bytes")" \
      "rss_vs_training=$(ratio "$(value "$load_line" rss_load_kb)" "$training_kb")"
    { read -r load_line; read -r bytes; } < <(run_torch_load_in_group "$limit" "$saved/checkpoint" "$optimizer")
    echo "zero-memory-torch-load-limit: optimizer=$optimizer model=$model_files limit_mb=$(mb "$limit") result=$([ -n "$load_line" ] && echo loaded || echo killed)"
    rm -rf "$saved"
    saved=$(mktemp -d)
    { read -r line; read -r bytes; } < <(run_torch_in_group 3 "$limit" "$saved/checkpoint" "$optimizer")
    rm -rf "$saved"
    echo "zero-memory-torch-save-limit: optimizer=$optimizer model=$model_files limit_mb=$(mb "$limit") result=$([ -n "$line" ] && echo saved || echo killed)"
  done
  unset ZERO_CHECKPOINT_MODEL
}

# measure_residual: part 5, the residual TorchScript MLPs under stages 0 and 3 without a limit.
measure_residual() {
  local model stage line bytes
  local -A peak
  for model in residual residual-gate; do
    for stage in 0 3; do
      { read -r line; read -r bytes; } < <(MODEL=$MODEL_DIR/zero_$model.pt run_in_group "$stage" 0 MALLOC_MMAP_THRESHOLD_=1048576)
      [ -n "$line" ] || { echo "zero-memory: the $model model did not train under stage $stage" >&2; exit 1; }
      peak[$stage]=$bytes
      echo "zero-memory-residual: model=$model stage=$stage peak_mb=$(mb "$bytes") step_ms=$(value "$line" step_ms)"
    done
    echo "zero-memory-residual: model=$model" \
      "stage3_vs_stage0=$(ratio "${peak[3]}" "${peak[0]}")"
  done
}

# measure_step_time NAME STEPS WIDTH DEPTH: part 4 for the MLP 784-WIDTHxDEPTH-10.
measure_step_time() {
  local name=$1 steps=$2 width=$3 depth=$4 round run line
  local -A times
  local -A waits
  for round in $(seq "${ZERO_STEP_ROUNDS:-5}"); do
    for run in 0 3 3-no-prefetch; do
      line=$(ZERO_PREFETCH=$([ "$run" = 3-no-prefetch ] && echo off || echo on) ACCEL_LIBRARY="$LIBACCEL" \
        "$BIN/accel" launch --nproc-per-node 2 --cpu --master-port 0 -- "$PYTHON" \
        "$(dirname "${BASH_SOURCE[0]}")/train_torch_sharded.py" "${run%%-*}" "$steps" 784 "$width" "$depth" 10 2>/dev/null |
        grep '^accel-torch ' || true)
      result "stage $run" "$line"
      times[$run]+="$(value "$line" step_ms) "
      [ "$run" = 0 ] || waits[$run]+="$(value "$line" gather_wait_ms) "
    done
  done
  local zero three none
  zero=$(median_of "${times[0]}")
  three=$(median_of "${times[3]}")
  none=$(median_of "${times[3-no-prefetch]}")
  echo "zero-step-torch: model=$name stage0_ms=$zero stage3_ms=$three stage3_vs_stage0=$(ratio "$three" "$zero")"
  echo "zero-step-prefetch: model=$name stage3_ms=$three no_prefetch_ms=$none" \
    "prefetch_vs_none=$(ratio "$three" "$none")" \
    "gather_wait_ms=$(median_of "${waits[3]}") no_prefetch_gather_wait_ms=$(median_of "${waits[3-no-prefetch]}")"
}

# measure_offload: part 6.
measure_offload() {
  local stage offload round line bytes
  local -A peaks steps states
  for round in $(seq "${ZERO_OFFLOAD_ROUNDS:-3}"); do
    for stage in 1 2; do
      for offload in 0 1; do
        { read -r line; read -r bytes; } < <(TRAIN_ACCEL_OPTIONS=$([ "$offload" = 1 ] && echo zero_cpu_offload) \
          run_in_group "$stage" 0 MALLOC_MMAP_THRESHOLD_=1048576)
        result "stage $stage offload $offload" "$line"
        peaks[$stage$offload]+="$bytes "
        steps[$stage$offload]+="$(value "$line" step_ms) "
        states[$stage$offload]=$(value "$line" optimizer_state_bytes)
      done
    done
  done
  local -A peak step
  for stage in 1 2; do
    for offload in 0 1; do
      peak[$offload]=$(median_of "${peaks[$stage$offload]}")
      step[$offload]=$(median_of "${steps[$stage$offload]}")
      echo "zero-offload: stage=$stage offload=$offload peak_mb=$(mb "${peak[$offload]}")" \
        "optimizer_state_mb=$(mb "${states[$stage$offload]}") step_ms=${step[$offload]}"
    done
    echo "zero-offload: stage=$stage peak_vs_on_device=$(ratio "${peak[1]}" "${peak[0]}")" \
      "step_vs_on_device=$(ratio "${step[1]}" "${step[0]}")"
  done
}

if [ "${ZERO_MEMORY_PARTS:-all}" = offload ]; then
  measure_offload
  exit 0
fi
if [ "${ZERO_MEMORY_PARTS:-all}" = residual ]; then
  measure_residual
  exit 0
fi
if [ "${ZERO_MEMORY_PARTS:-all}" = all ] || [ "${ZERO_MEMORY_PARTS:-all}" = script ]; then
  measure default
  measure mmap-threshold-1MiB MALLOC_MMAP_THRESHOLD_=1048576
  measure_residual
  measure_offload
fi
[ "${ZERO_MEMORY_PARTS:-all}" = script ] && exit 0
[ "${ZERO_MEMORY_PARTS:-all}" = step ] || measure_torch
measure_step_time mlp 100 1024 2
measure_step_time deep 10 2048 12
