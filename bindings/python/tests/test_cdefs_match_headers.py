"""The cdefs (accel/_cdefs.py, generated from the headers by ./dev gen, and the DLPack section of
accel/_dlpack_cdefs.py) compiled in cffi's API mode against capi/accel.h and ATen/dlpack.h, so that a
generator that spells a declaration wrongly, or a DLPack struct that differs from LibTorch's, fails to
compile or to load. That the generated file is the headers' current one is abi.generated_files' check."""
import importlib.util
import itertools
import os
import pathlib
import re

import cffi
import pytest

from accel import _cdefs

CAPI = pathlib.Path(__file__).resolve().parents[3] / "capi"
_module_numbers = itertools.count()


def _drifted(old, new):
    """The sections with one declaration changed."""
    changed = [(name, text.replace(old, new)) for name, text in _cdefs.SECTIONS]
    assert changed != list(_cdefs.SECTIONS), f"{old!r} is not in the cdefs"
    return changed


def _compile(tmp_path, sections):
    """cffi API mode: the sections' cdef against the real headers. Besides cffi's own checks (every
    constant's and enumerator's value, every struct's layout, each raising when read), the accel
    declarations are repeated after the headers: a C compiler refuses a redeclaration whose types differ."""
    cdef = "\n".join(text for _, text in sections)
    redeclared = "\n".join(line for name, text in sections if name.startswith("accel/")
                           for line in text.splitlines() if not line.startswith("#define"))
    library = os.environ["ACCEL_LIBRARY"]
    include_dirs = [str(CAPI)] + [d for d in os.environ.get("ACCEL_TORCH_INCLUDE_DIRS", "").split(os.pathsep) if d]
    ffi = cffi.FFI()
    ffi.cdef(cdef)
    name = f"_accel_cdef_check_{os.getpid()}_{next(_module_numbers)}"
    ffi.set_source(name, '#include "accel.h"\n#include <ATen/dlpack.h>\n' + redeclared,
                   include_dirs=include_dirs,
                   extra_link_args=[library, "-Wl,-rpath," + os.path.dirname(os.path.abspath(library))])
    path = ffi.compile(tmpdir=str(tmp_path))
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _read_constants(module):
    """Reads every constant and enumerator: cffi raises where the compiler disagrees with the cdef."""
    for name in re.findall(r"#define\s+(\w+)", _cdefs.CDEF) + re.findall(r"\b(kDL\w+)\s*=", _cdefs.CDEF):
        getattr(module.lib, name)


def _read_layouts(module):
    """Reads each DLPack struct's size and field offsets: cffi raises where a field's size or offset as
    compiled differs from the cdef (the layout the package builds and reads in ABI mode)."""
    for struct in ("DLDevice", "DLDataType", "DLTensor", "DLManagedTensor"):
        module.ffi.sizeof(struct)
        for field, _ in module.ffi.typeof(struct).fields:
            module.ffi.offsetof(struct, field)


def test_cdefs_compile_and_load_against_the_headers(tmp_path):
    module = _compile(tmp_path, _cdefs.SECTIONS)
    _read_constants(module)
    _read_layouts(module)
    assert module.ffi.string(module.lib.accel_version_string()).decode().startswith(
        f"{module.lib.ACCEL_VERSION_MAJOR}.")


def test_a_prototype_that_drifts_does_not_compile(tmp_path, capfd):
    drifted = _drifted("const char *key, int64_t value", "const char *key, int32_t value")
    with pytest.raises(cffi.VerificationError, match="CompileError"):
        _compile(tmp_path, drifted)
    assert re.search("conflicting types for .accel_options_set_int", capfd.readouterr().err)


def test_a_constant_or_struct_that_drifts_is_caught(tmp_path):
    constant_drifted = _drifted("#define ACCEL_ERR_TIMEOUT -7", "#define ACCEL_ERR_TIMEOUT -70")
    both_drifted = [(name, text.replace("  uint16_t lanes;", "  uint32_t lanes;")) for name, text in constant_drifted]
    module = _compile(tmp_path, both_drifted)
    with pytest.raises(module.ffi.error, match="ACCEL_ERR_TIMEOUT"):
        _read_constants(module)
    with pytest.raises(module.ffi.error, match="DLDataType: wrong size for field 'lanes'"):
        _read_layouts(module)
