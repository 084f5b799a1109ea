#!/usr/bin/python3
"""Checks, without Julia, that the Julia package's wrappers use the generated raw layer and only it.

    /usr/bin/python3 bindings/julia/check_wrappers.py [--package DIR]

src/raw.jl (written from the headers by ./dev gen) defines a function per C function, the handle types and
the constants. The other files of src/ must not ccall a library symbol themselves (a ccall through a
function pointer, such as a DLPack deleter, is theirs) nor define a handle type or an ACCEL_* constant
again; every accel_* function they call must be one raw.jl defines, called with as many arguments as it
takes (so a parameter added to a header fails here until the wrapper passes it); and every raw function
must be called by some wrapper (a new C function needs a Julia wrapper). Exit 1 with a line per problem.
"""
import argparse
import pathlib
import re
import sys

DEFAULT_PACKAGE = pathlib.Path(__file__).resolve().parent / "Accel"
RAW = "raw.jl"


def blank_comments_and_strings(text):
    """The text with comments and string contents blanked, offsets kept."""
    out, i, n = list(text), 0, len(text)
    while i < n:
        if text.startswith("#=", i):
            end = text.find("=#", i)
            end = n if end < 0 else end + 2
            out[i:end] = [" "] * (end - i)
            i = end
        elif text[i] == "#":
            end = text.find("\n", i)
            end = n if end < 0 else end
            out[i:end] = [" "] * (end - i)
            i = end
        elif text.startswith('"""', i) or text[i] == '"':
            quote = '"""' if text.startswith('"""', i) else '"'
            j = i + len(quote)
            while j < n and not text.startswith(quote, j):
                j += 2 if text[j] == "\\" else 1
            out[i + len(quote):j] = [" "] * (j - i - len(quote))
            i = j + len(quote)
        elif text[i] == "'" and i + 2 < n and (text[i + 2] == "'" or text[i + 1] == "\\"):
            end = text.find("'", i + 2) + 1  # a character literal such as '\0'
            out[i:end] = [" "] * (end - i)
            i = end
        else:
            i += 1
    return "".join(out)


def split_top_level(text):
    """The comma-separated parts of an argument list, outside brackets."""
    parts, depth, current = [], 0, []
    for char in text:
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(char, 0)
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def closing(text, open_at):
    """The index of the parenthesis closing the one at open_at."""
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced parentheses")


def raw_functions(package):
    """{name: number of parameters} of the functions raw.jl defines (`name(a, b) =`)."""
    text = (package / "src" / RAW).read_text()
    return {name: len(split_top_level(parameters))
            for name, parameters in re.findall(r"^(accel_\w+)\(([^)]*)\) =", text, re.M)}


def check(package):
    """(problems, the raw functions, the wrapper calls checked)."""
    raw = raw_functions(package)
    problems, called, calls = [], set(), 0
    for path in sorted((package / "src").glob("*.jl")):
        if path.name == RAW:
            continue
        text = blank_comments_and_strings(path.read_text())

        def where(offset):
            return f"{path.name}:{text.count(chr(10), 0, offset) + 1}"

        for match in re.finditer(r"@ccall\b|(?<![\w@.])ccall\(\s*\(", text):
            problems.append(f"{where(match.start())}: a ccall of a library symbol: call raw.jl's function instead")
        for match in re.finditer(r"^\s*(mutable struct accel_\w+|const ACCEL_\w+)", text, re.M):
            problems.append(f"{where(match.start())}: {match.group(1)} is raw.jl's (generated from the headers)")
        for match in re.finditer(r"(?<![\w.:])(accel_\w+)\(", text):
            name, calls = match.group(1), calls + 1
            if name not in raw:
                problems.append(f"{where(match.start())}: {name} is not a function of raw.jl")
                continue
            called.add(name)
            arguments = split_top_level(text[match.end():closing(text, match.end() - 1)])
            if not any(argument.endswith("...") for argument in arguments) and len(arguments) != raw[name]:
                problems.append(f"{where(match.start())}: {name} takes {raw[name]} arguments, "
                                f"the wrapper passes {len(arguments)}")
    problems += [f"{name}: raw.jl defines it, no wrapper calls it" for name in sorted(set(raw) - called)]
    return problems, len(raw), calls


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--package", type=pathlib.Path, default=DEFAULT_PACKAGE)
    args = parser.parse_args()
    problems, functions, calls = check(args.package)
    for problem in problems:
        print(problem)
    print(f"{calls} wrapper calls of {functions} raw functions checked: "
          f"{'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
