"""check_wrappers.py on the real package (no problem) and on copies where one thing went wrong (caught),
including a header whose function gained a parameter, raw.jl regenerated, the wrapper left as it was."""
import pathlib
import shutil
import sys

import pytest

HERE = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[1] / "capi" / "gen"))
import check_wrappers  # noqa: E402
import emit_julia  # noqa: E402
from read_headers import read_api  # noqa: E402

PACKAGE = check_wrappers.DEFAULT_PACKAGE
CAPI = HERE.parents[1] / "capi"


def test_the_package_calls_only_the_raw_layer():
    problems, functions, calls = check_wrappers.check(PACKAGE)
    assert problems == []
    assert calls >= functions > 100


def _package_with(tmp_path, file, old, new):
    copy = tmp_path / "Accel"
    shutil.copytree(PACKAGE, copy)
    source = copy / "src" / file
    text = source.read_text()
    assert old in text, f"{old!r} is not in {file}"
    source.write_text(text.replace(old, new, 1))
    return copy


@pytest.mark.parametrize("file,old,new,expected", [
    ("state.jl", "@check accel_state_shutdown(state)",
     "@check ccall((:accel_state_shutdown, libaccel), Cint, (Ptr{accel_state_t},), state)", "state.jl:"),
    ("state.jl", "@check accel_state_shutdown(state)",
     "@check @ccall libaccel.accel_state_shutdown(state::Ptr{accel_state_t})::Cint", "a ccall of a library symbol"),
    ("state.jl", "accel_state_backend(state)", "accel_state_backends(state)", "accel_state_backends is not a function"),
    ("state.jl", "accel_state_backend(state)", "accel_state_device(state)", "accel_state_backend: raw.jl defines it"),
    ("collectives.jl", "accel_state_broadcast(state, tensor, from_process)", "accel_state_broadcast(state, tensor)",
     "accel_state_broadcast takes 3 arguments, the wrapper passes 2"),
    ("state.jl", '"""Collective teardown', 'const ACCEL_DISTRIBUTED_NO = Cint(0)\n"""Collective teardown',
     "const ACCEL_DISTRIBUTED_NO is raw.jl's"),
    ("options.jl", '"""\n    Options(; key', 'mutable struct accel_options_t end\n"""\n    Options(; key',
     "mutable struct accel_options_t is raw.jl's"),
])
def test_a_wrapper_that_leaves_the_raw_layer_is_caught(tmp_path, file, old, new, expected):
    problems, _, _ = check_wrappers.check(_package_with(tmp_path, file, old, new))
    assert any(expected in problem for problem in problems), problems


def test_calls_in_comments_strings_and_through_pointers_are_not_calls(tmp_path):
    package = _package_with(tmp_path, "state.jl", '"""Collective teardown',
                            '# ccall((:accel_gone, libaccel), Cint, ())\nnote = "accel_gone(1)"\n"""Collective teardown')
    assert check_wrappers.check(package)[0] == []
    assert "ccall(deleter," in (PACKAGE / "src" / "dlpack.jl").read_text()  # allowed, and in the real package


def test_a_parameter_added_to_a_header_fails_until_the_wrapper_passes_it(tmp_path):
    capi = tmp_path / "capi"
    shutil.copytree(CAPI, capi)
    header = capi / "accel" / "options.h"
    header.write_text(header.read_text().replace("const char *key, int64_t value)", "const char *key, int64_t value, int flags)"))
    package = tmp_path / "Accel"
    shutil.copytree(PACKAGE, package)
    (package / "src" / "raw.jl").write_text(emit_julia.emit(read_api(capi))[emit_julia.PATH])
    problems, _, _ = check_wrappers.check(package)
    assert len(problems) == 1 and problems[0].startswith("options.jl:")
    assert problems[0].endswith(": accel_options_set_int takes 4 arguments, the wrapper passes 3")
