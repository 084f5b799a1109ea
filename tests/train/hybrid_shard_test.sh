#!/usr/bin/env bash
# Hybrid sharding across nodes: 2 nodes of 2 ranks on this host, each node started by its own `accel launch
# --nnodes 2 --node-rank R` over loopback.
#   hybrid_shard_test.sh CLI WORKER [LIBRARY]
# Runs hybrid_shard_worker (its tests say what they check); then the same job with Gloo within the nodes (no
# shared memory), whose ring orders each element's sum by its place, so that the worker compares within
# rounding there; and a job whose rank 3 exits before a step. With LIBRARY (libaccel.so, for the Python package), an eager nn.Module trained by Accelerate's
# FullyShardedDataParallelPlugin with HYBRID_SHARD and HYBRID_SHARD_ZERO2 ends with the weights of data
# parallelism on the same 4 processes, bit for bit (zero_identity.py, 3 optimizers).
set -euo pipefail
CLI=${1:?usage: hybrid_shard_test.sh CLI WORKER [LIBRARY]}
WORKER=${2:?usage: hybrid_shard_test.sh CLI WORKER [LIBRARY]}
LIBRARY=${3:-}
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PYTHON=/usr/bin/python3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT

. "$HERE/../support/two_nodes.sh"

run_and_say() {  # run_and_say NAME ARGS...: run_job, then what node 0's tests said
  run_job "$@"
  echo "hybrid_shard_test.sh: $1: $(grep -h "PASSED\|: ok$" "$DIR/$1.node0.log" | sort -u | tr '\n' ' ')"
}

run_and_say shared-memory "$WORKER"
ACCEL_INTRA_NODE_TRANSPORT=gloo run_and_say gloo "$WORKER"

# Rank 3 exits before a step (HybridShard.ALostRankFailsEveryOther): node 1's launcher fails naming it (and stops
# rank 2, as launchers do), and node 0's ranks' tests pass (they failed as they should).
port=$(free_port)
HYBRID_FAILURE=1 run_node 0 "$port" "$DIR/lost.node0.log" "$WORKER" --gtest_filter='*ALostRank*' &
first=$!
lost1=0
HYBRID_FAILURE=1 run_node 1 "$port" "$DIR/lost.node1.log" "$WORKER" --gtest_filter='*ALostRank*' || lost1=$?
lost0=0
wait "$first" || lost0=$?
passed=$(grep -c "^\[  PASSED  \] 1 test" "$DIR/lost.node0.log" || true)
if [ "$lost0" != 0 ] || [ "$lost1" = 0 ] || [ "$passed" != 2 ] || ! grep -q "rank 3 .*exit code 3" "$DIR/lost.node1.log"; then
  echo "hybrid_shard_test.sh: a lost rank: node 0 $lost0, node 1 $lost1, $passed of node 0's ranks passed" >&2
  cat "$DIR/lost.node0.log" "$DIR/lost.node1.log" >&2
  exit 1
fi
echo "hybrid_shard_test.sh: a lost rank fails the others"

if [ -n "$LIBRARY" ]; then
  export ACCEL_LIBRARY=$LIBRARY PYTHONPATH=$ROOT/bindings/python${PYTHONPATH:+:$PYTHONPATH} PYTHONDONTWRITEBYTECODE=1
  for stage in 0 fsdp-hybrid fsdp-hybrid2; do
    run_and_say "python-$stage" "$PYTHON" "$ROOT/bindings/python/tests/accelerate_scripts/zero_identity.py" "$stage" 1 \
      "$DIR/$stage.pt"
  done
  "$PYTHON" - "$DIR" <<'PY'
import sys
import torch
runs = {stage: torch.load(f"{sys.argv[1]}/{stage}.pt") for stage in ("0", "fsdp-hybrid", "fsdp-hybrid2")}
for optimizer, whole in runs["0"].items():
    for stage in ("fsdp-hybrid", "fsdp-hybrid2"):
        weights = runs[stage][optimizer]["weights"]
        differing = [name for name in whole["weights"] if not torch.equal(whole["weights"][name], weights[name])]
        assert differing == [], (optimizer, stage, differing)
        # Split over a node's 2 processes: about half of the state (zero_identity's own bounds).
        ratio = runs[stage][optimizer]["optimizer_state_bytes"] / whole["optimizer_state_bytes"]
        assert 0.4 < ratio < 0.6, (optimizer, stage, ratio)
print(f"hybrid_shard_test.sh: HYBRID_SHARD and HYBRID_SHARD_ZERO2 give data parallelism's weights ({len(runs['0'])} optimizers)")
PY
fi
echo "hybrid_shard_test.sh: passed"
