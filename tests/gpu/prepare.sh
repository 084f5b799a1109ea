#!/usr/bin/env bash
# Run from the project root on a Debian machine set up by ./dev setup, before a run on a GPU machine that
# cannot install anything: copies into .gpu/ (ignored by git) what such a machine lacks to build accel
# against its pip LibTorch: GoogleTest's sources, Gloo's headers (pip's LibTorch does not ship them) and
# yaml-cpp (the CLI reads Accelerate's config files), as its static library with a CMake config of its own.
# Then, on the GPU machine, from a copy of the tree that includes .gpu/: bash tests/gpu/check.sh
set -euo pipefail
[ -f tests/gpu/check.sh ] || { echo "prepare.sh: run from the project root" >&2; exit 2; }
for needed in /usr/src/googletest /usr/include/gloo /usr/include/yaml-cpp /usr/lib/x86_64-linux-gnu/libyaml-cpp.a; do
  [ -e "$needed" ] || { echo "prepare.sh: $needed is missing: run ./dev setup first (libgtest-dev, libgloo-dev, libyaml-cpp-dev)" >&2; exit 1; }
done
rm -rf .gpu
mkdir -p .gpu/glooinc
cp -r /usr/src/googletest .gpu/googletest
cp -r /usr/include/gloo .gpu/glooinc/
# The static archive, because Debian's CMake config names the shared library by its absolute path.
mkdir -p .gpu/yaml-cpp/include .gpu/yaml-cpp/lib/cmake/yaml-cpp
cp -r /usr/include/yaml-cpp .gpu/yaml-cpp/include/
cp /usr/lib/x86_64-linux-gnu/libyaml-cpp.a .gpu/yaml-cpp/lib/
cat > .gpu/yaml-cpp/lib/cmake/yaml-cpp/yaml-cpp-config.cmake <<'CONFIG'
get_filename_component(_yaml_cpp_root "${CMAKE_CURRENT_LIST_DIR}/../../.." ABSOLUTE)
add_library(yaml-cpp STATIC IMPORTED)
set_target_properties(yaml-cpp PROPERTIES
  IMPORTED_LOCATION "${_yaml_cpp_root}/lib/libyaml-cpp.a"
  INTERFACE_INCLUDE_DIRECTORIES "${_yaml_cpp_root}/include")
CONFIG
echo "prepared .gpu/ ($(du -sh .gpu | cut -f1)); on the GPU machine: bash tests/gpu/check.sh"
