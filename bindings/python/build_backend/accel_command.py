#!python
"""The `accel` command that `pip install bindings/python` puts in the environment's bin directory (the
wheel's scripts; pip writes the installing interpreter in place of the first line's "python"). It runs
the launcher bundled in the installed package, accel/bin/accel (accel launch, accel config, accel env,
...), telling it to run .py programs with this interpreter, the one the package is installed for
(ACCEL_PYTHON, unless it is set already): so `accel launch train.py` runs train.py where `import accel`
finds this package, whether or not the environment is activated.

Standard library only, and the accel package is not imported: the command starts at once."""
import os
import sys


def bundled_launcher():
    """The path of accel/bin/accel in the first accel package on this interpreter's path that has one."""
    for directory in sys.path:
        candidate = os.path.join(directory or os.curdir, "accel", "bin", "accel")
        if os.access(candidate, os.X_OK):
            return candidate
    sys.exit(f"accel: no accel package with its launcher (accel/bin/accel) is on the path of {sys.executable}; "
             "install it again (pip install bindings/python)")


if __name__ == "__main__":
    launcher = bundled_launcher()
    os.environ.setdefault("ACCEL_PYTHON", sys.executable)
    os.execv(launcher, [sys.argv[0], *sys.argv[1:]])
