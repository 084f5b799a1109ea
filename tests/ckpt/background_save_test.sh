#!/bin/sh
# Issue 12's background saving on 2 processes: a checkpoint saved in the background while training goes on
# holds exactly the state at the call (the same files, bit for bit, as a blocking save at that step, and a
# run resumed from it ends as one that never stopped); a write that fails on rank 1 is reported by the next
# call on both ranks, naming rank 1 and its file, and the previous checkpoint stays loadable.
# Usage: background_save_test.sh ACCEL_CLI RESUME_WORKER
set -eu
cli=$1
worker=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# A hang here would be a bug: fail within a minute rather than the default half hour.
ACCEL_TIMEOUT_S=60
export ACCEL_TIMEOUT_S
launch() { "$cli" launch --nproc-per-node 2 --cpu --master-port 0 -- "$worker" "$@"; }

launch save 9 "$work/blocking"
launch background 9 "$work/background"
# Every file but states.safetensors, whose optimizer archive orders its tensors by their addresses in the
# process (LibTorch keys the optimizer state by pointer): that one is checked by resuming from it below.
(cd "$work/blocking" && find . -type f ! -name states.safetensors -o -type f -path "./rank*" | sort) >"$work/files"
test "$(wc -l <"$work/files")" -ge 6
while read -r file; do cmp "$work/blocking/$file" "$work/background/$file"; done <"$work/files"
test ! -e "$work/background.saving"
launch train 18 "$work/straight"
launch resume 9 "$work/background" "$work/resumed"
cmp "$work/straight/model.safetensors" "$work/resumed/model.safetensors"

launch background_fails 9 "$work/kept" 2>"$work/err" || {
  cat "$work/err" >&2
  exit 1
}
for rank in 0 1; do
  grep -q "rank $rank reported: accel_state_wait_for_save: the background save to '$work/kept' failed: rank 1: .*$work/kept.saving/rank1/.*File too large" "$work/err" || {
    echo "rank $rank did not report rank 1's failure:" >&2
    cat "$work/err" >&2
    exit 1
  }
done
test ! -e "$work/kept.saving"
echo "background save: bit-identical to a blocking save; rank 1's failure reported on both ranks"
