#!/usr/bin/env bash
# The exported ABI against the committed baseline (capi/abi/libaccel.abi, libabigail's abidw output of the
# public headers' functions and types): an added function passes; a removed or changed function or
# variable fails, printing abidiff's report. A change made on purpose updates the baseline in the same
# commit as its CHANGELOG entry:  tests/abi/check_abi.sh --update build/lib/libaccel.so capi/accel capi/abi/libaccel.abi
# Exits 77 (skipped) without abidiff (Debian's abigail-tools, which ./dev installs).
#
# usage: check_abi.sh [--update] LIBRARY HEADERS_DIR BASELINE   (LIBRARY: the .so, or an abidw file of it)
set -euo pipefail
update=""
if [ "${1:-}" = "--update" ]; then update=1; shift; fi
library=${1:?library} headers=${2:?public headers directory} baseline=${3:?baseline}

if ! command -v abidw > /dev/null || ! command -v abidiff > /dev/null; then
  echo "abidw/abidiff not found (apt-get install abigail-tools): ABI check skipped"
  exit 77
fi
# Only what the public headers declare: the handles' C++ insides are not ABI.
abidw_args=(--headers-dir "$headers" --drop-private-types --exported-interfaces-only --no-corpus-path --no-show-locs)
if [ -n "$update" ]; then
  abidw "${abidw_args[@]}" --out-file "$baseline" "$library"
  echo "wrote $baseline"
  exit 0
fi

# LIBRARY may also be an abidw file (tests/abi/check_abi_test.py compares two), which needs no filtering.
abidiff_args=(--exported-interfaces-only)
if [[ "$library" != *.abi ]]; then abidiff_args+=(--headers-dir2 "$headers" --drop-private-types); fi
status=0
report=$(abidiff "${abidiff_args[@]}" "$baseline" "$library") || status=$?
# abidiff's status is a bit field: 1 an error, 2 a usage error, 4 any ABI change (additions too), 8 an
# incompatible one. Additions are allowed, so the summary decides: nothing removed, nothing changed.
if (( status & 3 )); then
  echo "$report"
  echo "abidiff failed (status $status)"
  exit 1
fi
if (( status & 8 )) || grep -Eq '\b[1-9][0-9]* (Removed|Changed)\b' <<< "$report"; then
  echo "$report"
  echo
  echo "The exported ABI changed: the report above lists what was removed or changed against $baseline."
  echo "If that is intended, update the baseline in the same commit as a CHANGELOG entry:"
  echo "  tests/abi/check_abi.sh --update $library $headers $baseline"
  exit 1
fi
echo "ABI compatible with $baseline (additions only, if any)"
