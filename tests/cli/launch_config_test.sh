#!/usr/bin/env bash
# Tests of `accel launch` as Accelerate users launch: a Python script as the program, Accelerate's flag
# spellings, `accel config` and the config file (Accelerate's own default_config.yaml too), the precedence
# flags > config file > environment > defaults as `accel env` shows it, and --nproc-per-node auto.
# Usage: launch_config_test.sh ACCEL_BIN
# The rank scripts are single-quoted on purpose: the ranks expand their own variables.
# shellcheck disable=SC2016
set -euo pipefail

if [[ $# -ne 1 || ! -x $1 ]]; then
  echo "usage: $0 ACCEL_BIN" >&2
  exit 2
fi
ACCEL=$1
PYTHON=/usr/bin/python3

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The default config file is looked for here, so that the user's own cannot change what these tests see.
export XDG_CONFIG_HOME=$WORK/xdg
unset ACCEL_MIXED_PRECISION ACCEL_USE_CPU ACCEL_GRADIENT_ACCUMULATION_STEPS ACCEL_TIMEOUT_S ACCEL_DYNAMO_BACKEND
export ACCEL_PYTHON=$PYTHON

# shellcheck source=tests/cli/check.sh
source "$(dirname "$0")/check.sh"

# Runs `accel ARGS...`, leaving stdout (sorted: ranks print in any order), stderr and exit code in OUT, ERR, RC.
run() {
  RC=0
  "$ACCEL" "$@" >"$WORK/out" 2>"$WORK/err" || RC=$?
  OUT=$(sort "$WORK/out")
  ERR=$(cat "$WORK/err")
}

# Exit code 2, nothing run, and a message containing $2; the command line follows.
expect_refused() {
  local what=$1 message=$2
  shift 2
  run "$@"
  expect "$what: exit code" "$RC" 2 && expect "$what: output" "$OUT" "" && expect_contains "$what: stderr" "$ERR" "$message"
}

# Each rank prints what it was started with: rank, world size, the state settings the launcher exported, the
# interpreter (PICKED is set by the fake interpreters below) and its arguments; in one write, so that the
# ranks' lines cannot interleave even when Python writes unbuffered.
cat >"$WORK/train.py" <<'EOF'
import os, sys
e = os.environ.get
words = [e("RANK"), e("WORLD_SIZE"), e("ACCEL_USE_CPU", "-"), e("ACCEL_MIXED_PRECISION", "-"),
         e("ACCEL_GRADIENT_ACCUMULATION_STEPS", "-"), e("PICKED", sys.executable), *sys.argv[1:]]
sys.stdout.write(" ".join(words) + "\n")
EOF

# A config file as Accelerate 0.34's `accelerate config` writes it for two CPU processes in bf16 (multi-CPU,
# no IPEX, no mpirun, no dynamo): yaml.safe_dump of its ClusterConfig, keys sorted, empty sections dropped
# (accelerate_cpu_bf16.yaml).
cp "$(dirname "$0")/accelerate_cpu_bf16.yaml" "$WORK/accelerate_cpu.yaml"

# As `accelerate config default` writes it on a machine without CUDA: JSON, in default_config.yaml.
cat >"$WORK/accelerate_default.yaml" <<'EOF'
{
  "compute_environment": "LOCAL_MACHINE",
  "debug": false,
  "distributed_type": "NO",
  "downcast_bf16": false,
  "enable_cpu_affinity": false,
  "machine_rank": 0,
  "main_training_function": "main",
  "mixed_precision": "no",
  "num_machines": 1,
  "num_processes": 1,
  "rdzv_backend": "static",
  "same_network": false,
  "tpu_use_cluster": false,
  "tpu_use_sudo": false,
  "use_cpu": true
}
EOF

TWO_BF16_RANKS="0 2 1 bf16 - $PYTHON --lr 3e-4
1 2 1 bf16 - $PYTHON --lr 3e-4"

# ---- a Python script, both ways ----

test_script_with_flags() {
  run launch --num_processes 2 --cpu --mixed_precision bf16 "$WORK/train.py" --lr 3e-4
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "$TWO_BF16_RANKS"
}

test_script_with_accelerate_config() {
  run launch --config_file "$WORK/accelerate_cpu.yaml" "$WORK/train.py" --lr 3e-4
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "$TWO_BF16_RANKS"
}

test_accelerate_default_json() {
  run launch --config-file "$WORK/accelerate_default.yaml" "$WORK/train.py"
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "0 1 1 no - $PYTHON"
}

test_default_location() {
  run config --num_processes 2 --cpu --mixed_precision bf16
  expect "accel config exit code" "$RC" 0 &&
    expect_contains "accel config says where" "$OUT" "$XDG_CONFIG_HOME/accel/default_config.yaml" || return 1
  run launch "$WORK/train.py" --lr 3e-4
  rm -f "$XDG_CONFIG_HOME/accel/default_config.yaml"
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "$TWO_BF16_RANKS"
}

test_no_settings_one_process() {
  run launch "$WORK/train.py"
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "0 1 - - - $PYTHON" &&
    expect_contains "stderr" "$ERR" "starting 1 process per node"
}

# ---- accel config writes what Accelerate writes ----

test_config_writes_accelerate_yaml() {
  run config --config-file "$WORK/written.yaml" --num_processes 2 --cpu --mixed_precision bf16
  expect "exit code" "$RC" 0 || return 1
  # Accelerate's file for the same answers, less the IPEX question accel does not ask.
  expect "file" "$(cat "$WORK/written.yaml")" "$(grep -v ipex "$WORK/accelerate_cpu.yaml")"
}

test_config_writes_multi_node() {
  run config --config-file "$WORK/nodes.yaml" --num-processes=4 --num-machines=2 --machine-rank=1 \
    --main-process-ip=10.0.0.1 --main-process-port=29501 --gradient_accumulation_steps 2
  expect "exit code" "$RC" 0 || return 1
  expect "file" "$(cat "$WORK/nodes.yaml")" "compute_environment: LOCAL_MACHINE
debug: false
distributed_type: MULTI_GPU
downcast_bf16: 'no'
enable_cpu_affinity: false
gpu_ids: all
gradient_accumulation_steps: 2
machine_rank: 1
main_process_ip: 10.0.0.1
main_process_port: 29501
main_training_function: main
mixed_precision: 'no'
num_machines: 2
num_processes: 4
rdzv_backend: static
same_network: true
tpu_env: []
tpu_use_cluster: false
tpu_use_sudo: false
use_cpu: false"
}

test_config_bad_value_keeps_file() {
  printf 'num_processes: 3\n' >"$WORK/kept.yaml"
  run config --config-file "$WORK/kept.yaml" --num_processes two
  expect "exit code" "$RC" 2 && expect_contains "stderr" "$ERR" "expects an integer" &&
    expect "file" "$(cat "$WORK/kept.yaml")" "num_processes: 3" &&
    expect_refused "a launch-only flag" "unknown option '--max-restarts'" config --config-file "$WORK/kept.yaml" \
      --max-restarts 2
}

# On a terminal (script gives it one), with no flags, accel config asks Accelerate's questions.
test_config_interactive() {
  command -v script >/dev/null || { echo "  skipped: no script(1)" >&2; return 0; }
  printf 'MULTI_CPU\n1\n2\nfp16\n' | script -qec "'$ACCEL' config --config-file '$WORK/asked.yaml'" /dev/null \
    >"$WORK/dialog" 2>&1 || true
  run env --config-file "$WORK/asked.yaml"
  expect "exit code" "$RC" 0 && expect_contains "settings" "$OUT" "num_processes=2 (config file)" &&
    expect_contains "settings" "$OUT" "mixed_precision=fp16 (config file)" &&
    expect_contains "settings" "$OUT" "use_cpu=true (config file)" || return 1
  # `accel config default`, as `accelerate config default`: no question, even on a terminal.
  script -qec "'$ACCEL' config default --config-file '$WORK/default.yaml'" /dev/null </dev/null >"$WORK/dialog" 2>&1 ||
    true
  run env --config-file "$WORK/default.yaml"
  expect "exit code" "$RC" 0 && expect_contains "settings" "$OUT" "num_processes=1 (config file)" &&
    expect_contains "settings" "$OUT" "mixed_precision=no (config file)"
}

# ---- precedence: flags > config file > environment > defaults ----

test_config_over_environment() {
  RC=0
  OUT=$(ACCEL_MIXED_PRECISION=fp16 ACCEL_GRADIENT_ACCUMULATION_STEPS=4 \
    "$ACCEL" launch --config-file "$WORK/accelerate_cpu.yaml" "$WORK/train.py" 2>"$WORK/err" | sort) || RC=$?
  ERR=$(cat "$WORK/err")
  # The file's bf16 replaces the environment's fp16; what the file does not say the ranks inherit.
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "0 2 1 bf16 4 $PYTHON
1 2 1 bf16 4 $PYTHON"
}

test_flags_over_config() {
  run launch --config-file "$WORK/accelerate_cpu.yaml" --mixed-precision no --num_processes 1 "$WORK/train.py"
  expect "exit code" "$RC" 0 && expect "ranks" "$OUT" "0 1 1 no - $PYTHON"
}

test_env_shows_precedence() {
  RC=0
  OUT=$(ACCEL_GRADIENT_ACCUMULATION_STEPS=4 ACCEL_MIXED_PRECISION=fp16 \
    "$ACCEL" env --config-file "$WORK/accelerate_cpu.yaml" --mixed_precision no 2>"$WORK/err") || RC=$?
  ERR=$(cat "$WORK/err")
  expect "exit code" "$RC" 0 &&
    expect_contains "config file" "$OUT" "- config file: $WORK/accelerate_cpu.yaml" &&
    expect_contains "passed over" "$OUT" "passed over (Accelerate's, for what accel does not do): debug, downcast_bf16, ipex_config" &&
    expect_contains "flag" "$OUT" "    mixed_precision=no (flag)" &&
    expect_contains "config file" "$OUT" "    use_cpu=true (config file)" &&
    expect_contains "config file" "$OUT" "    num_processes=2 (config file)" &&
    expect_contains "env" "$OUT" "    gradient_accumulation_steps=4 (env)" &&
    expect_contains "default" "$OUT" "    timeout_s=1800 (default)" &&
    expect_contains "default" "$OUT" "    main_process_port=29500 (default)" &&
    expect_contains "derived" "$OUT" "    distributed_type=MULTI_CPU" &&
    expect_contains "transport" "$OUT" "all-reduce transport of CPU tensors: gloo+shm"
}

# ---- spellings ----

SHOW_RANKS='echo $RANK $WORLD_SIZE $LOCAL_RANK $GROUP_RANK $MASTER_ADDR $MASTER_PORT'
NODE_1_OF_2="2 4 0 1 10.1.2.3 1234
3 4 1 1 10.1.2.3 1234"

test_accelerate_spellings() {
  run launch --num_processes 4 --num_machines 2 --machine_rank 1 --main_process_ip 10.1.2.3 \
    --main_process_port 1234 -- sh -c "$SHOW_RANKS"
  expect "exit code" "$RC" 0 && expect "underscores" "$OUT" "$NODE_1_OF_2" || return 1
  run launch --num-processes=4 --num-machines=2 --machine-rank=1 --main-process-ip=10.1.2.3 \
    --main-process-port=1234 sh -c "$SHOW_RANKS"
  expect "exit code" "$RC" 0 && expect "dashes, no --" "$OUT" "$NODE_1_OF_2" || return 1
  run launch --nproc_per_node 2 --nnodes 2 --node_rank 1 --master_addr 10.1.2.3 --master_port 1234 \
    sh -c "$SHOW_RANKS"
  expect "exit code" "$RC" 0 && expect "torchrun's with underscores" "$OUT" "$NODE_1_OF_2"
}

# The first two CPUs this script may run on, in CPU0 and CPU1; false when it may use only one.
two_cpus() {
  local cpus
  read -ra cpus <<<"$($PYTHON -c 'import os; print(*sorted(os.sched_getaffinity(0))[:2])')"
  ((${#cpus[@]} == 2)) || return 1
  CPU0=${cpus[0]} CPU1=${cpus[1]}
}

test_nproc_per_node_auto() {
  two_cpus || { echo "  skipped: one CPU only" >&2; return 0; }
  OUT=$(taskset -c "$CPU0,$CPU1" "$ACCEL" launch --nproc-per-node auto --cpu sh -c 'echo $LOCAL_WORLD_SIZE' | sort -u)
  expect "auto on 2 CPUs" "$OUT" 2 || return 1
  OUT=$(taskset -c "$CPU0" "$ACCEL" launch --nproc-per-node cpu sh -c 'echo $LOCAL_WORLD_SIZE' | sort -u)
  expect "cpu on 1 CPU" "$OUT" 1
}

# ---- how the program runs ----

test_module() {
  mkdir -p "$WORK/modules"
  printf 'import sys\nprint("module", *sys.argv[1:])\n' >"$WORK/modules/trainmod.py"
  RC=0
  OUT=$(PYTHONPATH=$WORK/modules "$ACCEL" launch --num_processes 1 -m trainmod --epochs 2 2>"$WORK/err") || RC=$?
  ERR=$(cat "$WORK/err")
  expect "exit code" "$RC" 0 && expect "output" "$OUT" "module --epochs 2"
}

test_no_python() {
  printf '#!/bin/sh\necho "run as it is: $*"\n' >"$WORK/tool.py"
  chmod +x "$WORK/tool.py"
  run launch --num_processes 1 --no_python "$WORK/tool.py" a b
  expect "exit code" "$RC" 0 && expect "output" "$OUT" "run as it is: a b"
}

# A python3 of its own in a directory, as a virtual environment has, which says it was picked; its
# packages are in $WORK/site, where `import accel` finds a stand-in package when there is one.
make_fake_python() {
  mkdir -p "$WORK/venv/bin" "$WORK/site"
  printf '#!/bin/sh\nPICKED=venv exec %s "$@"\n' "$PYTHON" >"$WORK/venv/bin/python3"
  chmod +x "$WORK/venv/bin/python3"
}

# Runs `accel launch` on train.py with the fake python3 first on PATH and no ACCEL_PYTHON.
launch_with_fake_python() {
  RC=0
  OUT=$(env -u ACCEL_PYTHON PATH="$WORK/venv/bin:$PATH" PYTHONPATH="$WORK/site" \
    "$ACCEL" launch --num_processes 1 "$WORK/train.py" 2>"$WORK/err") || RC=$?
  ERR=$(cat "$WORK/err")
}

test_python_that_imports_accel() {
  make_fake_python
  mkdir -p "$WORK/site/accel"
  : >"$WORK/site/accel/__init__.py"
  launch_with_fake_python
  rm -rf "$WORK/site/accel"
  expect "exit code" "$RC" 0 && expect "the python3 on PATH that imports accel" "$OUT" "0 1 - - - venv"
}

test_python_without_accel_falls_back() {
  make_fake_python
  launch_with_fake_python
  expect "exit code" "$RC" 0 && expect "/usr/bin/python3" "$OUT" "0 1 - - - $PYTHON" || return 1
  RC=0
  OUT=$(env -u ACCEL_PYTHON PATH="$WORK/venv/bin:$PATH" PYTHONPATH="$WORK/site" "$ACCEL" env) || RC=$?
  expect_contains "accel env" "$OUT" \
    "- Python for .py programs and -m: $PYTHON (the default: the python3 on PATH ($WORK/venv/bin/python3) cannot import accel)"
}

test_accel_python_wins() {
  make_fake_python
  RC=0
  OUT=$(ACCEL_PYTHON=$WORK/venv/bin/python3 "$ACCEL" launch --num_processes 1 "$WORK/train.py" 2>"$WORK/err") || RC=$?
  expect "exit code" "$RC" 0 && expect "ACCEL_PYTHON" "$OUT" "0 1 - - - venv"
}

# ---- FSDP's and DeepSpeed's sections: the environment Accelerate's launcher gives the ranks ----

test_plugin_sections() {
  cat >"$WORK/plugin_env.py" <<'EOF'
import os, sys
names = ["RANK", "ACCEL_USE_CPU", "ACCELERATE_USE_FSDP", "FSDP_SHARDING_STRATEGY", "FSDP_TRANSFORMER_CLS_TO_WRAP",
         "FSDP_BACKWARD_PREFETCH",
         "FSDP_RESHARD_AFTER_FORWARD", "FSDP_VERSION", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE",
         "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE"]
sys.stdout.write(" ".join(os.environ.get(name, "-") for name in names) + "\n")
EOF
  printf '%s\n' "compute_environment: LOCAL_MACHINE" "distributed_type: FSDP" "use_cpu: true" "num_processes: 2" \
    "fsdp_config:" "  fsdp_sharding_strategy: SHARD_GRAD_OP" "  fsdp_auto_wrap_policy: TRANSFORMER_BASED_WRAP" \
    "  fsdp_transformer_layer_cls_to_wrap: [Block, Embedding]" "  fsdp_reshard_after_forward: false" "  fsdp_version: 2" \
    "  fsdp_backward_prefetch_policy: BACKWARD_PRE" \
    "deepspeed_config:" "  zero_stage: 3" >"$WORK/fsdp.yaml"
  run launch --config-file "$WORK/fsdp.yaml" "$WORK/plugin_env.py"
  expect "FSDP: exit code" "$RC" 0 &&
    expect "FSDP: ranks" "$OUT" "0 1 true SHARD_GRAD_OP Block,Embedding BACKWARD_PRE false 2 - - - -
1 1 true SHARD_GRAD_OP Block,Embedding BACKWARD_PRE false 2 - - - -" || return 1
  # Accelerate's launcher prefers the older fsdp_backward_prefetch_policy when a file gives both names.
  sed -i 's/^fsdp_config:$/fsdp_config:\n  fsdp_backward_prefetch: BACKWARD_POST/' "$WORK/fsdp.yaml"
  run launch --config-file "$WORK/fsdp.yaml" "$WORK/plugin_env.py"
  expect_contains "FSDP: the older name wins" "$OUT" "SHARD_GRAD_OP Block,Embedding BACKWARD_PRE false" || return 1
  run env --config-file "$WORK/fsdp.yaml"
  expect_contains "FSDP: accel env names what is passed over" "$OUT" "fsdp_config.fsdp_backward_prefetch" || return 1
  printf '%s\n' "distributed_type: DEEPSPEED" "use_cpu: true" "num_processes: 2" "deepspeed_config:" \
    "  zero_stage: 3" "  offload_optimizer_device: none" "  offload_param_device: cpu" >"$WORK/deepspeed.yaml"
  run launch --config-file "$WORK/deepspeed.yaml" "$WORK/plugin_env.py"
  expect "DeepSpeed: exit code" "$RC" 0 &&
    expect "DeepSpeed: ranks" "$OUT" "0 1 - - - - - - true 3 none cpu
1 1 - - - - - - true 3 none cpu"
}

# ---- what is refused, before anything runs ----

config_with() {
  printf '%s\n' "$@" >"$WORK/bad.yaml"
}

test_bad_config_files() {
  config_with "distributed_type: MEGATRON_LM" "num_processes: 2"
  expect_refused "Megatron-LM" "config file $WORK/bad.yaml: distributed_type is MEGATRON_LM: accel trains data parallel" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "distributed_type: DEEPSPEED" "deepspeed_config:" "  deepspeed_config_file: ds.json"
  expect_refused "DeepSpeed's JSON" "deepspeed_config.deepspeed_config_file is DeepSpeed's own configuration" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "num_processes: 2" "learning_rate: 0.1"
  expect_refused "unknown key" "config file $WORK/bad.yaml: unknown key 'learning_rate'" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "num_processes: two"
  expect_refused "not a number" "config file $WORK/bad.yaml: num_processes expects an integer" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "mixed_precision: fp8"
  expect_refused "fp8" "config file $WORK/bad.yaml: mixed_precision: option 'mixed_precision': value 'fp8' is not one of no, fp16, bf16" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "compute_environment: AMAZON_SAGEMAKER"
  expect_refused "SageMaker" "compute_environment AMAZON_SAGEMAKER is not something accel launches on" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "num_processes: [1"
  expect_refused "not YAML" "config file $WORK/bad.yaml is not YAML" launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "num_processes: [1, 2]"
  expect_refused "a list" "num_processes expects a single value, not a list" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "distributed_type: MULTI_CPU" "use_cpu: false" "num_processes: 2"
  expect_refused "contradiction" "distributed_type MULTI_CPU contradicts use_cpu false" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  config_with "num_processes: 3" "num_machines: 2"
  expect_refused "uneven" "num_processes 3 cannot be shared evenly by the 2 machines" \
    launch --config-file "$WORK/bad.yaml" true || return 1
  expect_refused "missing file" "cannot read the config file" launch --config-file "$WORK/missing.yaml" true
}

test_bad_flags() {
  expect_refused "both counts" "not both" launch --num_processes 2 --nproc-per-node 2 true &&
    expect_refused "--cpu with --multi_gpu" "contradicts use_cpu true" launch --cpu --multi_gpu --num_processes 2 true &&
    expect_refused "bad gpu ids" "expects all or GPU indices" launch --gpu_ids first true &&
    expect_refused "bad nproc" "expects an integer" launch --nproc-per-node many true &&
    expect_refused "module and no python" "cannot be used together" launch -m --no_python mod || return 1
  RC=0
  ACCEL_MIXED_PRECISION=fp9 "$ACCEL" launch true 2>"$WORK/err" || RC=$?
  ERR=$(cat "$WORK/err")
  expect "bad environment: exit code" "$RC" 2 &&
    expect_contains "bad environment" "$ERR" "environment variable ACCEL_MIXED_PRECISION='fp9'"
}

check "config: distributed_type FSDP and DEEPSPEED export their sections as Accelerate's launcher does" test_plugin_sections
check "script: accel launch --num_processes 2 --cpu --mixed_precision bf16 train.py --lr 3e-4" test_script_with_flags
check "script: Accelerate's default_config.yaml through --config_file" test_script_with_accelerate_config
check "script: the JSON of accelerate config default" test_accelerate_default_json
check "script: accel config once, then accel launch train.py reads the default location" test_default_location
check "script: no flags and no config file run one process, saying so" test_no_settings_one_process
check "config: the file accel config writes is Accelerate's" test_config_writes_accelerate_yaml
check "config: several machines, gradient_accumulation_steps" test_config_writes_multi_node
check "config: a bad value writes nothing; launch-only flags are refused" test_config_bad_value_keeps_file
check "config: asks Accelerate's questions on a terminal, not when told 'default'" test_config_interactive
check "precedence: the config file over the environment, which fills the rest" test_config_over_environment
check "precedence: flags over the config file" test_flags_over_config
check "precedence: accel env shows each setting's source" test_env_shows_precedence
check "spellings: Accelerate's, with _ or -, and torchrun's" test_accelerate_spellings
check "spellings: --nproc-per-node auto and cpu count the launcher's CPUs" test_nproc_per_node_auto
check "program: -m MODULE runs python -m" test_module
check "program: --no_python runs a .py as it is" test_no_python
check "python: the python3 on PATH when it imports accel" test_python_that_imports_accel
check "python: /usr/bin/python3 when the one on PATH cannot import accel; accel env says so" \
  test_python_without_accel_falls_back
check "python: ACCEL_PYTHON over everything" test_accel_python_wins
check "refused: config files accel cannot follow, naming file and key" test_bad_config_files
check "refused: contradictory or malformed flags" test_bad_flags

report
