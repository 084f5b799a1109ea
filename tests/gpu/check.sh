#!/usr/bin/env bash
# The GPU check, run on a machine with an NVIDIA GPU from the project root, after tests/gpu/prepare.sh
# made .gpu/ (GoogleTest's sources, Gloo's headers, yaml-cpp). It builds accel against the LibTorch of the python3
# on PATH (pip torch with CUDA, found through torch.utils.cmake_prefix_path), then runs:
#   1. ctest -L gpu: the CUDA tests (tests/gpu), which skip on machines without a GPU (CHECK_GPU_CTEST=0 leaves
#      it out);
#   2. the Python binding's pytest suites (but the install test) on this python's torch 2.x, whose eager
#      models take the post-accumulate-grad hooks that Debian's torch 1.13 lacks (CHECK_PYTHON=0 leaves
#      it out, CHECK_PYTHON_TESTS="tests/test_a.py ..." narrows it); where this python lacks cffi or
#      pytest, .gpu/'s are used, cffi's C extension compiled for it first;
#   3. the demo on the GPU in fp32, bf16 and fp16, counting LibTorch warnings (autocast's deprecation flood);
#   4. ./dev bench gpu: accel's step against plain LibTorch, eager PyTorch and Hugging Face Accelerate;
#   5. the rest of the ctest suite on this build (CHECK_FULL=0 leaves it out), since a CUDA LibTorch differs
#      from Debian's 1.13 in more than CUDA (std::filesystem symbols, API versions, device defaults),
#      but for the tests labelled python_packages (they need Debian's python3 packages).
# Logs go to $OUT (default /tmp/gpu-check). Exit status: 0 when every part passed. On 16 cores the build takes
# about 2 minutes, part 1 one, and the whole Python suite more than its 5-minute limit (each of its launches
# imports torch 2.x), so the whole check no longer fits one 10-minute device call: narrow it.
# For a short device lease: CHECK_TARGETS="t1 t2 ..." builds only those targets (with what they need),
# CHECK_CTEST_ARGS="-R ..." narrows part 5, CHECK_GPU_CTEST=0 / CHECK_FULL=0 / CHECK_BENCH=0 leave parts 1 / 5 / 4
# out, and CHECK_DEADLINE_S=N skips every part that would start more than N seconds after the script did.
set -u
root=$(pwd)
[ -f "$root/tests/gpu/check.sh" ] || { echo "check.sh: run from the project root" >&2; exit 2; }
[ -d "$root/.gpu/googletest" ] || { echo "check.sh: .gpu/ is missing: run tests/gpu/prepare.sh first" >&2; exit 2; }
out=${OUT:-/tmp/gpu-check}
build=${CHECK_BUILD_DIR:-/tmp/accel-gpu-build}
mkdir -p "$out"
exec > >(tee -a "$out/check.log") 2>&1
start=$(date +%s)
failed=()
stamp() { echo "### $* ($(($(date +%s) - start)) s)"; }
# in_time PART: whether PART may still start under CHECK_DEADLINE_S (says so when it may not).
in_time() {
  [ -z "${CHECK_DEADLINE_S:-}" ] || [ $(($(date +%s) - start)) -lt "$CHECK_DEADLINE_S" ] && return 0
  stamp "$1: skipped, past CHECK_DEADLINE_S=$CHECK_DEADLINE_S"
  failed+=("$1 (not run)")
  return 1
}
python=$(command -v python3)
nvidia-smi -L
"$python" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "available", torch.cuda.is_available())'
torch_cmake=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
jobs=$(nproc)

(cmake -S "$root/.gpu/googletest" -B /tmp/googletest-build -G Ninja -DCMAKE_BUILD_TYPE=Release \
   -DCMAKE_INSTALL_PREFIX=/tmp/googletest && cmake --build /tmp/googletest-build -j"$jobs" \
   && cmake --install /tmp/googletest-build) > /tmp/googletest.log 2>&1 || { tail -20 /tmp/googletest.log; exit 1; }
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$torch_cmake;/tmp/googletest;$root/.gpu/yaml-cpp" \
  -DACCEL_GLOO_INCLUDE_DIR="$root/.gpu/glooinc" > "$out/cmake.log" 2>&1 || { tail -30 "$out/cmake.log"; exit 1; }
# shellcheck disable=SC2086  # the targets are words
cmake --build "$build" -j"$jobs" ${CHECK_TARGETS:+--target $CHECK_TARGETS} -- -k 0 > "$out/build.log" 2>&1
rc=$?
stamp "build: rc=$rc, $(grep -c 'warning:' "$out/build.log") compiler warnings"
if [ $rc != 0 ]; then
  grep -E "error|Error" "$out/build.log" | head -60
  exit 1
fi

if [ "${CHECK_GPU_CTEST:-1}" = 1 ] && in_time "ctest -L gpu"; then
  timeout 240 ctest --test-dir "$build" -L gpu --timeout 120 --output-on-failure > "$out/ctest-gpu.log" 2>&1
  rc=$?
  stamp "ctest -L gpu: rc=$rc"
  grep -E "tests passed|\*\*\*|Failed|Skipped|SKIP|\[ figure \]" "$out/ctest-gpu.log" | head -40
  [ $rc = 0 ] || failed+=("ctest -L gpu")
fi

# python_module_path: the PYTHONPATH entries that give $python the cffi and pytest it cannot import itself:
# .gpu/'s copies, cffi's C extension compiled for this python (empty where it has both).
python_module_path() {
  local path=()
  if ! "$python" -c 'import cffi' 2> /dev/null; then
    local extension_dir=/tmp/accel-cffi-backend suffix include
    suffix=$("$python" -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
    include=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    mkdir -p "$extension_dir"
    gcc -O2 -shared -fPIC -w -I"$include" -I"$root/.gpu/cffi/libffi" "$root/.gpu/cffi/backend-source/_cffi_backend.c" \
      "$root/.gpu/cffi/libffi/libffi_pic.a" -o "$extension_dir/_cffi_backend$suffix" || return 1
    path+=("$extension_dir" "$root/.gpu/cffi")
  fi
  "$python" -c 'import pytest' 2> /dev/null || path+=("$root/.gpu/pytest")
  (IFS=:; echo "${path[*]}")
}

if [ "${CHECK_PYTHON:-1}" = 1 ] && in_time "python tests"; then
  if modules=$(python_module_path 2> "$out/python.log") && PYTHONPATH="$modules" "$python" -c 'import cffi, pytest, numpy' \
      >> "$out/python.log" 2>&1; then
    torch_includes=$("$python" -c 'import os; from torch.utils import cpp_extension; print(os.pathsep.join(cpp_extension.include_paths()))')
    # shellcheck disable=SC2086  # the files are words
    (cd "$root/bindings/python" && PYTHONPATH="$root/bindings/python${modules:+:$modules}" ACCEL_LIBRARY="$build/lib/libaccel.so" \
       ACCEL_LAUNCHER="$build/bin/accel" ACCEL_TORCH_INCLUDE_DIRS="$torch_includes" PYTHONDONTWRITEBYTECODE=1 \
       timeout 300 "$python" -m pytest -q -rfE --tb=short -p no:cacheprovider ${CHECK_PYTHON_TESTS:-tests --ignore=tests/test_install.py}) >> "$out/python.log" 2>&1
    rc=$?
    stamp "python tests on torch $("$python" -c 'import torch; print(torch.__version__)')${modules:+ (with $modules)}: rc=$rc"
    grep -E "passed|failed|^FAILED|^ERROR" "$out/python.log" | tail -30
    [ $rc = 0 ] || failed+=("python tests")
  else
    stamp "python tests: skipped, $python cannot import cffi, pytest and numpy: $(tail -1 "$out/python.log")"
  fi
fi

digits=$("$python" -c 'import sklearn, os; print(os.path.join(os.path.dirname(sklearn.__file__), "datasets", "data", "digits.csv.gz"))' 2>/dev/null)
if [ -f "$digits" ]; then
  for precision in no bf16 fp16; do
    in_time "demo $precision" || continue
    dir=/tmp/accel-demo-$precision
    mkdir -p "$dir" && "$python" "$root/examples/make_mlp.py" "$dir/digits_mlp.pt" 64 128 128 10 > /dev/null
    timeout 120 "$build/bin/accel" launch --nproc-per-node 1 --master-port 0 --mixed-precision "$precision" -- \
      "$build/bin/train_digits" --project-dir "$dir" --data "$digits" > "$out/demo-$precision.log" 2>&1
    rc=$?
    warnings=$(grep -ci 'warning' "$out/demo-$precision.log")
    stamp "demo on the GPU in $precision: rc=$rc, $warnings warning lines; $(grep -E 'test accuracy' "$out/demo-$precision.log" | tail -1)"
    { [ $rc = 0 ] && [ "$warnings" -lt 5 ]; } || failed+=("demo $precision")
  done
else
  echo "no digits.csv.gz in this python3's scikit-learn: demo skipped"
fi

if [ "${CHECK_BENCH:-1}" = 1 ] && in_time "bench gpu"; then
  BUILD_DIR="$build" timeout 300 "$root/dev" bench gpu > "$out/bench-gpu.log" 2>&1
  rc=$?
  stamp "bench gpu: rc=$rc"
  grep -E "^gpu|targets|median" "$out/bench-gpu.log" | tail -12
  [ $rc = 0 ] || failed+=("bench gpu")
fi

if [ "${CHECK_FULL:-1}" = 1 ] && in_time "ctest (the rest)"; then
  # shellcheck disable=SC2086  # the arguments are words
  timeout 240 ctest --test-dir "$build" -LE "gpu|python_packages" -j"$((jobs / 2))" --timeout 90 --output-on-failure ${CHECK_CTEST_ARGS:-} > "$out/ctest.log" 2>&1
  rc=$?
  stamp "ctest (the rest): rc=$rc"
  grep -E "tests passed|\*\*\*|Failed|Timeout" "$out/ctest.log" | head -60
  [ $rc = 0 ] || failed+=("ctest")
fi

if [ ${#failed[@]} = 0 ]; then
  stamp "GPU check passed"
else
  stamp "GPU check FAILED: ${failed[*]}"
  exit 1
fi
