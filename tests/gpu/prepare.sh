#!/usr/bin/env bash
# Run from the project root on a Debian machine set up by ./dev setup, before a run on a GPU machine that
# cannot install anything: copies into .gpu/ (ignored by git) what such a machine lacks to build accel
# against its pip LibTorch: GoogleTest's sources and Gloo's headers (pip's LibTorch does not ship them).
# Then, on the GPU machine, from a copy of the tree that includes .gpu/: bash tests/gpu/check.sh
set -euo pipefail
[ -f tests/gpu/check.sh ] || { echo "prepare.sh: run from the project root" >&2; exit 2; }
for needed in /usr/src/googletest /usr/include/gloo; do
  [ -d "$needed" ] || { echo "prepare.sh: $needed is missing: run ./dev setup first (libgtest-dev, libgloo-dev)" >&2; exit 1; }
done
rm -rf .gpu
mkdir -p .gpu/glooinc
cp -r /usr/src/googletest .gpu/googletest
cp -r /usr/include/gloo .gpu/glooinc/
echo "prepared .gpu/ ($(du -sh .gpu | cut -f1)); on the GPU machine: bash tests/gpu/check.sh"
