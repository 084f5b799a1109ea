"""Where the package finds libaccel, and how it opens it. Each case runs in a fresh interpreter, since the
library is opened once, at import."""
import os
import pathlib
import shutil
import subprocess
import sys

import accel

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "accel"


def _run(code, cwd, env_changes):
    env = {key: value for key, value in os.environ.items() if key != "ACCEL_LIBRARY"}
    env.update(env_changes)
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_accel_library_names_the_library(tmp_path):
    library = os.environ["ACCEL_LIBRARY"]
    result = _run("import accel, accel._library as l; print(l.path, accel.version())", PACKAGE.parent,
                  {"ACCEL_LIBRARY": library})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == [library, accel.version()]


def test_a_bad_accel_library_is_an_error_not_a_fallback(tmp_path):
    missing = str(tmp_path / "libaccel.so")
    result = _run("import accel", PACKAGE.parent, {"ACCEL_LIBRARY": missing})
    assert result.returncode != 0
    assert "ImportError: cannot load libaccel" in result.stderr and missing in result.stderr


def test_the_library_next_to_the_package_is_found(tmp_path):
    shutil.copytree(PACKAGE, tmp_path / "accel", ignore=shutil.ignore_patterns("__pycache__"))
    beside = tmp_path / "accel" / "libaccel.so.0"
    beside.symlink_to(os.path.realpath(os.environ["ACCEL_LIBRARY"]))
    result = _run("import accel._library as l; print(l.path)", tmp_path, {})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == str(beside)


def test_the_library_is_opened_with_rtld_local():
    # RTLD_LOCAL: its symbols are not in the process's global namespace, where they could interpose.
    code = ("import ctypes, accel._library as l; l.lib.accel_version_major();"
            "print(hasattr(ctypes.CDLL(None), 'accel_version_major'))")
    result = _run(code, PACKAGE.parent, {"ACCEL_LIBRARY": os.environ["ACCEL_LIBRARY"]})
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "False"
