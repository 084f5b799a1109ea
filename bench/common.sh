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
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }
