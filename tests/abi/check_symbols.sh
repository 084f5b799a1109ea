#!/usr/bin/env bash
# The dynamic symbols libaccel exports must be exactly the committed list (its `#` lines are comments).
set -euo pipefail
library=$1 list=$2
actual=$(nm -D --defined-only "$library" | awk '{print $3}' | LC_ALL=C sort)
expected=$(grep -v '^#' "$list" | LC_ALL=C sort)
if [ "$actual" != "$expected" ]; then
  echo "exported symbols differ from $list (< exported, > listed):"
  diff <(echo "$actual") <(echo "$expected") || true
  exit 1
fi
echo "$(echo "$actual" | wc -l) exported symbols match $list"
