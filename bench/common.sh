# Sourced by the benchmark scripts: one thread per process on every side, no stray ACCEL_* settings, and
# the helpers that read the programs' "key=value" result lines.

# The machine has 2 cores: every side runs on one thread, so that no side wins by threading. The
# launcher sets cores / processes only when these are unset.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
# The programs' settings come from the programs, not from a stray ACCEL_* variable.
while read -r name; do unset "$name"; done < <(compgen -e | grep '^ACCEL_' || true)

# machine_line: cores, CPU model and load average, for the header of a benchmark's output.
machine_line() {
  echo "$(getconf _NPROCESSORS_ONLN) cores, $(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1), load average $(cut -d' ' -f1-3 /proc/loadavg)"
}
# value LINE KEY: the number after KEY= in LINE.
value() { sed -n "s/.* $2=\([^ ]*\).*/\1/p" <<<" $1"; }
# check_counts PREFIX MIN_ROUNDS: fails unless ROUNDS >= MIN_ROUNDS and STEPS, WARMUP >= 1, naming the
# variables PREFIX_ROUNDS, PREFIX_STEPS and PREFIX_WARMUP they came from.
check_counts() {
  [ "$ROUNDS" -ge "$2" ] || { echo "$1_ROUNDS must be at least $2" >&2; exit 2; }
  if [ "$STEPS" -lt 1 ] || [ "$WARMUP" -lt 1 ]; then
    echo "$1_STEPS and $1_WARMUP must be at least 1" >&2
    exit 2
  fi
}
# result NAME LINE: fails the benchmark when LINE, what side NAME printed, holds no step time.
result() {
  if [ -z "$2" ] || [ -z "$(value "$2" step_ms)" ]; then
    echo "$(basename "$0"): $1 printed no result line" >&2
    exit 1
  fi
}
# make_model PYTHON FILE: examples/make_mlp.py's MLP 784-1024-1024-10 in FILE, written by PYTHON's torch
# unless FILE is newer than the script.
make_model() {
  if [ "$(dirname "${BASH_SOURCE[0]}")/../examples/make_mlp.py" -nt "$2" ]; then
    "$1" "$(dirname "${BASH_SOURCE[0]}")/../examples/make_mlp.py" "$2" 784 1024 1024 10
  fi
}
# check_losses TOLERANCE: reads "GROUP FIRST_LOSS LAST_LOSS", one line per run. Runs of the same group
# trained the same model on the same data for the same steps, so they must start at the same loss and end
# at the same loss (else they did not train the same thing). Prints one "check:" line.
check_losses() {
  awk -v tol="$1" '
    !($1 in first) { first[$1] = $2; last[$1] = $3; order[++n] = $1; next }
    ($2 - first[$1])^2 > tol^2 { bad["first_loss(" $1 ")"] }
    ($3 - last[$1])^2 > tol^2 { bad["last_loss(" $1 ")"] }
    END {
      for (what in bad) disagree = disagree " " what
      if (disagree != "") { print "check: WARNING, the sides disagree on:" disagree; exit }
      line = "check: the sides agree within " tol ":"
      for (i = 1; i <= n; ++i) line = line (i > 1 ? ";" : "") " the " order[i] " sides go from loss " first[order[i]] " to " last[order[i]]
      print line
    }'
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
# median_of "A B C": the median of the numbers of one space-separated string (figures gathered round by round).
median_of() {
  local -a numbers
  read -ra numbers <<<"$1"
  median "${numbers[@]}"
}
# ratio A B: A / B to three decimals.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a / b }'; }
