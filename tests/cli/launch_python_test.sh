#!/usr/bin/env bash
# An Accelerate-style script (accelerate_style_script.py: `Accelerator()` with no arguments) launched on two
# processes both ways an Accelerate user launches: with flags, and with an Accelerate-written config file; the
# interpreter is the one accel launch chooses (no ACCEL_PYTHON). Needs the Python package importable (ctest
# gives PYTHONPATH and ACCEL_LIBRARY).
# Usage: launch_python_test.sh ACCEL_BIN
set -euo pipefail

if [[ $# -ne 1 || ! -x $1 ]]; then
  echo "usage: $0 ACCEL_BIN" >&2
  exit 2
fi
ACCEL=$1
SCRIPT=$(dirname "$0")/accelerate_style_script.py

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export XDG_CONFIG_HOME=$WORK/xdg
unset ACCEL_PYTHON ACCEL_MIXED_PRECISION ACCEL_USE_CPU ACCEL_GRADIENT_ACCUMULATION_STEPS

# shellcheck source=tests/cli/check.sh
source "$(dirname "$0")/check.sh"

# Runs `accel launch ARGS...`, leaving the ranks' lines sorted in OUT, stderr in ERR and the exit code in RC.
launch() {
  RC=0
  "$ACCEL" launch "$@" >"$WORK/out" 2>"$WORK/err" || RC=$?
  OUT=$(sort "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# As Accelerate 0.34's `accelerate config` writes it for two CPU processes in bf16 (accelerate_cpu_bf16.yaml).
cp "$(dirname "$0")/accelerate_cpu_bf16.yaml" "$WORK/default_config.yaml"

# Each rank: its index, the number of processes, mixed precision, accumulation steps, the sum of
# rank + 1 over the ranks (3), then the script's arguments.
test_flags() {
  launch --num_processes 2 --cpu --mixed_precision bf16 --main_process_port 0 "$SCRIPT" --lr 3e-4
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "0 2 bf16 1 3 --lr 3e-4
1 2 bf16 1 3 --lr 3e-4"
}

test_accelerate_config_file() {
  # The file says nothing of accumulation: the environment's value reaches the Accelerator.
  RC=0
  ACCEL_GRADIENT_ACCUMULATION_STEPS=2 "$ACCEL" launch --config_file "$WORK/default_config.yaml" \
    --main_process_port 0 "$SCRIPT" --lr 3e-4 >"$WORK/out" 2>"$WORK/err" || RC=$?
  OUT=$(sort "$WORK/out")
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "0 2 bf16 2 3 --lr 3e-4
1 2 bf16 2 3 --lr 3e-4"
}

check "accel launch --num_processes 2 --cpu --mixed_precision bf16 script.py --lr 3e-4" test_flags
check "accel launch --config_file default_config.yaml script.py --lr 3e-4" test_accelerate_config_file

report
