#!/usr/bin/env python3
"""Checks check_abi.sh itself against doctored copies of the baseline: a function the baseline lacks (one the
library added) passes; a function only the baseline has (one the library removed) fails, as does a
function whose parameter changed type. Exits 77 (skipped) without abidiff.

usage: check_abi_test.py CHECK_ABI_SH LIBRARY HEADERS_DIR BASELINE"""
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile

check, library, headers, baseline = sys.argv[1:5]
if shutil.which("abidiff") is None:
    print("abidiff not found: skipped")
    sys.exit(77)
text = pathlib.Path(baseline).read_text()
NAME = "accel_model_train"
symbol = re.search(r"\n *<elf-symbol name='%s'[^\n]*/>" % NAME, text).group(0)
decl = re.search(r"\n *<function-decl name='%s'.*?</function-decl>" % NAME, text, re.S).group(0)
int64_id = re.search(r"<typedef-decl name='int64_t' [^>]*id='([^']+)'", text).group(1)


# The library's ABI, read from its debug information once; every case compares two abidw files.
work = tempfile.TemporaryDirectory()
current = pathlib.Path(work.name) / "current.abi"
subprocess.run([check, "--update", library, headers, str(current)], check=True, capture_output=True)


def check_with(doctored):
    path = pathlib.Path(work.name) / "baseline.abi"
    path.write_text(doctored)
    run = subprocess.run([check, str(current), headers, str(path)], capture_output=True, text=True)
    return run.returncode, run.stdout + run.stderr


failures = 0


def expect(case, doctored, code, fragment):
    global failures
    got, output = check_with(doctored)
    if got != code or fragment not in output:
        failures += 1
        print("FAIL %s: exit %d (expected %d), output:\n%s" % (case, got, code, output))
    else:
        print("ok   %s" % case)


expect("unchanged", text, 0, "ABI compatible")
expect("a function added by the library", text.replace(symbol, "").replace(decl, ""), 0, "ABI compatible")
gone_symbol, gone_decl = symbol.replace(NAME, "accel_model_gone"), decl.replace(NAME, "accel_model_gone")
expect("a function removed from the library", text.replace(symbol, symbol + gone_symbol).replace(decl, decl + gone_decl), 1,
       "accel_model_gone")
changed = re.sub(r"(<parameter type-id=')[^']+(' name='on')", r"\g<1>%s\2" % int64_id, decl)
expect("a parameter's type changed", text.replace(decl, changed), 1, NAME)
sys.exit(1 if failures else 0)
