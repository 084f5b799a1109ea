#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs consumers the way users would:
# a C program through pkg-config and a CMake project through find_package(accel).
# CONSUMER_PRELOAD, when set, is preloaded into the consumers: a sanitized libaccel (./dev asan) needs
# its sanitizer runtime loaded first in programs that were built without it.
set -euo pipefail
build=$1 source=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" > /dev/null
libdir=$(dirname "$(find "$prefix" -name accel.pc)")/..
export PKG_CONFIG_PATH=$libdir/pkgconfig
if pkg-config --cflags accel | grep -q torch; then
  echo "accel.pc leaks LibTorch include paths: $(pkg-config --cflags accel)"
  exit 1
fi
cc -std=c99 -Wall -Wextra -Werror "$source/tests/abi/consumer.c" $(pkg-config --cflags --libs accel) -o "$prefix/consumer_pc"
LD_LIBRARY_PATH=$libdir LD_PRELOAD=${CONSUMER_PRELOAD:-} "$prefix/consumer_pc"
cmake -S "$source/tests/abi/cmake_consumer" -B "$prefix/cmake_build" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCONSUMER_SOURCE="$source/tests/abi/consumer.c" > /dev/null
cmake --build "$prefix/cmake_build" > /dev/null
LD_LIBRARY_PATH=$libdir LD_PRELOAD=${CONSUMER_PRELOAD:-} "$prefix/cmake_build/consumer"
echo "pkg-config and find_package consumers built and ran"
