#!/usr/bin/env bash
# The hierarchical all-reduce: 2 nodes of 2 ranks, each node started by its own `accel launch --nnodes 2
# --node-rank R`, reduce within the node through shared memory and between the nodes' leaders over Gloo.
#   hier_test.sh loopback CLI SHM_WORKER TRAINING_WORKER   both nodes on this host, over loopback
#   hier_test.sh netns CLI SHM_WORKER TRAINING_WORKER      each node in a network namespace of its own, joined
#                                                          by a veth pair (root and `ip netns`; exit 77 otherwise)
#   hier_test.sh failures CLI SHM_WORKER                   rank 3, then node 1's leader, SIGKILLed mid-job; rank 3
#                                                          asleep past the timeout
# loopback and netns: the seeded tensors of shm_worker reduce to what a flat Gloo all-reduce over the 4 ranks
# gives (within 1e-6 relative, norm-wise; maxima bit for bit), every rank says its backend is gloo+hier-shm,
# and the gold training test (data-parallel training equals one process with the global batch) passes.
# failures: node 0's ranks fail with ACCEL_ERR_PEER_FAILED well within the timeout (ACCEL_ERR_TIMEOUT after
# it, for the sleeper), their messages name the leaders, node 1's launcher names the killed rank, and no
# segment of the job is left in /dev/shm.
set -euo pipefail
MODE=${1:?usage: hier_test.sh loopback|netns|failures CLI SHM_WORKER [TRAINING_WORKER]}
CLI=${2:?usage: hier_test.sh MODE CLI SHM_WORKER [TRAINING_WORKER]}
WORKER=${3:?usage: hier_test.sh MODE CLI SHM_WORKER [TRAINING_WORKER]}
TRAINING=${4:-}
PYTHON=/usr/bin/python3
DIR=$(mktemp -d)
NETNS=()
VETH=""
cleanup() {
  [ -n "$VETH" ] && ip link del "$VETH" 2>/dev/null
  for ns in "${NETNS[@]}"; do ip netns del "$ns" 2>/dev/null; done
  rm -rf "$DIR"
}
trap cleanup EXIT

. "$(dirname "$0")/../support/two_nodes.sh"

compare_with_flat_gloo() {
  mkdir -p "$DIR/flat" "$DIR/hier"
  ACCEL_INTRA_NODE_TRANSPORT=gloo ACCEL_TIMEOUT_S=60 timeout 150 \
    "$CLI" launch --cpu --master-port "$(free_port)" --nproc-per-node 4 -- "$WORKER" reduce "$DIR/flat"
  run_job reduce "$WORKER" reduce "$DIR/hier"
  local backends
  backends=$(cat "$DIR/reduce.node0.log" "$DIR/reduce.node1.log" | grep -c "backend gloo+hier-shm$" || true)
  if [ "$backends" != 4 ]; then
    echo "hier_test.sh: expected 4 ranks on gloo+hier-shm, $backends said so:" >&2
    cat "$DIR/reduce.node0.log" "$DIR/reduce.node1.log" >&2
    return 1
  fi
  "$PYTHON" - "$DIR/flat" "$DIR/hier" <<'PY'
import sys
import numpy as np
flat, hier = sys.argv[1], sys.argv[2]
for name, dtype in [("float32_sum", np.float32), ("float64_sum", np.float64), ("float32_max", np.float32),
                    ("float16_sum", np.float16)]:
    a = np.fromfile(f"{flat}/{name}.bin", dtype=dtype)
    b = np.fromfile(f"{hier}/{name}.bin", dtype=dtype)
    assert a.size == b.size and a.size > 0, (name, a.size, b.size)
    if name.endswith("_max"):
        assert a.tobytes() == b.tobytes(), name
        print(f"{name}: bit-identical ({a.size} elements)")
        continue
    wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
    tolerance = 1e-6 if dtype != np.float16 else 1e-3
    # Norm-wise: an element whose summands cancel out has no meaningful relative error of its own.
    relative = np.linalg.norm(wide_a - wide_b) / np.linalg.norm(wide_a)
    print(f"{name}: relative difference to flat Gloo {relative:.3g} (at most {tolerance})")
    assert relative <= tolerance, name
PY
}

gold_training() {
  run_job gold "$TRAINING" --gtest_filter='Ddp.TwoProcessesEqualOneProcess*'
  grep -h "PASSED\|FAILED" "$DIR/gold.node0.log" "$DIR/gold.node1.log"
}

case "$MODE" in
  loopback)
    compare_with_flat_gloo
    gold_training
    ;;
  netns)
    if [ "$(id -u)" != 0 ]; then
      echo "hier_test.sh: skipped: making network namespaces needs root"
      exit 77
    fi
    tag=$(($$ % 100000))  # interface names have at most 15 characters
    NS0=accel-hier-$tag-0 NS1=accel-hier-$tag-1 IF0=ah${tag}a IF1=ah${tag}b
    if ! ip netns add "$NS0" 2>"$DIR/netns.err"; then
      echo "hier_test.sh: skipped: ip netns is not permitted here: $(cat "$DIR/netns.err")"
      exit 77
    fi
    NETNS=("$NS0")
    ip netns add "$NS1"
    NETNS+=("$NS1")
    VETH=$IF0
    ip link add "$IF0" type veth peer name "$IF1"
    ip link set "$IF0" netns "$NS0"
    ip link set "$IF1" netns "$NS1"
    VETH=""  # the pair now goes with the namespaces
    ip -n "$NS0" addr add 10.200.0.1/24 dev "$IF0"
    ip -n "$NS1" addr add 10.200.0.2/24 dev "$IF1"
    ip -n "$NS0" link set lo up
    ip -n "$NS1" link set lo up
    ip -n "$NS0" link set "$IF0" up
    ip -n "$NS1" link set "$IF1" up
    # Gloo binds the veth end: the host name resolves to an address that the namespaces do not have.
    PREFIX0=(ip netns exec "$NS0" env "GLOO_SOCKET_IFNAME=$IF0")
    PREFIX1=(ip netns exec "$NS1" env "GLOO_SOCKET_IFNAME=$IF1")
    ADDR=10.200.0.1
    FIXED_PORT=29500  # node 0's namespace is new: nothing else listens there
    echo "hier_test.sh: node 0 in $NS0 (10.200.0.1), node 1 in $NS1 (10.200.0.2)"
    compare_with_flat_gloo
    gold_training
    ;;
  failures)
    # Without the shape check's Gloo all-gather, which would see the failure first: it must come through
    # the leaders' all-reduce and each node's segment.
    export ACCEL_CHECK_SHAPES=0
    failed=0
    # expect_failure VICTIM HAPPENED CODE LAUNCHER_SAYS WORKER_ARGS...: node 0's ranks fail with CODE, naming
    # the leaders, within 20 s (their own launcher ends then); node 1's launcher says LAUNCHER_SAYS (if any).
    expect_failure() {
      local victim=$1 happened=$2 code=$3 says=$4 port rc0=0 rc1=0 started elapsed first second left
      shift 4
      port=$(free_port)
      started=$SECONDS
      run_node 0 "$port" "$DIR/fail.node0.log" "$WORKER" "$@" &
      first=$!
      run_node 1 "$port" "$DIR/fail.node1.log" "$WORKER" "$@" &
      second=$!
      wait "$first" || rc0=$?
      elapsed=$((SECONDS - started))
      wait "$second" || rc1=$?
      cat "$DIR/fail.node0.log" "$DIR/fail.node1.log"
      for rank in 0 1; do
        if ! grep -q "^rank $rank after rank $victim $happened: $code.*leaders (ranks 0, 2)" "$DIR/fail.node0.log"; then
          echo "hier_test.sh: rank $rank did not fail with $code naming the leaders" >&2
          failed=1
        fi
      done
      if [ "$rc0" != 0 ]; then echo "hier_test.sh: node 0's launcher exited with $rc0" >&2; failed=1; fi
      if [ -n "$says" ] && { [ "$rc1" = 0 ] || ! grep -q "$says" "$DIR/fail.node1.log"; }; then
        echo "hier_test.sh: node 1's launcher did not say '$says' (exit $rc1)" >&2
        failed=1
      fi
      if [ "$elapsed" -ge 20 ]; then echo "hier_test.sh: node 0 took $elapsed s to fail" >&2; failed=1; fi
      left=$(find /dev/shm -maxdepth 1 -name "accel-$port-*" 2>/dev/null)
      if [ -n "$left" ]; then echo "hier_test.sh: segments left in /dev/shm: $left" >&2; failed=1; fi
      echo "hier_test.sh: rank $victim $happened: node 0 failed within $elapsed s; no segment left for port $port"
    }
    # Rank 3, then node 1's leader, SIGKILLed (timeout 60 s): node 0 hears it from the leaders' Gloo at once.
    TIMEOUT_S=60 expect_failure 3 "was killed" ACCEL_ERR_PEER_FAILED "rank 3 (.*) was killed by signal 9" kill 3
    TIMEOUT_S=60 expect_failure 2 "was killed" ACCEL_ERR_PEER_FAILED "rank 2 (.*) was killed by signal 9" kill 2
    # Rank 3 asleep past the 4 s timeout: node 0's leader times out in Gloo and its node with it.
    TIMEOUT_S=4 expect_failure 3 stalled ACCEL_ERR_TIMEOUT "" stall 3 25
    exit "$failed"
    ;;
  *)
    echo "hier_test.sh: unknown mode $MODE" >&2
    exit 2
    ;;
esac
