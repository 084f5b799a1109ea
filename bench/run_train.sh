#!/usr/bin/env bash
# The training benchmark, run by `./dev bench train` (never by ctest: timings are not tests).
#   bench/run_train.sh BIN_DIR MODEL_DIR   BIN_DIR holds accel, train_accel and train_libtorch (build/bin);
#                                          MODEL_DIR receives train_mlp.pt (build/bench)
# An MLP 784-1024-1024-10 (examples/make_mlp.py, TorchScript, torch.manual_seed(0)), batch 64 per
# process, SGD lr 0.01, cross-entropy, synthetic batches (the same numbers on every side), one thread per
# process. Sides, run one after the other in this order TRAIN_BENCH_ROUNDS times (default 5, at least 5):
#   libtorch 1p   bench/train_libtorch.cpp, the same loop on plain LibTorch, optimizer.zero_grad()
#                 (LibTorch 1.13 zeroes the gradients in place)
#   libtorch 1p   the same with the gradients dropped instead (set_to_none), which is what
#                 accel_optimizer_zero_grad does: the like-for-like baseline of R1
#   accel 1p      bench/train_accel.c (C API only), run directly
#   torch-ddp 2p  bench/train_torch_ddp.py, DistributedDataParallel in Debian's Python torch, through
#                 `accel launch --nproc-per-node 2 --cpu --master-port 0 -- /usr/bin/python3 ...`
#   accel 2p      bench/train_accel.c through the same launcher (all-reduces through shared memory, the
#                 default on one host)
#   accel 2p+tl   the same with the step timeline on (ACCEL_TIMELINE), to price it
#   accel 2p gloo the same with Gloo carrying the all-reduces (ACCEL_INTRA_NODE_TRANSPORT=gloo), what the
#                 shared memory gains (informational)
#   accel 2p bf16 accel 2p with the buckets all-reduced in bf16 (grad_compression=bf16; informational, and
#                 out of the loss agreement check: its gradients differ by bf16's rounding)
#   limit         two accel 1p runs at once, one per core: the slower one's step is what a 2-process step
#                 would take if communication were free (the machine's limit)
#   eager torch 1p   bench/train_torch_eager.py torch: the MLP as a Python nn.Module, a plain torch loop
#   eager accel 1p   bench/train_torch_eager.py accel: the same module, torch.optim.SGD and loop prepared by
#                    accel's Python package as an Accelerate script (ACCEL_LIBRARY=BIN_DIR/../lib/libaccel.so)
#   eager accel 2p   the same through the launcher, gradients all-reduced from autograd's hooks
#   eager limit      two eager torch 1p runs at once, one per core: the eager side's limit, as the limit above
# Each run warms up TRAIN_BENCH_WARMUP steps (10), then times TRAIN_BENCH_STEPS steps (200); a 2-process
# run starts its clock after a barrier and rank 0 reports. The medians are compared. The last line:
#   train: overhead_vs_libtorch_1proc=R1 accel_vs_torch_ddp_2proc=R2 scaling_2proc=R3 accel_vs_limit_2proc=R4
# R1 = accel's 1-process step time over plain LibTorch's (set_to_none); R2 = accel's 2-process throughput
# over DDP's; R3 = accel's 2-process throughput over twice its 1-process throughput; R4 = accel's 2-process
# throughput over the limit's (two samples per limit step). Targets: R1 <= 1.03, R2 >= 1.5, R3 >= 0.75,
# R4 >= 0.8. Before it, the eager side:
#   eager: overhead_vs_torch_1proc=E1 accel_vs_torch_ddp_2proc=E2 accel_vs_limit_2proc=E3 limit_vs_torch_ddp_2proc=E4
# E1 = eager accel 1p step time over the eager torch loop's; E2 = eager accel 2p throughput over torch-ddp 2p's
# (DDP is what Accelerate runs such a module on); E3 = eager accel 2p throughput over the eager limit's; E4 =
# the eager limit's throughput over torch-ddp 2p's: the most E2 can be on this machine, since no 2-process
# run of the eager loop, whatever carries its gradients, steps faster than two loops that send nothing.
# Targets: E1 <= 1.05, E2 >= 1.5. The line before those prices the timeline: timeline_overhead_2proc = accel's 2-process step time
# with the timeline on over without (target <= 1.02). R1 against the optimizer.zero_grad() loop is printed
# too, as information. The line before those gives the medians of rank 0's gradient all-reduce figures per
# step (train_accel.c's sync_*: time in flight, the part that overlapped backward, the part exposed after
# it, backward's measured wait, the shared-memory thread's CPU time), shared memory and Gloo side by side.
# Checkpoints (TRAIN_BENCH_CHECKPOINT_EVERY=N, default 50; 0 leaves them out): two more sides each round,
#   accel 2p ckpt blocking    accel 2p with accel_state_save_state of the model and SGD state after every
#                             N-th timed step but the last (into MODEL_DIR/checkpoints.*, replaced each time)
#   accel 2p ckpt background  the same with accel_state_save_state_async, the last save waited for on the clock
# and, before the last line, "checkpoint: every=N saves=S blocking_over_none_2proc=C1
# background_over_none_2proc=C2 blocking_ms_per_save=B background_ms_per_save=G": each side's step time
# over accel 2p's without checkpoints, and what one save costs the training (the difference, per save).
# ZeRO: two more sides each round, accel 2p trained with AdamW (weight_decay 0.01) under zero_stage 0 and
# under zero_stage 2, and before the last line
#   zero: optimizer_state_ratio=Z1 gradient_ratio=Z2 step_vs_stage0=Z3
# rank 0's optimizer state bytes, gradient bytes held after a synchronising backward (accel_model_grad_sync_stat's
# optimizer_state_bytes and gradient_bytes) and median step time, stage 2 over stage 0. Targets: Z1 <= 0.52,
# Z2 <= 0.55, Z3 <= 1.0. ZeRO splits by elements (equal chunks of each gradient bucket), so each rank holds
# half of the state give or take 64 elements a bucket. Peak memory: bench/run_zero_memory.sh.
# Every process is bound to a CPU of its own, as `accel launch --cpu-affinity` binds ranks (and mpirun does
# by default), on the first two CPUs the script may use: 1-process runs go on the first (the limit's second
# run on the second), and the 2-process runs of every side, PyTorch DDP's included, are started on both by
# `accel launch --cpu-affinity`, which gives each rank one. On two cores that keeps each rank's helper
# threads on its own core. TRAIN_BENCH_PIN=0 binds nothing (the scheduler places everything), as does a
# machine with one CPU.
set -euo pipefail
BIN=${1:?usage: bench/run_train.sh BIN_DIR MODEL_DIR}
MODEL_DIR=${2:?usage: bench/run_train.sh BIN_DIR MODEL_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${TRAIN_BENCH_ROUNDS:-5}
STEPS=${TRAIN_BENCH_STEPS:-200}
WARMUP=${TRAIN_BENCH_WARMUP:-10}
PIN=${TRAIN_BENCH_PIN:-1}
CHECKPOINT_EVERY=${TRAIN_BENCH_CHECKPOINT_EVERY:-50}
PYTHON=/usr/bin/python3
LIBACCEL=$(cd "$BIN/../lib" && pwd)/libaccel.so  # what accel's Python package opens (the eager accel sides)
RUN_TIMEOUT=300  # seconds; a hung run fails the benchmark instead of stalling it

# One thread per process on every side; torch.set_num_threads(1) and at::set_num_threads(1) in the
# programs too.
# shellcheck source=bench/common.sh
source "$HERE/common.sh"
check_counts TRAIN_BENCH 5
[ "$CHECKPOINT_EVERY" -ge 0 ] 2>/dev/null || { echo "TRAIN_BENCH_CHECKPOINT_EVERY must be a number >= 0" >&2; exit 2; }

MODEL=$MODEL_DIR/train_mlp.pt
make_model "$PYTHON" "$MODEL"

# The first two CPUs this script may use.
read -ra CPUS <<<"$("$PYTHON" -c 'import os; print(*sorted(os.sched_getaffinity(0))[:2])')"
if [ "$PIN" = 1 ] && [ "${#CPUS[@]}" -lt 2 ]; then
  echo "only one CPU to run on: nothing is bound" >&2
  PIN=0
fi
if [ "$PIN" = 1 ]; then
  # The launcher runs on the two CPUs, and --cpu-affinity gives each rank one of them.
  PIN1=(taskset -c "${CPUS[0]}") PIN_OTHER=(taskset -c "${CPUS[1]}")
  PIN2=(taskset -c "${CPUS[0]},${CPUS[1]}") PIN2_OPTION=(--cpu-affinity)
  pinning="1-process runs bound to CPU ${CPUS[0]}, 2-process runs started with accel launch --cpu-affinity on CPUs ${CPUS[0]},${CPUS[1]} (a CPU each)"
else
  PIN1=() PIN2=() PIN2_OPTION=() PIN_OTHER=()
  pinning="nothing bound"
fi
launch2() {
  timeout "$RUN_TIMEOUT" ${PIN2[@]+"${PIN2[@]}"} "$BIN/accel" launch --nproc-per-node 2 --cpu --master-port 0 \
    ${PIN2_OPTION[@]+"${PIN2_OPTION[@]}"} -- "$@"
}
run1() { timeout "$RUN_TIMEOUT" ${PIN1[@]+"${PIN1[@]}"} "$@"; }
# run1_twice PREFIX ARGS...: the same 1-process run twice at once (on CPUs 0 and 1 when pinned); prints the
# slower run's result line, the one starting with PREFIX.
run1_twice() {
  local prefix=$1 other first second
  shift
  other=$(mktemp)
  timeout "$RUN_TIMEOUT" ${PIN_OTHER[@]+"${PIN_OTHER[@]}"} "$@" >"$other" &
  first=$(run1 "$@" | grep "^$prefix " || true)
  wait $!
  second=$(grep "^$prefix " "$other" || true)
  rm -f "$other"
  result "limit (the first of two 1p runs at once)" "$first"
  result "limit (the second of two 1p runs at once)" "$second"
  if awk -v a="$(value "$first" step_ms)" -v b="$(value "$second" step_ms)" 'BEGIN { exit !(a >= b) }'; then
    echo "$first"
  else
    echo "$second"
  fi
}

echo "training benchmark: MLP 784-1024-1024-10, batch 64 per process, SGD lr 0.01, cross-entropy, synthetic data"
echo "threads: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for every process, at::set_num_threads(1) in plain LibTorch, torch.set_num_threads(1) in Python"
echo "machine: $(machine_line); $pinning"
echo "steps timed: $STEPS after $WARMUP warm-up steps; $ROUNDS rounds of: libtorch 1p (zero_grad), libtorch 1p (set_to_none), accel 1p, torch-ddp 2p, accel 2p, accel 2p with the timeline, accel 2p through Gloo, accel 2p with bf16 gradient compression, eager torch 1p, eager accel 1p, eager accel 2p, eager limit (eager torch 1p twice at once), limit (accel 1p twice at once); medians compared"

if [ "$CHECKPOINT_EVERY" -gt 0 ]; then
  echo "checkpoints: accel 2p also with a blocking and with a background save of the model and optimizer every $CHECKPOINT_EVERY steps"
fi

lt_zero=() lt_none=() accel1=() ddp2=() accel2=() ddp2_sps=() accel2_sps=() accel1_sps=() accel2_tl=() accel2_gloo=() limit=()
accel2_bf16=() eager_torch1=() eager_accel1=() eager_accel2_sps=() eager_limit=()
SYNC_FIGURES="reduce_ms overlapped_ms exposed_ms wait_ms helper_cpu_ms"
declare -A sync_shm sync_gloo  # figure -> the rounds' values, space-separated
ckpt_blocking=() ckpt_background=()
zero0=() zero2=() zero_lines=()
TIMELINE_DIR=$(mktemp -d)
# On the disk of the build tree rather than /tmp, which may be memory: a save's cost includes its flushes.
CHECKPOINT_DIR=$(mktemp -d "$MODEL_DIR/checkpoints.XXXXXX")
trap 'rm -rf "$TIMELINE_DIR" "$CHECKPOINT_DIR"' EXIT
losses=()  # "side first_loss last_loss" for the agreement check
for round in $(seq 1 "$ROUNDS"); do
  line=$(run1 "$BIN/train_libtorch" "$MODEL" "$STEPS" "$WARMUP" | grep '^libtorch ' || true)
  result "libtorch 1p (zero_grad)" "$line"
  echo "round $round: $line"
  lt_zero+=("$(value "$line" step_ms)") losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(run1 "$BIN/train_libtorch" "$MODEL" "$STEPS" "$WARMUP" set_to_none | grep '^libtorch ' || true)
  result "libtorch 1p (set_to_none)" "$line"
  echo "round $round: $line"
  lt_none+=("$(value "$line" step_ms)") losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(run1 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" | grep '^accel ' || true)
  result "accel 1p" "$line"
  echo "round $round: $line"
  accel1+=("$(value "$line" step_ms)") accel1_sps+=("$(value "$line" samples_per_s)")
  losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(launch2 "$PYTHON" "$HERE/train_torch_ddp.py" "$MODEL" "$STEPS" "$WARMUP" | grep '^torch_ddp ' || true)
  result "torch-ddp 2p" "$line"
  echo "round $round: $line"
  ddp2+=("$(value "$line" step_ms)") ddp2_sps+=("$(value "$line" samples_per_s)")
  losses+=("2p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(launch2 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" | grep '^accel ' || true)
  result "accel 2p" "$line"
  echo "round $round: $line"
  accel2+=("$(value "$line" step_ms)") accel2_sps+=("$(value "$line" samples_per_s)")
  losses+=("2p $(value "$line" first_loss) $(value "$line" last_loss)")
  for f in $SYNC_FIGURES; do sync_shm[$f]+=" $(value "$line" "sync_$f")"; done

  line=$(ACCEL_TIMELINE="$TIMELINE_DIR/round$round" launch2 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" | grep '^accel ' || true)
  result "accel 2p with the timeline" "$line"
  [ -s "$TIMELINE_DIR/round$round/timeline.rank0.json" ] || { echo "run_train.sh: the timeline run wrote no trace" >&2; exit 1; }
  echo "round $round (timeline on): $line"
  accel2_tl+=("$(value "$line" step_ms)")
  losses+=("2p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(ACCEL_INTRA_NODE_TRANSPORT=gloo launch2 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" | grep '^accel ' || true)
  result "accel 2p through Gloo" "$line"
  echo "round $round (all-reduces through Gloo): $line"
  accel2_gloo+=("$(value "$line" step_ms)")
  losses+=("2p $(value "$line" first_loss) $(value "$line" last_loss)")
  for f in $SYNC_FIGURES; do sync_gloo[$f]+=" $(value "$line" "sync_$f")"; done

  line=$(launch2 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" grad_compression=bf16 | grep '^accel ' || true)
  result "accel 2p with bf16 gradient compression" "$line"
  echo "round $round (buckets all-reduced in bf16): $line"
  accel2_bf16+=("$(value "$line" step_ms)")

  if [ "$CHECKPOINT_EVERY" -gt 0 ]; then
    for mode in blocking background; do
      line=$(launch2 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" "checkpoint_every=$CHECKPOINT_EVERY" "checkpoint=$mode" \
        "checkpoint_dir=$CHECKPOINT_DIR/$mode" | grep '^accel ' || true)
      result "accel 2p with a $mode save every $CHECKPOINT_EVERY steps" "$line"
      echo "round $round ($mode save every $CHECKPOINT_EVERY steps): $line"
      if [ "$mode" = blocking ]; then ckpt_blocking+=("$(value "$line" step_ms)"); else ckpt_background+=("$(value "$line" step_ms)"); fi
      losses+=("2p $(value "$line" first_loss) $(value "$line" last_loss)")
    done
  fi

  for stage in 0 2; do
    line=$(launch2 "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" optimizer=adamw "zero_stage=$stage" | grep '^accel ' || true)
    result "accel 2p AdamW zero_stage $stage" "$line"
    echo "round $round (AdamW, zero_stage $stage): $line"
    if [ "$stage" = 0 ]; then zero0+=("$(value "$line" step_ms)"); else zero2+=("$(value "$line" step_ms)"); fi
    zero_lines[stage]="$(value "$line" optimizer_state_bytes) $(value "$line" gradient_bytes)"
    losses+=("2p-adamw $(value "$line" first_loss) $(value "$line" last_loss)")
  done

  line=$(run1 "$PYTHON" "$HERE/train_torch_eager.py" torch "$MODEL" "$STEPS" "$WARMUP" | grep '^torch_eager ' || true)
  result "eager torch 1p" "$line"
  echo "round $round (eager nn.Module, plain torch loop): $line"
  eager_torch1+=("$(value "$line" step_ms)") losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(ACCEL_LIBRARY=$LIBACCEL run1 "$PYTHON" "$HERE/train_torch_eager.py" accel "$MODEL" "$STEPS" "$WARMUP" | grep '^accel_eager ' || true)
  result "eager accel 1p" "$line"
  echo "round $round (eager nn.Module prepared by accel): $line"
  eager_accel1+=("$(value "$line" step_ms)") losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(ACCEL_LIBRARY=$LIBACCEL launch2 "$PYTHON" "$HERE/train_torch_eager.py" accel "$MODEL" "$STEPS" "$WARMUP" | grep '^accel_eager ' || true)
  result "eager accel 2p" "$line"
  echo "round $round (eager nn.Module prepared by accel, 2 processes): $line"
  eager_accel2_sps+=("$(value "$line" samples_per_s)") losses+=("2p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(run1_twice torch_eager "$PYTHON" "$HERE/train_torch_eager.py" torch "$MODEL" "$STEPS" "$WARMUP")
  result "eager limit (eager torch 1p twice at once)" "$line"
  echo "round $round (eager limit, the slower of two eager torch 1p runs at once): $line"
  eager_limit+=("$(value "$line" step_ms)") losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")

  line=$(run1_twice accel "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP")
  result "limit (accel 1p twice at once)" "$line"
  echo "round $round (limit, the slower of two 1p runs at once): $line"
  limit+=("$(value "$line" step_ms)")
  losses+=("1p $(value "$line" first_loss) $(value "$line" last_loss)")
done

printf '%s\n' "${losses[@]}" | check_losses 1e-4

m_zero=$(median "${lt_zero[@]}") m_none=$(median "${lt_none[@]}") m_a1=$(median "${accel1[@]}")
m_d2=$(median "${ddp2[@]}") m_a2=$(median "${accel2[@]}") m_a2_tl=$(median "${accel2_tl[@]}") m_limit=$(median "${limit[@]}")
m_a2_gloo=$(median "${accel2_gloo[@]}") m_a2_bf16=$(median "${accel2_bf16[@]}")
sync_line="gradient all-reduce per accel 2p step, rank 0, medians (ms):"
for transport in shm gloo; do
  sync_line+=" $transport"
  for f in $SYNC_FIGURES; do
    if [ $transport = shm ]; then values=${sync_shm[$f]}; else values=${sync_gloo[$f]}; fi
    # shellcheck disable=SC2086  # one word per round
    sync_line+=" ${f%_ms}=$(median $values)"
  done
  [ $transport = shm ] && sync_line+=";"
done
echo "$sync_line"
eager_line=$(awk -v t="$(median "${eager_torch1[@]}")" -v a="$(median "${eager_accel1[@]}")" \
    -v a2s="$(median "${eager_accel2_sps[@]}")" -v d2s="$(median "${ddp2_sps[@]}")" -v lim="$(median "${eager_limit[@]}")" 'BEGIN {
  lims = 128000 / lim
  printf "median eager torch 1p: %.3f ms/step; eager accel 1p: %.3f ms/step; eager accel 2p: %.1f samples/s; eager limit: %.3f ms/step, %.1f samples/s over both; targets: overhead_vs_torch_1proc <= 1.05 (%s), accel_vs_torch_ddp_2proc >= 1.5 (%s; at most %.2f on this machine: the limit over DDP)\n", \
    t, a, a2s, lim, lims, (a / t <= 1.05) ? "met" : "missed", (a2s / d2s >= 1.5) ? "met" : "missed", lims / d2s
  printf "eager: overhead_vs_torch_1proc=%.2f accel_vs_torch_ddp_2proc=%.2f accel_vs_limit_2proc=%.2f limit_vs_torch_ddp_2proc=%.2f", a / t, a2s / d2s, a2s / lims, lims / d2s
}')
m_a1_sps=$(median "${accel1_sps[@]}") m_d2_sps=$(median "${ddp2_sps[@]}") m_a2_sps=$(median "${accel2_sps[@]}")
checkpoint_lines=""
if [ "$CHECKPOINT_EVERY" -gt 0 ]; then
  checkpoint_lines=$(awk -v a2="$m_a2" -v b="$(median "${ckpt_blocking[@]}")" -v g="$(median "${ckpt_background[@]}")" \
      -v every="$CHECKPOINT_EVERY" -v steps="$STEPS" 'BEGIN {
    saves = int((steps - 1) / every)
    printf "median accel 2p, blocking save every %d steps:   %.3f ms/step\n", every, b
    printf "median accel 2p, background save every %d steps: %.3f ms/step\n", every, g
    printf "checkpoint: every=%d saves=%d blocking_over_none_2proc=%.3f background_over_none_2proc=%.3f", every, saves, b / a2, g / a2
    if (saves > 0) printf " blocking_ms_per_save=%.1f background_ms_per_save=%.1f", (b - a2) * steps / saves, (g - a2) * steps / saves
    printf "\n"
  }')
fi
read -r state0 grads0 <<<"${zero_lines[0]}"
read -r state2 grads2 <<<"${zero_lines[2]}"
zero_line=$(awk -v s0="$state0" -v g0="$grads0" -v s2="$state2" -v g2="$grads2" -v t0="$(median "${zero0[@]}")" \
    -v t2="$(median "${zero2[@]}")" 'BEGIN {
  printf "median accel 2p AdamW: zero_stage 0 %.3f ms/step, zero_stage 2 %.3f ms/step; rank 0 holds %d / %d optimizer state bytes and %d / %d gradient bytes\n", t0, t2, s2, s0, g2, g0
  printf "targets: optimizer_state_ratio <= 0.52 (%s), gradient_ratio <= 0.55 (%s), step_vs_stage0 <= 1.0 (%s)\n", \
    (s2 / s0 <= 0.52) ? "met" : "missed", (g2 / g0 <= 0.55) ? "met" : "missed", (t2 / t0 <= 1.0) ? "met" : "missed"
  printf "zero: optimizer_state_ratio=%.3f gradient_ratio=%.3f step_vs_stage0=%.3f", s2 / s0, g2 / g0, t2 / t0
}')
ZERO_LINE=$zero_line EAGER_LINE=$eager_line CHECKPOINT_LINES=$checkpoint_lines awk -v z="$m_zero" -v n="$m_none" -v a1="$m_a1" -v d2="$m_d2" -v a2="$m_a2" -v a2tl="$m_a2_tl" -v lim="$m_limit" -v a2g="$m_a2_gloo" \
    -v a2b="$m_a2_bf16" \
    -v a1s="$m_a1_sps" -v d2s="$m_d2_sps" -v a2s="$m_a2_sps" 'BEGIN {
  printf "median libtorch 1p (zero_grad):   %.3f ms/step, %.1f samples/s\n", z, 64000 / z
  printf "median libtorch 1p (set_to_none): %.3f ms/step, %.1f samples/s\n", n, 64000 / n
  printf "median accel 1p:                  %.3f ms/step, %.1f samples/s\n", a1, a1s
  printf "median torch-ddp 2p:              %.3f ms/step, %.1f samples/s\n", d2, d2s
  printf "median accel 2p:                  %.3f ms/step, %.1f samples/s\n", a2, a2s
  printf "median accel 2p, timeline on:     %.3f ms/step\n", a2tl
  printf "median accel 2p through Gloo:     %.3f ms/step\n", a2g
  printf "median accel 2p, bf16 buckets:    %.3f ms/step\n", a2b
  printf "median limit (1p twice at once):  %.3f ms/step, %.1f samples/s over both\n", lim, 128000 / lim
  printf "informational: accel 1p step time over plain LibTorch with optimizer.zero_grad() = %.2f\n", a1 / z
  r1 = a1 / n; r2 = a2s / d2s; r3 = a2s / (2 * a1s); r4 = a2s / (128000 / lim); tl = a2tl / a2
  printf "targets: overhead_vs_libtorch_1proc <= 1.03 (%s), accel_vs_torch_ddp_2proc >= 1.5 (%s), scaling_2proc >= 0.75 (%s), accel_vs_limit_2proc >= 0.8 (%s), timeline_overhead_2proc <= 1.02 (%s)\n", \
    (r1 <= 1.03) ? "met" : "missed", (r2 >= 1.5) ? "met" : "missed", (r3 >= 0.75) ? "met" : "missed", \
    (r4 >= 0.8) ? "met" : "missed", (tl <= 1.02) ? "met" : "missed"
  printf "timeline: timeline_overhead_2proc=%.3f; informational: accel 2p step through Gloo over through shared memory = %.2f, with bf16 gradient compression over without = %.2f\n", tl, a2g / a2, a2b / a2
  if (ENVIRON["CHECKPOINT_LINES"] != "") print ENVIRON["CHECKPOINT_LINES"]
  print ENVIRON["EAGER_LINE"]
  print ENVIRON["ZERO_LINE"]
  printf "train: overhead_vs_libtorch_1proc=%.2f accel_vs_torch_ddp_2proc=%.2f scaling_2proc=%.2f accel_vs_limit_2proc=%.2f\n", r1, r2, r3, r4
}'
