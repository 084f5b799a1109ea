# Sourced by the tests that start a job of 2 nodes of 2 ranks, each node by its own `accel launch --nnodes 2
# --node-rank R`. The caller sets CLI (the accel program), DIR (where the logs go) and PYTHON; optionally
# PREFIX0 / PREFIX1 (arrays: what runs node 0's / node 1's launcher, a network namespace), ADDR (the master
# address, loopback by default), FIXED_PORT (else a free one), TIMEOUT_S (ACCEL_TIMEOUT_S, 60 by default).

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

PREFIX0=() PREFIX1=() ADDR=127.0.0.1
# Node R's launcher: run_node R PORT LOG ARGS...
run_node() {
  local node=$1 port=$2 log=$3 prefix
  shift 3
  if [ "$node" = 0 ]; then prefix=("${PREFIX0[@]}"); else prefix=("${PREFIX1[@]}"); fi
  ACCEL_TIMEOUT_S=${TIMEOUT_S:-60} timeout 200 "${prefix[@]}" "$CLI" launch --cpu --nnodes 2 --node-rank "$node" \
    --nproc-per-node 2 --master-addr "$ADDR" --master-port "$port" -- "$@" >"$log" 2>&1
}
# Both nodes of one job, their logs $DIR/NAME.node0.log and .node1.log; fails when either launcher does (their
# output is shown then).
run_job() {  # run_job NAME ARGS...
  local name=$1 port rc0=0 rc1=0
  shift
  port=${FIXED_PORT:-$(free_port)}
  run_node 0 "$port" "$DIR/$name.node0.log" "$@" &
  local first=$!
  run_node 1 "$port" "$DIR/$name.node1.log" "$@" || rc1=$?
  wait "$first" || rc0=$?
  if [ "$rc0" != 0 ] || [ "$rc1" != 0 ]; then
    echo "$(basename "$0"): $name failed (node 0: $rc0, node 1: $rc1)" >&2
    cat "$DIR/$name.node0.log" "$DIR/$name.node1.log" >&2
    return 1
  fi
}
