#!/usr/bin/env bash
# The shared-memory all-reduce against Gloo's: the same seeded tensors reduced through each transport give
# the same bytes on 2 ranks and agree within 1e-6 relative (norm-wise) on 3 (Gloo's ring sums in another order); no
# segment of the job is left in /dev/shm, after a clean run nor after a rank was SIGKILLed, and `accel
# launch` removes one that a crash left (here a stand-in, made before the job starts).
#   shm_test.sh ACCEL_CLI SHM_WORKER
set -euo pipefail
CLI=${1:?usage: shm_test.sh ACCEL_CLI SHM_WORKER}
WORKER=${2:?usage: shm_test.sh ACCEL_CLI SHM_WORKER}
PYTHON=/usr/bin/python3
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
ports=()

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
launch() {  # launch NPROC TRANSPORT ARGS...
  local nproc=$1 transport=$2 port
  shift 2
  port=$(free_port)
  ports+=("$port")
  if [ "${LEFTOVER:-0}" = 1 ]; then : >"/dev/shm/accel-$port-n0-0123456789abcdef-0"; fi
  ACCEL_INTRA_NODE_TRANSPORT=$transport ACCEL_TIMEOUT_S=30 timeout 120 \
    "$CLI" launch --cpu --master-port "$port" --nproc-per-node "$nproc" -- "$WORKER" "$@"
}

for nproc in 2 3; do
  for transport in gloo shm; do
    mkdir -p "$DIR/$transport.np$nproc"
    launch "$nproc" "$transport" reduce "$DIR/$transport.np$nproc"
  done
  "$PYTHON" - "$DIR/gloo.np$nproc" "$DIR/shm.np$nproc" "$nproc" <<'PY'
import sys
import numpy as np
gloo, shm, nproc = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, dtype in [("float32_sum", np.float32), ("float64_sum", np.float64), ("float32_max", np.float32),
                    ("float16_sum", np.float16)]:
    a = np.fromfile(f"{gloo}/{name}.bin", dtype=dtype)
    b = np.fromfile(f"{shm}/{name}.bin", dtype=dtype)
    assert a.size == b.size and a.size > 0, (name, a.size, b.size)
    if nproc == 2 or name.endswith("_max"):
        same = a.tobytes() == b.tobytes()
        print(f"np{nproc} {name}: {'bit-identical' if same else 'DIFFERENT'} ({a.size} elements)")
        assert same, name
    else:
        wide_a, wide_b = a.astype(np.float64), b.astype(np.float64)
        tolerance = 1e-6 if dtype != np.float16 else 1e-3
        # Norm-wise: an element whose summands cancel out has no meaningful relative error of its own.
        relative = np.linalg.norm(wide_a - wide_b) / np.linalg.norm(wide_a)
        print(f"np{nproc} {name}: relative difference {relative:.3g} (at most {tolerance})")
        assert relative <= tolerance, name
PY
done

if LEFTOVER=1 launch 2 shm kill; then
  echo "shm_test.sh: the job whose rank 1 was killed succeeded" >&2
  exit 1
fi

for port in "${ports[@]}"; do
  left=$(find /dev/shm -maxdepth 1 -name "accel-$port-*" 2>/dev/null)
  if [ -n "$left" ]; then
    echo "shm_test.sh: segments left in /dev/shm: $left" >&2
    exit 1
  fi
done
echo "shm_test.sh: no segment left in /dev/shm for ports ${ports[*]}"
