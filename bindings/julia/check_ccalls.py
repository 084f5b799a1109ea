#!/usr/bin/python3
"""Checks the Julia package's ccalls against the C headers, without Julia.

    /usr/bin/python3 bindings/julia/check_ccalls.py [--capi DIR] [--package DIR]

Parses every prototype of capi/accel/*.h and every ccall((:accel_..., libaccel), RET, (TYPES...), ARGS...)
in the package's src/*.jl, and fails (exit 1, one line per problem) unless every function of
capi/symbols.txt is called, and every call names an exported function, has as many types and values as
the prototype has parameters, and spells each parameter and the result as a Julia type that matches the
C type (`accel_state_t *` -> Ptr{accel_state_t}, `accel_state_t **` -> Ptr{Ptr{accel_state_t}} or
Ref{Ptr{accel_state_t}}, `const char *` -> Cstring or Ptr{UInt8}, `int64_t` -> Int64, `size_t` ->
Csize_t, `double` -> Cdouble, `int` -> Cint, `int32_t` -> Int32, a callback typedef -> Ptr{Cvoid}, ...).
It also compares the integer constants the package defines with the headers' macros. The package must
use ccall, whose type tuple is literal; @ccall is reported.
"""
import argparse
import pathlib
import re
import sys

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_CAPI = HERE.parents[1] / "capi"
DEFAULT_PACKAGE = HERE / "Accel"

# Julia spellings of each C base type.
BASE_TYPES = {
    "void": {"Cvoid"},
    "char": {"Cchar", "UInt8", "Int8"},
    "int": {"Cint", "Int32"},
    "int32_t": {"Int32", "Cint"},
    "int64_t": {"Int64"},
    "uint64_t": {"UInt64"},
    "size_t": {"Csize_t"},
    "double": {"Cdouble", "Float64"},
}


# ---- C side ----------------------------------------------------------------------------------------

def _strip_c_comments(text):
    return re.sub(r"/\*.*?\*/", " ", text, flags=re.S)


def _c_statements(text):
    """Declarations (between semicolons) outside preprocessor directives, with the integer macros."""
    statements, constants, pending, continued = [], {}, "", False
    for line in _strip_c_comments(text).splitlines():
        line = line.strip()
        directive = continued or line.startswith("#")
        continued = directive and line.endswith("\\")
        if directive:
            match = re.match(r"#define\s+(ACCEL_\w+)\s+\(?(-?\d+)\)?$", line)
            if match:
                constants[match.group(1)] = int(match.group(2))
            continue
        if line in ('extern "C" {', "}"):
            continue
        pending += " " + line
        while ";" in pending:
            statement, pending = pending.split(";", 1)
            statements.append(" ".join(statement.split()))
    return statements, constants


def _c_type(text):
    """('base', [const of the pointee at each level...]) of a C type without its name."""
    tokens = text.replace("*", " * ").split()
    stars = tokens.index("*") if "*" in tokens else len(tokens)
    base = [token for token in tokens[:stars] if token not in ("const", "struct")]
    if len(base) != 1:
        raise ValueError(f"cannot read the C type {text!r}")
    return base[0], tokens[stars:].count("*")


def _c_parameter(text):
    tokens = text.replace("*", " * ").split()
    return " ".join(tokens[:-1]), tokens[-1]


def read_headers(capi):
    """{function: (result C type, [(parameter C type, name), ...])}, the callback typedef names and the
    integer macros, from the headers the umbrella header includes."""
    functions, callbacks, constants = {}, set(), {}
    umbrella = (capi / "accel.h").read_text()
    for header in re.findall(r'#include "(accel/\w+\.h)"', umbrella):
        statements, header_constants = _c_statements((capi / header).read_text())
        constants.update(header_constants)
        for statement in statements:
            typedef = re.match(r"typedef .*\(\s*\*\s*(\w+)\s*\)", statement)
            if typedef:
                callbacks.add(typedef.group(1))
                continue
            if "ACCEL_API" not in statement:
                continue
            declaration = statement.replace("ACCEL_API", "").replace("ACCEL_NODISCARD", "").strip()
            match = re.match(r"(.*?)\b(accel_\w+)\s*\((.*)\)$", declaration)
            if not match:
                raise ValueError(f"{header}: cannot read {statement!r}")
            result, name, parameters = match.groups()
            parameters = [] if parameters.strip() == "void" else [_c_parameter(p) for p in parameters.split(",")]
            functions[name] = (result.strip(), parameters)
    return functions, callbacks, constants


def julia_spellings(c_type, callbacks, in_result=False):
    """Every Julia type that passes (or returns) a value of this C type correctly."""
    base, depth = _c_type(c_type)
    if base in callbacks:
        inner = {"Ptr{Cvoid}"}
    elif base in BASE_TYPES:
        inner = set(BASE_TYPES[base])
    elif base.startswith("accel_") or base.startswith("DL"):
        inner = {base}
    else:
        raise ValueError(f"no Julia spelling for the C type {c_type!r}")
    outer = inner
    for level in range(depth):
        pointee = inner
        inner = {f"Ptr{{{t}}}" for t in pointee}
        if level == 0 and base == "char":
            inner.add("Cstring")
        # Ref passes a pointer to memory Julia manages: fine for the parameter itself, not inside an array.
        outer = inner | ({f"Ref{{{t}}}" for t in pointee if t != "Cvoid"} if not in_result else set())
    return outer


# ---- Julia side ------------------------------------------------------------------------------------

def _blank_comments_and_strings(text):
    """The text with comments removed and string contents blanked, offsets kept."""
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


def _split_top_level(text):
    parts, depth, current = [], 0, []
    for char in text:
        if char in "([{":
            depth += 1
        elif char in ")]}":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current).strip())
            current = []
        else:
            current.append(char)
    if "".join(current).strip():
        parts.append("".join(current).strip())
    return parts


def _closing(text, open_at):
    depth = 0
    for i in range(open_at, len(text)):
        depth += {"(": 1, ")": -1}.get(text[i], 0)
        if depth == 0:
            return i
    raise ValueError("unbalanced parentheses")


def read_ccalls(package):
    """[(file, line, symbol or None, library, result, [types], values count)] and the @ccall problems."""
    calls, problems = [], []
    for path in sorted((package / "src").glob("*.jl")):
        text = _blank_comments_and_strings(path.read_text())
        for match in re.finditer(r"@ccall\b", text):
            problems.append(f"{path.name}:{text.count(chr(10), 0, match.start()) + 1}: @ccall: use ccall, whose type tuple this check reads")
        for match in re.finditer(r"(?<![\w@.])ccall\(", text):
            close = _closing(text, match.end() - 1)
            arguments = _split_top_level(text[match.end():close])
            line = text.count("\n", 0, match.start()) + 1
            target = re.fullmatch(r"\(\s*:(\w+)\s*,(.*)\)", arguments[0], re.S)
            symbol, library = (target.group(1), target.group(2).strip()) if target else (None, None)
            types_text = arguments[2] if len(arguments) > 2 else ""
            if not (types_text.startswith("(") and types_text.endswith(")")):
                problems.append(f"{path.name}:{line}: ccall's argument types are not a literal tuple: {types_text!r}")
                continue
            types = ["".join(t.split()) for t in _split_top_level(types_text[1:-1])]
            calls.append((path.name, line, symbol, library, "".join(arguments[1].split()), types, len(arguments) - 3))
    return calls, problems


def read_julia_constants(package):
    constants = {}
    for path in sorted((package / "src").glob("*.jl")):
        for name, value in re.findall(r"^const (ACCEL_\w+) = (?:\w+\()?(-?\d+)\)?\s*$", path.read_text(), re.M):
            constants[name] = int(value)
    return constants


# ---- comparison ------------------------------------------------------------------------------------

def _normalise(julia_type):
    return julia_type.replace("Nothing", "Cvoid")


def check(capi, package):
    functions, callbacks, c_constants = read_headers(capi)
    exported = (capi / "symbols.txt").read_text().split()
    calls, problems = read_ccalls(package)
    called = set()
    for file, line, symbol, library, result, types, values in calls:
        where = f"{file}:{line}: {symbol}"
        if symbol is None:
            continue  # a ccall through a function pointer (a DLPack deleter)
        called.add(symbol)
        if library != "libaccel":
            problems.append(f"{where}: the library is not libaccel but {library!r} (strings are blanked here)")
        if symbol not in functions or symbol not in exported:
            problems.append(f"{where}: not a function of capi/symbols.txt and the headers")
            continue
        c_result, c_parameters = functions[symbol]
        if len(types) != len(c_parameters):
            problems.append(f"{where}: {len(types)} argument types, the header has {len(c_parameters)} parameters")
        if values != len(types):
            problems.append(f"{where}: {values} values passed for {len(types)} argument types")
        for index, (julia_type, (c_type, c_name)) in enumerate(zip(types, c_parameters), 1):
            accepted = julia_spellings(c_type, callbacks)
            if _normalise(julia_type) not in accepted:
                problems.append(f"{where}: argument {index} ({c_name}) is {julia_type}, the header says {c_type!r}: "
                                f"one of {', '.join(sorted(accepted))}")
        accepted = julia_spellings(c_result, callbacks, in_result=True)
        if _normalise(result) not in accepted:
            problems.append(f"{where}: returns {result}, the header says {c_result!r}: one of {', '.join(sorted(accepted))}")
    for symbol in exported:
        if symbol not in called:
            problems.append(f"{symbol}: exported but never called by the package")
    julia_constants = read_julia_constants(package)
    for name, value in c_constants.items():
        if julia_constants.get(name, value) != value:
            problems.append(f"{name}: the package says {julia_constants[name]}, the header {value}")
        elif name not in julia_constants:
            problems.append(f"{name}: defined by the header, not by the package")
    return problems, len([call for call in calls if call[2] is not None]), len(exported)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--capi", type=pathlib.Path, default=DEFAULT_CAPI)
    parser.add_argument("--package", type=pathlib.Path, default=DEFAULT_PACKAGE)
    args = parser.parse_args()
    problems, call_count, symbol_count = check(args.capi, args.package)
    for problem in problems:
        print(problem)
    print(f"{call_count} ccalls checked against {symbol_count} exported functions: "
          f"{'ok' if not problems else f'{len(problems)} problems'}")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
