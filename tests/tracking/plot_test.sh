#!/usr/bin/env bash
# `accel plot` draws a run's scalars: a PNG of 800 x 250 pixels per scalar (three here), and clear errors
# for a directory without metrics.
set -euo pipefail
accel=$1 write_run=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
"$write_run" "$work" run 0 30
"$accel" plot "$work/run" --out "$work/loss.png"
size=$(/usr/bin/python3 -c '
import struct, sys
data = open(sys.argv[1], "rb").read(24)
assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
print("%dx%d" % struct.unpack(">II", data[16:24]))' "$work/loss.png")
[ "$size" = "800x750" ] || { echo "loss.png is $size, expected 800x750 (three panels)"; exit 1; }
"$accel" plot "$work/run"
[ -s "$work/run/metrics.png" ] || { echo "no default metrics.png"; exit 1; }
if "$accel" plot "$work/nothing" 2>"$work/error"; then echo "plot of a missing run succeeded"; exit 1; fi
grep -q "metrics.jsonl' does not exist" "$work/error" || { cat "$work/error"; exit 1; }
echo "accel plot: $size PNG for 3 scalars; missing run refused"
