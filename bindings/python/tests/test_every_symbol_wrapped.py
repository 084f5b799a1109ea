"""Every function the library exports (capi/symbols.txt) is declared in the cdefs and called somewhere in
the package as lib.<name>: a new C function without a Python wrapper fails here."""
import pathlib
import re

from accel import _cdefs

PACKAGE = pathlib.Path(__file__).resolve().parents[1] / "accel"
SYMBOLS = pathlib.Path(__file__).resolve().parents[3] / "capi" / "symbols.txt"


def _exported():
    """The names of capi/symbols.txt, one a line after its `#` comment saying it is generated."""
    return [line.strip() for line in SYMBOLS.read_text().splitlines() if line.strip() and not line.startswith("#")]


def _called_in_package():
    source = "\n".join(path.read_text() for path in PACKAGE.glob("*.py"))
    return set(re.findall(r"\blib\.(accel_\w+)\b", source))


def test_every_exported_symbol_is_declared():
    declared = set(re.findall(r"\b(accel_\w+)\s*\(", _cdefs.CDEF))
    assert [symbol for symbol in _exported() if symbol not in declared] == []


def test_every_exported_symbol_has_a_wrapper():
    called = _called_in_package()
    assert [symbol for symbol in _exported() if symbol not in called] == []


def test_the_package_calls_only_exported_symbols():
    assert sorted(_called_in_package() - set(_exported())) == []
