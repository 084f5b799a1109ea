#!/usr/bin/env bash
# The GPU training benchmark, run by `./dev bench gpu` (never by ctest: timings are not tests).
#   bench/run_gpu.sh BIN_DIR MODEL_DIR   BIN_DIR holds train_accel and train_libtorch (build/bin);
#                                        MODEL_DIR receives gpu_mlp.pt (build/bench)
# accel's training step on one GPU against the same loop on plain LibTorch C++, in eager PyTorch and in
# Hugging Face Accelerate. Every side: examples/make_mlp.py's MLP 784-1024-1024-10 (the C and C++ sides
# load the TorchScript file; the Python sides build the same nn.Module and load its weights), batch 64, SGD
# lr 0.01, cross-entropy, the same 4 synthetic batches (xorshift64*, bench/train_accel.c), copied to the
# GPU once before the first step (no side copies from the host while timed), on cuda:0.
#   libtorch        bench/train_libtorch.cpp with set_to_none cuda [bf16]: the like-for-like baseline of R1
#   accel           bench/train_accel.c (C API only); the state picks cuda:0, ACCEL_MIXED_PRECISION sets
#                   the precision
#   accel graph     bench/train_accel.c graph: the step as one accel_train_step_run with cuda_graph on,
#                   captured as one CUDA graph after 3 warm-up steps and replayed (accel/train_step.h)
#   torch eager     bench/train_torch_gpu.py eager
#   hf accelerate   bench/train_torch_gpu.py accelerate (Accelerator(mixed_precision=...))
#   hf compiled     bench/train_torch_gpu.py compiled: Accelerate with TorchDynamoPlugin(backend="inductor",
#                   mode="reduce-overhead"), torch.compile's CUDA graphs: what Accelerate users reach for
#                   when the eager step is bound by launching kernels (compiled in the side's start-up)
# at two precisions: fp32, and bf16 (autocast on the forward: accel's mixed_precision=bf16, LibTorch's
# at::autocast, torch.autocast, Accelerator(mixed_precision="bf16")). The Python sides run in the python3
# on PATH when it imports torch, else /usr/bin/python3; each is "n/a" when that Python lacks torch with
# CUDA (eager), accelerate as well (Accelerate), or torch.compile with a CUDA device (compiled).
# Each side and precision has a process of its own, started with the others and warmed up before the
# first round; then GPU_BENCH_ROUNDS rounds (default 5, at least 3) of: for fp32 then bf16, libtorch,
# accel, eager, Accelerate, one at a time. A round of a side is GPU_BENCH_WARMUP steps (50), then
# GPU_BENCH_STEPS timed steps (500), waiting for the GPU at both ends by reading the loss. The whole run took
# 55 s on an H200. Medians compared, per precision:
#   R1 overhead_vs_libtorch    accel's step time over plain LibTorch's      target <= 1.03
#   R2 accel_vs_hf_accelerate  Accelerate's step time over accel's          target >= 1.3
#                              (accel's throughput over Accelerate's)
#   R3 accel_vs_torch_eager    eager PyTorch's step time over accel's       information
#   G  graph_vs_libtorch       the captured step's time over plain LibTorch's   target <= 0.5
#   C  graph_vs_hf_compiled    compiled Accelerate's step time over the captured step's  target >= 1.3
# The last three lines (the last one is fp32's, the headline):
#   gpu fp32: overhead_vs_libtorch=R1 accel_vs_hf_accelerate=R2 accel_vs_torch_eager=R3 graph_vs_libtorch=G graph_vs_hf_compiled=C
#   gpu bf16: (the same for bf16)
#   gpu: (fp32's again)
# Without a CUDA device (accel's state picks the CPU) it says so and exits 77, automake's and ctest's
# "skipped", so that nothing takes its silence for a result. GPU_BENCH_DEVICE=cpu runs the same sides on the
# CPU with few steps (defaults 10 after 2, GPU_BENCH_STEPS and GPU_BENCH_WARMUP still apply): a check of
# this script's plumbing on a machine without a GPU, whose ratios say nothing about GPUs.
set -euo pipefail
BIN=${1:?usage: bench/run_gpu.sh BIN_DIR MODEL_DIR}
MODEL_DIR=${2:?usage: bench/run_gpu.sh BIN_DIR MODEL_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
DEVICE=${GPU_BENCH_DEVICE:-cuda}
case "$DEVICE" in
  cuda) default_steps=500 default_warmup=50 ;;
  cpu) default_steps=10 default_warmup=2 ;;
  *) echo "GPU_BENCH_DEVICE must be cuda or cpu" >&2; exit 2 ;;
esac
ROUNDS=${GPU_BENCH_ROUNDS:-5}
STEPS=${GPU_BENCH_STEPS:-$default_steps}
WARMUP=${GPU_BENCH_WARMUP:-$default_warmup}
RUN_TIMEOUT=120  # seconds; a side silent this long fails the benchmark instead of stalling it

# shellcheck source=bench/common.sh
source "$HERE/common.sh"
check_counts GPU_BENCH 3
# Accelerate reads ACCELERATE_* as common.sh's ACCEL_* would be read: its settings come from the script.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^ACCELERATE_' || true)

# The GPU machine's torch (and Accelerate) live in the python3 on PATH; Debian's is /usr/bin/python3.
PYTHON=/usr/bin/python3
if command -v python3 > /dev/null && python3 -c 'import torch' 2> /dev/null; then PYTHON=$(command -v python3); fi
# A file of its own: the PATH's torch may be newer than the one that wrote run_train.sh's train_mlp.pt.
MODEL=$MODEL_DIR/gpu_mlp.pt
make_model "$PYTHON" "$MODEL" > /dev/null

if [ "$DEVICE" = cuda ]; then
  probe=$(timeout "$RUN_TIMEOUT" "$BIN/train_accel" "$MODEL" 1 1 2> /dev/null | grep '^accel ' || true)
  if [[ "$(value "$probe" device)" != cuda* ]]; then
    env_line() { "$BIN/accel" env 2> /dev/null | sed -n "s/^- $1: //p"; }
    echo "no CUDA device: the GPU benchmark needs one (accel's state picked '$(value "$probe" device)'; LibTorch" \
      "$(env_line "LibTorch version"), features: $(env_line features)). GPU_BENCH_DEVICE=cpu checks this script on the CPU." >&2
    exit 77
  fi
  lt_flags=(cuda) py_flags=() accel_env=()
  gpu=$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2> /dev/null | head -1 || true)
else
  lt_flags=() py_flags=(--cpu) accel_env=(ACCEL_USE_CPU=1)
  gpu="none used (GPU_BENCH_DEVICE=cpu: a check of the plumbing, not a GPU measurement)"
fi
# One look at the Python sides: whether its torch sees the device, whether Accelerate is there.
read -r has_eager has_accelerate has_compiled < <("$PYTHON" -c '
import importlib.util, sys, torch
eager = sys.argv[1] == "cpu" or torch.cuda.is_available()
accelerate = eager and importlib.util.find_spec("accelerate") is not None
print(int(eager), int(accelerate), int(accelerate and hasattr(torch, "compile") and torch.cuda.is_available()))' "$DEVICE" 2> /dev/null || echo "0 0 0")
available() { [ "$1" = 1 ] && echo yes || echo "n/a ($2)"; }
sides=(libtorch accel graph)
if [ "$has_eager" = 1 ]; then sides+=(eager); fi
if [ "$has_accelerate" = 1 ]; then sides+=(accelerate); fi
if [ "$has_compiled" = 1 ]; then sides+=(compiled); fi

echo "GPU training benchmark: MLP 784-1024-1024-10, batch 64, SGD lr 0.01, cross-entropy, synthetic batches resident on the device"
echo "machine: $(machine_line); GPU: ${gpu:-unknown}"
echo "python: $PYTHON, torch $("$PYTHON" -c 'import torch; print(torch.__version__)' 2> /dev/null);" \
  "torch eager: $(available "$has_eager" "no torch with CUDA"); hf accelerate: $(available "$has_accelerate" "no accelerate");" \
  "hf compiled: $(available "$has_compiled" "no torch.compile on CUDA")"
echo "steps timed: $STEPS after $WARMUP warm-up steps, a process per side and precision; $ROUNDS rounds of: fp32 then bf16, each ${sides[*]}; medians compared"

# Every side's process (one per side and precision) starts at once and warms up; then the rounds go round
# the sides, one at a time: a round is a line sent to the side's process (its "serve" mode), answered by its
# result line. So no round waits for a process to start (a CUDA process takes seconds, which would not fit
# the benchmark's minute and a half), and the sides still take turns, round after round. The waiting
# processes are blocked on their input: their GPU contexts hold memory and no work.
FIFOS=$(mktemp -d)
declare -A to from pid times
stop_sides() {
  local key fd
  for key in "${!to[@]}"; do fd=${to[$key]}; exec {fd}>&-; done  # end of input: each process exits
  for key in "${!pid[@]}"; do wait "${pid[$key]}" 2> /dev/null || true; done
  to=() pid=()
}
kill_sides() {
  local key
  for key in "${!pid[@]}"; do kill "${pid[$key]}" 2> /dev/null || true; done
  rm -rf "$FIFOS"
}
trap kill_sides EXIT

# start KEY COMMAND...: starts a side's process, its standard input and output through FIFOs.
start() {
  local key=$1 w r
  shift
  mkfifo "$FIFOS/$key.in" "$FIFOS/$key.out"
  "$@" < "$FIFOS/$key.in" > "$FIFOS/$key.out" &
  pid[$key]=$!
  # Opened in the order the process opens them, each open waiting for the other end.
  exec {w}> "$FIFOS/$key.in" {r}< "$FIFOS/$key.out"
  to[$key]=$w from[$key]=$r
}
# answer KEY: the next "ready" or result line of KEY's process (other lines are passed over); fails when
# it ends or stays silent for RUN_TIMEOUT.
answer() {
  local line
  while IFS= read -r -t "$RUN_TIMEOUT" line <&"${from[$1]}"; do
    case "$line" in ready | libtorch\ * | accel\ * | torch_eager\ * | hf_accelerate\ * | hf_compiled\ *) echo "$line"; return 0 ;; esac
  done
  echo "$(basename "$0"): the $1 side ended or stayed silent for ${RUN_TIMEOUT}s" >&2
  return 1
}
# accel's and Accelerate's name of the precision: "no" mixed precision is fp32.
precision_of() { [ "$1" = bf16 ] && echo bf16 || echo no; }

for label in fp32 bf16; do
  lt_bf16=() py_bf16=()
  if [ "$label" = bf16 ]; then lt_bf16=(bf16) py_bf16=(--bf16); fi
  start "libtorch.$label" "$BIN/train_libtorch" "$MODEL" "$STEPS" "$WARMUP" set_to_none serve \
    ${lt_flags[@]+"${lt_flags[@]}"} ${lt_bf16[@]+"${lt_bf16[@]}"}
  start "accel.$label" env ${accel_env[@]+"${accel_env[@]}"} ACCEL_MIXED_PRECISION="$(precision_of "$label")" \
    "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" serve
  start "graph.$label" env ${accel_env[@]+"${accel_env[@]}"} ACCEL_MIXED_PRECISION="$(precision_of "$label")" \
    "$BIN/train_accel" "$MODEL" "$STEPS" "$WARMUP" serve graph
  for name in "${sides[@]:3}"; do
    start "$name.$label" "$PYTHON" "$HERE/train_torch_gpu.py" "$name" "$MODEL" "$STEPS" "$WARMUP" --serve \
      ${py_flags[@]+"${py_flags[@]}"} ${py_bf16[@]+"${py_bf16[@]}"}
  done
done
for key in "${!pid[@]}"; do
  [ "$(answer "$key")" = ready ] || exit 1
done

losses=()
for round in $(seq 1 "$ROUNDS"); do
  for label in fp32 bf16; do
    for name in "${sides[@]}"; do
      echo go >&"${to[$name.$label]}"
      line=$(answer "$name.$label") || exit 1
      result "$name $label" "$line"
      device=$(value "$line" device) precision=$(value "$line" precision)
      if [[ "$device" != "$DEVICE"* ]] || [ "$precision" != "$(precision_of "$label")" ]; then
        echo "$(basename "$0"): $name ran on '$device' at mixed precision '$precision', not $DEVICE at $label" >&2
        exit 1
      fi
      echo "round $round: $line"
      times[$name.$label]+=" $(value "$line" step_ms)"
      # Every side has taken the same steps by the last round.
      [ "$round" != "$ROUNDS" ] || losses+=("$label $(value "$line" first_loss) $(value "$line" last_loss)")
    done
  done
done
stop_sides

# bf16 rounds the weights' copies, so its sides agree more loosely than fp32's would.
printf '%s\n' "${losses[@]}" | check_losses 1e-3

# medians LABEL: "libtorch accel graph eager accelerate compiled" median step times in ms, "n/a" for a side
# not run.
medians() {
  local name out=()
  for name in libtorch accel graph eager accelerate compiled; do
    if [ -n "${times[$name.$1]:-}" ]; then out+=("$(median_of "${times[$name.$1]}")"); else out+=(n/a); fi
  done
  echo "${out[@]}"
}
read -r lt_no a_no g_no e_no h_no c_no <<<"$(medians fp32)"
read -r lt_bf a_bf g_bf e_bf h_bf c_bf <<<"$(medians bf16)"
awk -v fp32="$lt_no $a_no $g_no $e_no $h_no $c_no" -v bf16="$lt_bf $a_bf $g_bf $e_bf $h_bf $c_bf" '
  function ms(v) { return v == "n/a" ? "n/a" : sprintf("%.3f ms/step", v) }
  function ratio(num, den) { return num == "n/a" || den == "n/a" ? "n/a" : sprintf("%.2f", num / den) }
  function target(r, ok) { return r == "n/a" ? "n/a" : (ok ? "met" : "missed") }
  # label, then the medians "libtorch accel graph eager accelerate compiled"
  function report(label, medians,   m) {
    split(medians, m, " ")
    printf "median %s: libtorch %s, accel %s, accel graph %s, torch eager %s, hf accelerate %s, hf compiled %s\n", label,
      ms(m[1]), ms(m[2]), ms(m[3]), ms(m[4]), ms(m[5]), ms(m[6])
    r1[label] = sprintf("%.3f", m[2] / m[1]); r2[label] = ratio(m[5], m[2]); r3[label] = ratio(m[4], m[2])
    g[label] = ratio(m[3], m[1]); c[label] = ratio(m[6], m[3])
    printf "targets %s: overhead_vs_libtorch <= 1.03 (%s), accel_vs_hf_accelerate >= 1.3 (%s), graph_vs_libtorch <= 0.5 (%s), graph_vs_hf_compiled >= 1.3 (%s)\n",
      label, target(r1[label], r1[label] <= 1.03), target(r2[label], r2[label] >= 1.3), target(g[label], g[label] <= 0.5),
      target(c[label], c[label] >= 1.3)
  }
  function line(prefix, label) {
    printf "%s overhead_vs_libtorch=%s accel_vs_hf_accelerate=%s accel_vs_torch_eager=%s graph_vs_libtorch=%s graph_vs_hf_compiled=%s\n",
      prefix, r1[label], r2[label], r3[label], g[label], c[label]
  }
  BEGIN {
    report("fp32", fp32)
    report("bf16", bf16)
    line("gpu fp32:", "fp32"); line("gpu bf16:", "bf16"); line("gpu:", "fp32")
  }'
