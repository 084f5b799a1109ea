#!/usr/bin/env bash
# Run from the project root on a Debian machine set up by ./dev setup, before a run on a GPU machine that
# cannot install anything: copies into .gpu/ (ignored by git) what such a machine lacks to build accel
# against its pip LibTorch: GoogleTest's sources, Gloo's headers (pip's LibTorch does not ship them) and
# yaml-cpp (the CLI reads Accelerate's config files), as its static library with a CMake config of its own;
# and, for a python3 there that lacks them, cffi and pytest (the Python binding's tests on that machine's
# torch 2.x), which check.sh puts on PYTHONPATH only where that python cannot import its own.
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
# For a python that cannot import them: Debian's pytest, and Debian's cffi with its C extension's source
# (the one here is built for CPython 3.11), which check.sh compiles for that python against libffi's
# static archive (Debian's libffi-dev, headers and archive only).
mkdir -p .gpu/pytest .gpu/cffi/libffi
for module in pytest _pytest pluggy iniconfig py py.py; do cp -r "/usr/lib/python3/dist-packages/$module" .gpu/pytest/; done
for module in cffi pycparser ply; do cp -r "/usr/lib/python3/dist-packages/$module" .gpu/cffi/; done
downloads=$(mktemp -d)
trap 'rm -rf "$downloads"' EXIT
mkdir -p "$downloads/lists/partial"
sed 's/^Types: deb$/Types: deb-src/' /etc/apt/sources.list.d/debian.sources > "$downloads/deb-src.sources"
apt_sources=(-o Dir::Etc::SourceList=/dev/null -o Dir::Etc::SourceParts="$downloads" -o Dir::State::Lists="$downloads/lists")
(cd "$downloads" && apt-get "${apt_sources[@]}" update -qq && apt-get "${apt_sources[@]}" source --download-only -qq \
   "python-cffi=$(dpkg-query -W -f='${source:Version}' python3-cffi-backend)" && apt-get download -qq libffi-dev) > /dev/null 2>&1 \
  || { echo "prepare.sh: could not fetch python-cffi's source and libffi-dev from Debian's archive" >&2; exit 1; }
tar xzf "$downloads"/python-cffi_*.orig.tar.gz -C "$downloads"
cp -r "$downloads"/cffi-*/c .gpu/cffi/backend-source
dpkg -x "$downloads"/libffi-dev_*.deb "$downloads/libffi-dev"
cp "$downloads"/libffi-dev/usr/include/x86_64-linux-gnu/ff*.h "$downloads"/libffi-dev/usr/lib/x86_64-linux-gnu/libffi_pic.a .gpu/cffi/libffi/
echo "prepared .gpu/ ($(du -sh .gpu | cut -f1)); on the GPU machine: bash tests/gpu/check.sh"
