#!/usr/bin/env python3
"""Fails when C or C++ code of accel uses std::filesystem or includes <filesystem>.

pip's LibTorch (libtorch.so, libtorch_cpu.so) exports its own copies of std::filesystem's symbols. The
dynamic linker finds them before libstdc++'s, so our calls land in LibTorch's copies and crash (every
test that removed its folder with std::filesystem::remove_all segfaulted inside libtorch.so). The
library, the CLI, the tests, the benchmarks, the examples and the bindings use core/files.hpp (POSIX
calls) instead. Comments may name std::filesystem; code may not.

usage: check_no_std_filesystem.py SOURCE_DIR"""
import pathlib
import re
import sys

FOLDERS = ["src", "capi", "tests", "bench", "examples", "bindings"]
SUFFIXES = {".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".hxx", ".inl", ".ipp"}
FORBIDDEN = re.compile(r"\bstd\s*::\s*(experimental\s*::\s*)?filesystem\b|#\s*include\s*<(experimental/)?filesystem>")
# Comments, and the literals in which // or /* is not a comment. A char literal is matched only whole
# ('x', '\n'), so that digit separators (10'000) do not open one.
TOKENS = re.compile(r"//[^\n]*|/\*.*?\*/|\"(?:\\.|[^\"\\\n])*\"|'(?:\\.|[^'\\\n])'", re.S)


def without_comments(code):
    """code with each comment replaced by its line breaks, so that line numbers stay."""
    return TOKENS.sub(lambda m: "\n" * m.group(0).count("\n") if m.group(0)[0] == "/" else m.group(0), code)


def main():
    root = pathlib.Path(sys.argv[1])
    found = []
    for folder in FOLDERS:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix not in SUFFIXES or not path.is_file():
                continue
            code = without_comments(path.read_text(errors="replace"))
            for number, line in enumerate(code.split("\n"), 1):
                if FORBIDDEN.search(line):
                    found.append(f"{path.relative_to(root)}:{number}: {line.strip()}")
    if found:
        print("std::filesystem is used below; pip's LibTorch exports its own std::filesystem symbols, which")
        print("calls resolve into and crash in. Use core/files.hpp (POSIX) instead:")
        print("\n".join(found))
        return 1
    print("no std::filesystem in " + ", ".join(FOLDERS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
