#!/usr/bin/env bash
# Tests of `accel launch`: the rank environment, failure handling, signal forwarding, usage errors.
# Usage: launch_test.sh ACCEL_BIN
# The rank scripts are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016
set -euo pipefail

if [[ $# -ne 1 || ! -x $1 ]]; then
  echo "usage: $0 ACCEL_BIN" >&2
  exit 2
fi
ACCEL=$1

WORK=$(mktemp -d)
# Every process a test starts carries this id in its command line, so leftovers can be found.
ID="$$${RANDOM}${RANDOM}${RANDOM}"
MARKER="accel-launch-test-$ID"

# Keeps one failing check from leaving processes to the next ones, or behind the script.
cleanup_processes() {
  local pids
  pids=$(pgrep -f "$ID" || true)
  # shellcheck disable=SC2086
  [[ -z $pids ]] || kill -KILL $pids 2>/dev/null || true
}

cleanup() {
  cleanup_processes
  rm -rf "$WORK"
}
trap cleanup EXIT

# shellcheck source=tests/cli/check.sh
source "$(dirname "$0")/check.sh"

now_ms() { date +%s%3N; }

# SIGKILLed processes vanish a moment after kill() returns, so allow them a little time.
no_leftovers() {
  for _ in $(seq 20); do
    pgrep -f "$ID" >/dev/null || return 0
    sleep 0.1
  done
  echo "  left behind:" >&2
  pgrep -af "$ID" >&2
  cleanup_processes
  return 1
}

# Runs `accel launch ARGS...`, leaving stdout, stderr, exit code and duration in OUT, ERR, RC, MS.
launch() {
  local start
  start=$(now_ms)
  RC=0
  "$ACCEL" launch "$@" >"$WORK/out" 2>"$WORK/err" || RC=$?
  MS=$(($(now_ms) - start))
  OUT=$(cat "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# ---- environment ----

SHOW_ENV='echo $RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $OMP_NUM_THREADS'

test_env_defaults() {
  # nproc itself would answer OMP_NUM_THREADS when set.
  local threads=$(($(env -u OMP_NUM_THREADS -u OMP_THREAD_LIMIT nproc) / 2))
  ((threads >= 1)) || threads=1
  # The launcher only sets OMP_NUM_THREADS when its own environment lacks it.
  RC=0
  OUT=$(env -u OMP_NUM_THREADS "$ACCEL" launch --nproc-per-node 2 -- sh -c "$SHOW_ENV" 2>"$WORK/err" | sort) || RC=$?
  expect "exit code" "$RC" 0 &&
    expect "output" "$OUT" "0 2 0 2 127.0.0.1 29500 $threads
1 2 1 2 127.0.0.1 29500 $threads"
}

test_env_keeps_omp_threads() {
  OUT=$(OMP_NUM_THREADS=7 "$ACCEL" launch --nproc-per-node 2 -- sh -c 'echo $OMP_NUM_THREADS' | sort -u)
  expect "OMP_NUM_THREADS" "$OUT" 7
}

test_env_free_port() {
  launch --nproc-per-node 2 --master-port 0 -- sh -c 'echo $MASTER_PORT'
  expect "exit code" "$RC" 0 || return 1
  local ports
  ports=$(sort -u <<<"$OUT")
  [[ $ports =~ ^[0-9]+$ && $ports -gt 0 && $ports -le 65535 ]] && return 0
  echo "  expected one shared port number other than 0, got [$OUT]" >&2
  return 1
}

test_env_options() {
  launch --nproc-per-node=1 --cpu --mixed-precision=bf16 --timeout-s 30 -- \
    sh -c 'echo $ACCEL_USE_CPU $ACCEL_MIXED_PRECISION $ACCEL_TIMEOUT_S'
  expect "exit code" "$RC" 0 && expect "output" "$OUT" "1 bf16 30"
}

test_env_multi_node() {
  RC=0
  OUT=$("$ACCEL" launch --nproc-per-node 2 --nnodes 2 --node-rank 1 --master-addr 10.1.2.3 --master-port 1234 -- \
    sh -c 'echo $RANK $WORLD_SIZE $LOCAL_RANK $GROUP_RANK $MASTER_ADDR $MASTER_PORT' 2>"$WORK/err" | sort) || RC=$?
  expect "exit code" "$RC" 0 &&
    expect "output" "$OUT" "2 4 0 1 10.1.2.3 1234
3 4 1 1 10.1.2.3 1234"
}

# ---- failures ----

# The script of a rank started with $0 = $MARKER and $1 = $WORK: both ranks run $2 first; then
# rank 0 sleeps, with a background child of its own, both carrying the id (a string of digits) in
# their argument, while rank 1 waits until rank 0 is in place and runs $1.
rank1_script() {
  printf '%s\n' "$2" \
    'if [ "$RANK" = 0 ]; then' \
    '  sleep "60.${0##*-}" &' \
    '  : >"$1/ready"' \
    '  sleep "60.${0##*-}"; :' \
    'fi' \
    'i=0; while [ ! -e "$1/ready" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done' \
    "$1"
}

# Runs rank1_script "$1" "$2" in two ranks, with launcher options $3...
launch_rank1() {
  local action=$1 setup=$2
  shift 2
  rm -f "$WORK/ready"
  launch --nproc-per-node 2 "$@" -- sh -c "$(rank1_script "$action" "$setup")" "$MARKER" "$WORK"
}

within() {
  local limit=$1
  ((MS < limit)) && return 0
  echo "  took ${MS} ms, expected under ${limit} ms" >&2
  return 1
}

test_failure_exit_code() {
  launch_rank1 'exit 3' ''
  expect "exit code" "$RC" 3 &&
    expect_contains "stderr" "$ERR" "rank 1 " &&
    expect_contains "stderr" "$ERR" "exit code 3" &&
    within 10000 && no_leftovers
}

test_failure_signal() {
  launch_rank1 'kill -KILL $$' ''
  expect "exit code" "$RC" 137 &&
    expect_contains "stderr" "$ERR" "rank 1 " &&
    expect_contains "stderr" "$ERR" "signal 9" &&
    no_leftovers
}

test_exec_failure() {
  launch --nproc-per-node 1 -- "$WORK/no-such-program"
  expect "exit code" "$RC" 127 && expect_contains "stderr" "$ERR" "cannot run $WORK/no-such-program"
}

test_ignored_sigterm_gets_sigkill() {
  launch_rank1 "exit 4" "trap '' TERM" --grace-period-s 1
  expect "exit code" "$RC" 4 || return 1
  ((MS >= 1000)) || { echo "  took ${MS} ms, less than the 1 s grace period" >&2; return 1; }
  within 5000 && no_leftovers
}

# ---- restarts ----

# Both ranks print their rank and restart count; on a restart they stop there, successfully.
SHOW_RESTART='echo "$RANK $ACCEL_RESTART_COUNT"; [ "$ACCEL_RESTART_COUNT" = 0 ] || exit 0'

test_restart_after_sigkill() {
  launch_rank1 'kill -KILL $$' "$SHOW_RESTART" --max-restarts 1
  expect "exit code" "$RC" 0 &&
    expect "ranks and restart counts" "$(sort <<<"$OUT")" "0 0
0 1
1 0
1 1" &&
    expect_contains "stderr" "$ERR" \
      "accel launch: rank 1 was killed by signal 9 (Killed); restarting the job (restart 1 of 1)" &&
    within 10000 && no_leftovers
}

test_restarts_run_out() {
  launch_rank1 'exit 3' '' --max-restarts 2
  expect "exit code" "$RC" 3 &&
    expect "failures" "$(grep -c 'rank 1 (local rank 1, pid [0-9]*) failed with exit code 3' <<<"$ERR")" 3 &&
    expect_contains "stderr" "$ERR" "restarting the job (restart 2 of 2)" &&
    expect_contains "stderr" "$ERR" "accel launch: rank 1 failed with exit code 3; no restart left (2 used)" &&
    within 20000 && no_leftovers
}

test_max_restarts_0_fails() {
  launch_rank1 'exit 3' "$SHOW_RESTART" --max-restarts 0
  expect "exit code" "$RC" 3 && expect "restart counts" "$(sort <<<"$OUT")" "0 0
1 0" || return 1
  [[ $ERR != *restart* ]] || { echo "  restart mentioned: $ERR" >&2; return 1; }
  no_leftovers
}

test_restart_count_replaced() {
  OUT=$(ACCEL_RESTART_COUNT=5 "$ACCEL" launch --nproc-per-node 1 -- sh -c 'echo $ACCEL_RESTART_COUNT')
  expect "ACCEL_RESTART_COUNT" "$OUT" 0
}

test_signal_not_restarted() {
  signal_launcher TERM --max-restarts 1
  expect "exit code" "$RC" 143 && within 3000 && no_leftovers || return 1
  [[ $ERR != *restarting* ]] || { echo "  restarted after SIGTERM: $ERR" >&2; return 1; }
}

# ---- signals sent to the launcher ----

# Starts two sleeping ranks in the background, waits until both run, and sends the launcher $1; the
# launcher gets the options $2...
signal_launcher() {
  local sig=$1 pid
  shift
  rm -f "$WORK"/ready.*
  # Each rank starts its children, then says it is ready and waits: the signal never meets a shell between
  # fork and exec, where a shell can lose it (then only the grace period's SIGKILL ends the rank).
  "$ACCEL" launch --nproc-per-node 2 --grace-period-s 3 "$@" -- \
    sh -c 'sleep "60.${0##*-}" & sleep "60.${0##*-}" & : >"$1/ready.$RANK"; wait' "$MARKER" "$WORK" 2>"$WORK/err" &
  pid=$!
  for _ in $(seq 50); do
    [[ -e $WORK/ready.0 && -e $WORK/ready.1 ]] && break
    sleep 0.1
  done
  local start
  start=$(now_ms)
  kill "-$sig" "$pid"
  RC=0
  wait "$pid" || RC=$?
  MS=$(($(now_ms) - start))
  ERR=$(cat "$WORK/err")
}

test_sigterm_forwarded() {
  signal_launcher TERM
  expect "exit code" "$RC" 143 && within 3000 && no_leftovers
}

test_sigint_forwarded() {
  # Without job control a background command starts with SIGINT ignored, and so keeps it ignored.
  set -m
  signal_launcher INT
  set +m
  expect "exit code" "$RC" 130 && within 3000 && no_leftovers
}

# ---- CPU affinity ----

# Each rank prints "$ACCEL_RESTART_COUNT $LOCAL_RANK CPUS", CPUS as /proc lists the CPUs it may run on.
SHOW_CPUS='echo "$ACCEL_RESTART_COUNT $LOCAL_RANK $(awk '"'"'/^Cpus_allowed_list/ {print $2}'"'"' /proc/self/status)"'

# The first two CPUs this script may run on, in CPU0 and CPU1; false when it may use only one.
two_cpus() {
  local cpus
  read -ra cpus <<<"$(/usr/bin/python3 -c 'import os; print(*sorted(os.sched_getaffinity(0))[:2])')"
  ((${#cpus[@]} == 2)) || return 1
  CPU0=${cpus[0]} CPU1=${cpus[1]}
}

# Runs `accel launch ARGS...` on the CPUs $1 (taskset's list), as launch() does.
launch_on() {
  local list=$1
  shift
  RC=0
  taskset -c "$list" "$ACCEL" launch "$@" >"$WORK/out" 2>"$WORK/err" || RC=$?
  OUT=$(sort "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# The launcher's CPUs listed as /proc lists them: "0-1" for neighbours, "0,2" otherwise.
pair_list() { if ((CPU1 == CPU0 + 1)); then echo "$CPU0-$CPU1"; else echo "$CPU0,$CPU1"; fi; }

test_cpu_affinity_a_cpu_each() {
  two_cpus || { echo "  skipped: one CPU only" >&2; return 0; }
  launch_on "$CPU0,$CPU1" --nproc-per-node 2 --cpu-affinity -- sh -c "$SHOW_CPUS"
  expect "exit code" "$RC" 0 && expect "ranks and their CPUs" "$OUT" "0 0 $CPU0
0 1 $CPU1" || return 1
  # Without the option, every rank may run on every CPU of the launcher.
  launch_on "$CPU0,$CPU1" --nproc-per-node 2 -- sh -c "$SHOW_CPUS"
  expect "exit code" "$RC" 0 && expect "ranks and their CPUs unbound" "$OUT" "0 0 $(pair_list)
0 1 $(pair_list)"
}

test_cpu_affinity_one_rank_gets_all() {
  two_cpus || { echo "  skipped: one CPU only" >&2; return 0; }
  launch_on "$CPU0,$CPU1" --nproc-per-node 1 --cpu-affinity -- sh -c "$SHOW_CPUS"
  expect "exit code" "$RC" 0 && expect "the rank's CPUs" "$OUT" "0 0 $(pair_list)"
}

test_cpu_affinity_kept_on_restart() {
  two_cpus || { echo "  skipped: one CPU only" >&2; return 0; }
  # In the first attempt rank 0 prints and waits to be stopped, rank 1 fails once rank 0 has printed.
  rm -f "$WORK/printed"
  launch_on "$CPU0,$CPU1" --nproc-per-node 2 --cpu-affinity --max-restarts 1 -- \
    sh -c "$SHOW_CPUS"'
      [ "$ACCEL_RESTART_COUNT" = 1 ] && exit 0
      if [ "$LOCAL_RANK" = 0 ]; then : >"$1/printed"; exec sleep 30; fi
      i=0; while [ ! -e "$1/printed" ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i + 1)); done
      exit 3' "$MARKER" "$WORK"
  expect "exit code" "$RC" 0 && expect "ranks and their CPUs in both attempts" "$OUT" "0 0 $CPU0
0 1 $CPU1
1 0 $CPU0
1 1 $CPU1"
}

test_cpu_affinity_needs_a_cpu_per_rank() {
  local cpu
  cpu=$(awk '/^Cpus_allowed_list/ {print $2}' /proc/self/status)
  cpu=${cpu%%[-,]*}
  launch_on "$cpu" --nproc-per-node 2 --cpu-affinity -- sh -c 'echo started'
  expect "exit code" "$RC" 1 && expect "output" "$OUT" "" &&
    expect_contains "stderr" "$ERR" \
      "--cpu-affinity needs a CPU for each of the 2 ranks of this node, and the launcher may use 1 ($cpu)"
}

# ---- usage ----

expect_usage_error() {
  local what=$1
  shift
  launch "$@"
  [[ $RC == 2 && -n $ERR ]] && return 0
  printf '  %s: expected exit code 2 and a message, got %s [%s]\n' "$what" "$RC" "$ERR" >&2
  return 1
}

test_bad_usage() {
  expect_usage_error "no program" --nproc-per-node 1 &&
    expect_usage_error "no program after --" --nproc-per-node 1 -- &&
    expect_usage_error "N = 0" --nproc-per-node 0 -- true &&
    expect_usage_error "unknown flag" --nproc-per-node 1 --bogus -- true &&
    expect_usage_error "unknown flag before the program" --nproc-per-node 1 --bogus true &&
    expect_usage_error "bad mixed precision" --nproc-per-node 1 --mixed-precision fp8 -- true &&
    expect_usage_error "a value for --cpu-affinity" --nproc-per-node 1 --cpu-affinity=core -- true &&
    expect_usage_error "node rank too big" --nproc-per-node 1 --nnodes 2 --node-rank 2 -- true &&
    expect_usage_error "free port on many nodes" --nproc-per-node 1 --nnodes 2 --master-port 0 -- true &&
    expect_usage_error "negative grace period" --nproc-per-node 1 --grace-period-s -1 -- true &&
    expect_usage_error "negative restarts" --nproc-per-node 1 --max-restarts -1 -- true &&
    expect_usage_error "missing value" --nproc-per-node
}

# Without "--" the program starts at the first argument that is not an option; what follows is its own.
test_program_without_separator() {
  launch --nproc-per-node 1 sh -c 'echo "$0 $1"' --nproc-per-node 7
  expect "exit code" "$RC" 0 && expect "output" "$OUT" "--nproc-per-node 7"
}

test_help() {
  launch --help
  expect "exit code" "$RC" 0 && expect_contains "stdout" "$OUT" "usage: accel launch"
}

check "env: ranks get RANK, WORLD_SIZE, LOCAL_*, MASTER_*, OMP_NUM_THREADS" test_env_defaults
check "env: an OMP_NUM_THREADS already set is kept" test_env_keeps_omp_threads
check "env: --master-port 0 picks a free port" test_env_free_port
check "env: --cpu, --mixed-precision, --timeout-s" test_env_options
check "env: --nnodes 2 --node-rank 1 gives ranks 2 and 3 of 4" test_env_multi_node
check "failure: a rank exiting 3 stops the job with exit code 3" test_failure_exit_code
check "failure: a rank killed by SIGKILL gives exit code 137" test_failure_signal
check "failure: a program that cannot run gives exit code 127" test_exec_failure
check "failure: a rank ignoring SIGTERM is killed after the grace period" test_ignored_sigterm_gets_sigkill
check "restart: rank 1 SIGKILLed, the job runs again with ACCEL_RESTART_COUNT=1" test_restart_after_sigkill
check "restart: after --max-restarts 2 restarts the failure's exit code" test_restarts_run_out
check "restart: --max-restarts 0 fails as without it, ACCEL_RESTART_COUNT=0" test_max_restarts_0_fails
check "restart: the launcher's own ACCEL_RESTART_COUNT is replaced" test_restart_count_replaced
check "restart: a signal to the launcher ends the job, no restart" test_signal_not_restarted
check "signal: SIGTERM to the launcher is forwarded, exit code 143" test_sigterm_forwarded
check "signal: SIGINT to the launcher is forwarded, exit code 130" test_sigint_forwarded
check "affinity: --cpu-affinity gives each of 2 ranks a CPU of the launcher's 2" test_cpu_affinity_a_cpu_each
check "affinity: one rank gets every CPU of the launcher" test_cpu_affinity_one_rank_gets_all
check "affinity: a restarted job's ranks keep their CPUs" test_cpu_affinity_kept_on_restart
check "affinity: fewer CPUs than ranks is refused before any rank starts" test_cpu_affinity_needs_a_cpu_per_rank
check "usage: bad command lines exit 2 with a message" test_bad_usage
check "usage: the program without '--' keeps its own options" test_program_without_separator
check "usage: --help exits 0" test_help

report
