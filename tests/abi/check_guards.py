#!/usr/bin/env python3
"""Checks that no extern "C" function body sits outside the exception firewall: each body in capi/shim must
be one statement that hands everything to guarded / guarded_out / guarded_value / read_handle /
release, or to a helper
of the same file whose own body is such a statement.

usage: check_guards.py SHIM_DIR"""
import pathlib
import re
import sys

GUARDS = {"guarded", "guarded_out", "guarded_value", "read_handle", "release"}


def strip_comments_and_strings(code):
    code = re.sub(r"//[^\n]*", "", code)
    code = re.sub(r"/\*.*?\*/", "", code, flags=re.S)
    code = code.replace('extern "C"', "extern_C")
    return re.sub(r'"(\\.|[^"\\])*"', '""', code)


def matching(code, start, open_char, close_char):
    """Index just past the bracket that closes the one at start."""
    depth = 0
    for i in range(start, len(code)):
        if code[i] == open_char:
            depth += 1
        elif code[i] == close_char:
            depth -= 1
            if depth == 0:
                return i + 1
    raise ValueError("unbalanced %s" % open_char)


def functions(code):
    """(is_extern_c, name, body) for every function definition at namespace level."""
    for match in re.finditer(r'^(extern_C\s+)?[\w:<>*&][\w:<>*&\s,]*?\b(\w+)\s*\(', code, re.M):
        close = matching(code, match.end() - 1, "(", ")")
        rest = code[close:]
        brace = re.match(r"\s*(const\s*)?(noexcept\s*)?\{", rest)
        if brace is None:
            continue
        open_at = close + brace.end() - 1
        body = code[open_at + 1:matching(code, open_at, "{", "}") - 1]
        yield bool(match.group(1)), match.group(2), body.strip()


def hands_off(body, allowed):
    """Whether body is a single statement calling one of allowed."""
    call = re.match(r"(return\s+)?(?:accel::capi::)?(\w+)\s*(<[^;{]*?>)?\s*\(", body)
    if call is None or call.group(2) not in allowed:
        return False
    end = matching(body, call.end() - 1, "(", ")")
    return body[end:].strip() == ";"


failures = []
count = 0
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.cpp")):
    code = strip_comments_and_strings(path.read_text())
    found = list(functions(code))
    helpers = {name for extern, name, body in found if not extern and hands_off(body, GUARDS)}
    for extern, name, body in found:
        if not extern:
            continue
        count += 1
        if not hands_off(body, GUARDS | helpers):
            failures.append("%s: %s does not run its body inside the guard" % (path.name, name))
for failure in failures:
    print(failure)
print("%d extern \"C\" functions checked, %d outside the guard" % (count, len(failures)))
sys.exit(1 if failures or count == 0 else 0)
