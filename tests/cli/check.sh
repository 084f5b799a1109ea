# Sourced by the CLI test scripts: `check NAME COMMAND...` runs one check and counts it; `report` prints
# the closing "N passed, M failed" line and exits non-zero when a check failed.
passed=0
failed=0

check() {
  local name=$1
  shift
  if "$@"; then
    echo "ok - $name"
    passed=$((passed + 1))
  else
    echo "FAIL - $name"
    failed=$((failed + 1))
  fi
}

report() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}

# `expect WHAT ACTUAL EXPECTED`: equal, or a line naming both (and the command's stderr, $ERR) and failure.
expect() {
  local what=$1 actual=$2 expected=$3
  [[ $actual == "$expected" ]] && return 0
  printf '  %s: expected [%s], got [%s]\n  stderr: %s\n' "$what" "$expected" "$actual" "$ERR" >&2
  return 1
}

# `expect_contains WHAT TEXT PART`: PART is in TEXT, or a line saying it is not and failure.
expect_contains() {
  local what=$1 text=$2 part=$3
  [[ $text == *"$part"* ]] && return 0
  printf '  %s: [%s] does not contain [%s]\n' "$what" "$text" "$part" >&2
  return 1
}
