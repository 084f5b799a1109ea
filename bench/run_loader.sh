#!/usr/bin/env bash
# The loader benchmark, run by `./dev bench loader` (never by ctest: timings are not tests).
#   bench/run_loader.sh BIN_DIR     BIN_DIR holds loader_bench (build/bin)
# One process, one thread each: accel's prepared loader (bench/loader_bench.c, C API only) against
# torch.utils.data.DataLoader over a TensorDataset in Debian's Python torch (bench/loader_torch.py), and
# a plain memcpy of the same bytes. 60000 x 784 float32 + int64 labels, batch 64, shuffle on. The sides
# run alternately (accel, torch, memcpy, accel, ...) LOADER_BENCH_ROUNDS times (default 5, at least 3);
# the medians are compared. Every side is pinned to the same CPU (LOADER_BENCH_CPU, default 0): on the
# 2-vCPU development VM the two vCPUs were seen to differ up to 2x in memory speed, which would otherwise
# decide the result. The last line:
#   loader: accel_vs_torch_dataloader=R1 vs_memcpy=R2 vs_row_gather=R3
# R1 = accel batches/s over torch's; R2 = accel bytes/s over plain memcpy's, bytes being those of the rows
# delivered (784 * 4 + 8 a row; 64 rows a batch, the epoch's last batch 32), the same for both sides;
# R3 = accel bytes/s over a hand-written memcpy gather of the same shuffled rows into batches, the fastest
# way to do what a shuffling loader does. Both run on the calling thread (the accel loader with its default
# prefetch_threads=0), so neither side prefetches. Targets: R1 >= 10, R2 >= 0.5, R3 >= 0.9.
set -euo pipefail
BIN=${1:?usage: bench/run_loader.sh BIN_DIR}
HERE=$(cd "$(dirname "$0")" && pwd)
ROUNDS=${LOADER_BENCH_ROUNDS:-5}
CPU=${LOADER_BENCH_CPU:-0}
[ "$ROUNDS" -ge 3 ] || { echo "LOADER_BENCH_ROUNDS must be at least 3" >&2; exit 2; }
ACCEL_EPOCHS=10   # after 1 warm-up epoch
MEMCPY_EPOCHS=10  # after 1 warm-up epoch
TORCH_EPOCHS=2    # after 100 warm-up batches; torch is slow

# shellcheck source=bench/common.sh
source "$HERE/common.sh"

echo "loader benchmark: 60000 x 784 float32 + int64 labels, batch 64, shuffle on, one process"
echo "threads: OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 for every side, torch.set_num_threads(1); DataLoader num_workers=0"
echo "machine: $(machine_line); every side pinned to CPU $CPU"
echo "epochs timed: accel $ACCEL_EPOCHS, torch $TORCH_EPOCHS, memcpy $MEMCPY_EPOCHS (after a warm-up); $ROUNDS rounds, medians compared"

accel_bps=() accel_bytes=() torch_bps=() memcpy_bytes=() gather_bytes=()
for round in $(seq 1 "$ROUNDS"); do
  line=$(taskset -c "$CPU" "$BIN/loader_bench" accel "$ACCEL_EPOCHS" 1)
  echo "round $round: $line"
  accel_bps+=("$(value "$line" batches_per_s)") accel_bytes+=("$(value "$line" bytes_per_s)")
  line=$(taskset -c "$CPU" /usr/bin/python3 "$HERE/loader_torch.py" "$TORCH_EPOCHS" 100)
  echo "round $round: $line"
  torch_bps+=("$(value "$line" batches_per_s)")
  line=$(taskset -c "$CPU" "$BIN/loader_bench" memcpy "$MEMCPY_EPOCHS" 1)
  echo "round $round: $line"
  memcpy_bytes+=("$(value "$line" bytes_per_s)") gather_bytes+=("$(value "$line" gather_bytes_per_s)")
done

a_bps=$(median "${accel_bps[@]}") a_bytes=$(median "${accel_bytes[@]}") t_bps=$(median "${torch_bps[@]}")
m_bytes=$(median "${memcpy_bytes[@]}") g_bytes=$(median "${gather_bytes[@]}")
awk -v a="$a_bps" -v ab="$a_bytes" -v t="$t_bps" -v m="$m_bytes" -v g="$g_bytes" 'BEGIN {
  printf "median accel:  %.1f batches/s, %.3g bytes/s\n", a, ab
  printf "median torch:  %.1f batches/s (DataLoader over TensorDataset)\n", t
  printf "median memcpy: %.3g bytes/s contiguous, %.3g bytes/s gathering the shuffled rows into batches\n", m, g
  printf "targets: accel_vs_torch_dataloader >= 10 (%s), vs_memcpy >= 0.5 (%s), vs_row_gather >= 0.9 (%s)\n", \
    (a / t >= 10) ? "met" : "missed", (ab / m >= 0.5) ? "met" : "missed", (ab / g >= 0.9) ? "met" : "missed"
  printf "loader: accel_vs_torch_dataloader=%.2f vs_memcpy=%.2f vs_row_gather=%.2f\n", a / t, ab / m, ab / g
}'
