#!/usr/bin/env bash
# Hybrid sharding against full sharding across machines (run by `./dev bench hybrid`; needs root and `ip netns`
# and `tc`): two nodes of 2 processes, each in a network namespace of its own, joined by a veth pair whose two
# ends are shaped to HYBRID_RATE (default 1gbit, tc's tbf; the bandwidth of a link between machines, whose
# latency this machine's kernel cannot add: no netem); within a node the processes reduce through shared
# memory. The training benchmark's MLP
# 784-1024-1024-10 as an eager torch module through the Python package (bench/train_torch_sharded.py; AdamW,
# batch 64 per process, each Linear a unit, forward and BACKWARD_PRE prefetch) under Accelerate's
# FullyShardedDataParallelPlugin with NO_SHARD (data parallelism), FULL_SHARD and HYBRID_SHARD, interleaved,
# HYBRID_ROUNDS rounds (default 3) of HYBRID_STEPS steps (default 30), medians of rank 0's median step:
#   hybrid-shard: rate=R no_shard_ms=A full_shard_ms=B hybrid_shard_ms=C hybrid_vs_full=C/B
#     hybrid_vs_no_shard=C/A
# FULL_SHARD sends every unit's all-gathers and reduce-scatters between the machines, HYBRID_SHARD only each
# shard's gradient sum (as NO_SHARD sends the gradients' sums).
#   bench/run_hybrid.sh BIN_DIR        BIN_DIR holds accel (build/bin); the library is BIN_DIR/../lib/libaccel.so
set -euo pipefail
BIN=${1:?usage: bench/run_hybrid.sh BIN_DIR}
PYTHON=${PYTHON:-/usr/bin/python3}
RATE=${HYBRID_RATE:-1gbit}
ROUNDS=${HYBRID_ROUNDS:-3}
STEPS=${HYBRID_STEPS:-30}
# shellcheck source=bench/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" != 0 ] || ! command -v tc >/dev/null; then
  echo "hybrid-shard: skipped: needs root, ip netns and tc" >&2
  exit 0
fi
export ACCEL_LIBRARY
ACCEL_LIBRARY=$(cd "$BIN/../lib" && pwd)/libaccel.so
DIR=$(mktemp -d)
tag=$(($$ % 100000))  # interface names have at most 15 characters
NS0=accel-hyb-$tag-0 NS1=accel-hyb-$tag-1 IF0=hy${tag}a IF1=hy${tag}b
cleanup() {
  ip netns del "$NS0" 2>/dev/null || true
  ip netns del "$NS1" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
ip netns add "$NS0"
ip netns add "$NS1"
ip link add "$IF0" type veth peer name "$IF1"
ip link set "$IF0" netns "$NS0"
ip link set "$IF1" netns "$NS1"
ip -n "$NS0" addr add 10.201.0.1/24 dev "$IF0"
ip -n "$NS1" addr add 10.201.0.2/24 dev "$IF1"
for side in "$NS0 $IF0" "$NS1 $IF1"; do
  read -r ns interface <<<"$side"
  ip -n "$ns" link set lo up
  ip -n "$ns" link set "$interface" up
  ip netns exec "$ns" tc qdisc add dev "$interface" root tbf rate "$RATE" burst 256kb latency 100ms
done
echo "hybrid-shard: $(machine_line); 2 nodes of 2 processes, link $RATE each way"

# One job of both nodes under STRATEGY; prints rank 0's result line.
run() {
  local strategy=$1 rc0=0 rc1=0 first
  for node in 0 1; do
    local ns=$NS0 interface=$IF0
    [ "$node" = 1 ] && ns=$NS1 interface=$IF1
    ip netns exec "$ns" env GLOO_SOCKET_IFNAME="$interface" ZERO_STRATEGY="$strategy" ACCEL_TIMEOUT_S=120 \
      timeout 600 "$BIN/accel" launch --cpu --nnodes 2 --node-rank "$node" --nproc-per-node 2 \
      --master-addr 10.201.0.1 --master-port 29500 -- \
      "$PYTHON" "$HERE/train_torch_sharded.py" 3 "$STEPS" 784 1024 1 10 >"$DIR/$strategy.node$node.log" 2>&1 &
    [ "$node" = 0 ] && first=$!
  done
  wait "$first" || rc0=$?
  wait || rc1=$?
  if [ "$rc0" != 0 ] || [ "$rc1" != 0 ]; then
    echo "hybrid-shard: $strategy failed" >&2
    cat "$DIR/$strategy.node0.log" "$DIR/$strategy.node1.log" >&2
    exit 1
  fi
  grep "^accel-torch " "$DIR/$strategy.node0.log"
}

declare -A times
for round in $(seq 1 "$ROUNDS"); do
  for strategy in NO_SHARD FULL_SHARD HYBRID_SHARD; do
    line=$(run "$strategy")
    result "$strategy" "$line"
    echo "hybrid-shard-run: round=$round strategy=$strategy step_ms=$(value "$line" step_ms)"
    times[$strategy]="${times[$strategy]:-} $(value "$line" step_ms)"
  done
done
no_shard=$(median_of "${times[NO_SHARD]}")
full=$(median_of "${times[FULL_SHARD]}")
hybrid=$(median_of "${times[HYBRID_SHARD]}")
echo "hybrid-shard: rate=$RATE no_shard_ms=$no_shard full_shard_ms=$full hybrid_shard_ms=$hybrid" \
  "hybrid_vs_full=$(ratio "$hybrid" "$full")" \
  "hybrid_vs_no_shard=$(ratio "$hybrid" "$no_shard")"
