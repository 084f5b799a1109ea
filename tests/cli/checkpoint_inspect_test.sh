#!/usr/bin/env bash
# `accel checkpoint inspect DIR`: a 2-rank checkpoint, a sharded and a single-file saved model, as JSON
# checked by Python's json module; a missing, empty, corrupt or truncated directory fails with a message
# naming the problem and exit code 1; and the program still does not load LibTorch.
# Usage: checkpoint_inspect_test.sh ACCEL_BIN RESUME_WORKER (tests/ckpt/resume_worker.cpp makes the files)
set -euo pipefail

if [[ $# -ne 2 || ! -x $1 || ! -x $2 ]]; then
  echo "usage: $0 ACCEL_BIN RESUME_WORKER" >&2
  exit 2
fi
ACCEL=$1
WORKER=$2
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

# shellcheck source=tests/cli/check.sh
source "$(dirname "$0")/check.sh"

launch() { "$ACCEL" launch --nproc-per-node 2 --cpu --master-port 0 -- "$WORKER" "$@" >/dev/null; }
# Inspects DIR into OUT, ERR and RC.
inspect() {
  RC=0
  "$ACCEL" checkpoint inspect "$1" >"$WORK/out" 2>"$WORK/err" || RC=$?
  ERR=$(cat "$WORK/err")
}
# Runs a Python check on the last JSON printed, loaded as `d`.
json_says() { /usr/bin/python3 -c "import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$WORK/out"; }
fails_saying() { [[ $RC -eq 1 && $ERR == *"$1"* ]] || { echo "  rc=$RC stderr: $ERR" >&2; return 1; }; }

# 9 steps, 6 batches per rank and epoch: epoch 1, and the accumulation counter ("step", reset by each
# epoch's last batch) at 3.
launch save 9 "$WORK/checkpoint"
inspect "$WORK/checkpoint"
check "a checkpoint is described" json_says '(d["kind"], d["world_size"], d["step"], d["epoch"], d["models"], d["optimizers"],
  d["schedulers"], d["loaders"], d["grad_scaler"]) == ("checkpoint", 2, 3, 1, 1, 1, 1, 1, False)'
check "every file of it, with its size" json_says '[f["path"] for f in d["files"]] == ["metadata.json", "model.safetensors",
  "states.safetensors", "rank0/states.safetensors", "rank0/custom_checkpoint_counter.bin", "rank1/states.safetensors",
  "rank1/custom_checkpoint_counter.bin"] and all(f["bytes"] > 0 for f in d["files"])'
check "its tensors counted" json_says 'd["files"][1]["tensors"] == 4 and d["tensors"] == sum(f.get("tensors", 0) for f in d["files"])'

# The tiny MLP's 848 bytes above a 300-byte shard size: three shards and an index.
launch train 1 "$WORK/sharded" 300
inspect "$WORK/sharded"
check "a sharded model is described" json_says '(d["kind"], d["tensors"], d["total_size"]) == ("model", 4, 848)'
check "its index and shards listed" json_says '[f["path"] for f in d["files"]] == ["model.safetensors.index.json"] +
  ["model-0000%d-of-00003.safetensors" % i for i in (1, 2, 3)] and [f.get("tensors") for f in d["files"]] == [None, 1, 1, 2]'
launch train 1 "$WORK/single"
inspect "$WORK/single"
check "a one-file model is described" json_says '(d["kind"], d["tensors"], d["total_size"], len(d["files"])) == ("model", 4, 848, 1)'
check "an untied model names no ties" json_says '"tied" not in d["files"][0]'
# A tied model as save_model writes it: the tied name left out, and recorded in the metadata (as safetensors'
# save_model records it) against the name stored.
mkdir "$WORK/tied"
/usr/bin/python3 - "$WORK/tied/model.safetensors" <<'PY'
import json, struct, sys
header = json.dumps({"__metadata__": {"format": "pt", "head.w": "w1"},
                     "w1": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}}).encode()
header += b" " * (-(8 + len(header)) % 8)
open(sys.argv[1], "wb").write(struct.pack("<Q", len(header)) + header + bytes(8))
PY
inspect "$WORK/tied"
check "a tied model names its ties" json_says '(d["tensors"], d["files"][0]["tied"]) == (1, {"head.w": "w1"})'

inspect "$WORK/missing"
check "a missing directory fails" fails_saying "is not a directory"
mkdir "$WORK/empty"
inspect "$WORK/empty"
check "a directory without a checkpoint fails" fails_saying "neither a checkpoint (no metadata.json) nor a saved model"
printf '\377\377\377\377\377\377\377\177' | dd of="$WORK/single/model.safetensors" conv=notrunc status=none
inspect "$WORK/single"
check "a corrupt header length fails naming the file" fails_saying "single/model.safetensors: header length"
shard="$WORK/sharded/model-00003-of-00003.safetensors"
truncate -s -4 "$shard"
inspect "$WORK/sharded"
check "a truncated shard fails naming it" fails_saying "model-00003-of-00003.safetensors: tensor 'w2' ends at data byte"
rm "$shard"
inspect "$WORK/sharded"
check "a missing shard fails naming it" fails_saying "model-00003-of-00003.safetensors"
echo '{"world_size": 2' >"$WORK/checkpoint/metadata.json"
inspect "$WORK/checkpoint"
check "a damaged manifest fails naming it" fails_saying "metadata.json: malformed checkpoint manifest"
usage_fails() { local rc=0; "$ACCEL" checkpoint "$@" >/dev/null 2>&1 || rc=$?; [[ $rc -eq 2 ]]; }
check "a wrong subcommand is a usage error" usage_fails list "$WORK/checkpoint"

no_libtorch() { ! readelf -d "$ACCEL" | grep NEEDED | grep -Eq 'torch|c10'; }
check "accel loads no LibTorch" no_libtorch

report
