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
