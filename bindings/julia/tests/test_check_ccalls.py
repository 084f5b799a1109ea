"""check_ccalls.py on the real package (no problem) and on copies where one thing drifted (caught)."""
import pathlib
import shutil
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
import check_ccalls  # noqa: E402

CAPI = check_ccalls.DEFAULT_CAPI
PACKAGE = check_ccalls.DEFAULT_PACKAGE


def test_the_package_matches_the_headers():
    problems, calls, symbols = check_ccalls.check(CAPI, PACKAGE)
    assert problems == []
    assert calls >= symbols > 100


def _drifted_package(tmp_path, file, old, new):
    copy = tmp_path / "Accel"
    shutil.copytree(PACKAGE, copy)
    source = copy / "src" / file
    text = source.read_text()
    assert old in text, f"{old!r} is not in {file}"
    source.write_text(text.replace(old, new, 1))
    return copy


def _problems(tmp_path, file, old, new):
    problems, _, _ = check_ccalls.check(CAPI, _drifted_package(tmp_path, file, old, new))
    return problems


@pytest.mark.parametrize("file,old,new,expected", [
    ("options.jl", "(Ptr{accel_options_t}, Cstring, Int64), options, key, value",
     "(Ptr{accel_options_t}, Cstring, Int32), options, key, value", "accel_options_set_int: argument 3 (value) is Int32"),
    ("options.jl", "(Ptr{Ptr{accel_options_t}},), out", "(Ptr{accel_options_t},), out",
     "accel_options_new: argument 1 (out) is Ptr{accel_options_t}"),
    ("collectives.jl", "(Ptr{accel_state_t}, Ptr{accel_tensor_t}, Int32), state, tensor, from_process",
     "(Ptr{accel_state_t}, Ptr{accel_tensor_t}), state, tensor, from_process", "accel_state_broadcast: 2 argument types"),
    ("collectives.jl", "(Ptr{accel_state_t}, Ptr{accel_tensor_t}, Int32), state, tensor, from_process",
     "(Ptr{accel_state_t}, Ptr{accel_tensor_t}, Int32), state, tensor", "accel_state_broadcast: 2 values passed for 3"),
    ("tensor.jl", "(:accel_tensor_numel, libaccel), Int64", "(:accel_tensor_numel, libaccel), Csize_t",
     "accel_tensor_numel: returns Csize_t"),
    ("state.jl", ":accel_state_backend,", ":accel_state_backends,", "accel_state_backends: not a function"),
    ("state.jl", ":accel_state_backend,", ":accel_state_backends,", "accel_state_backend: exported but never called"),
    ("loader.jl", "(:accel_dataset_from_callback, libaccel), Cint, (Ptr{Ptr{accel_dataset_t}}, Int64, Ptr{Cvoid}",
     "(:accel_dataset_from_callback, libaccel), Cint, (Ptr{Ptr{accel_dataset_t}}, Int64, Cint", "argument 3 (get_item) is Cint"),
    ("common.jl", "ACCEL_ERR_TIMEOUT = Cint(-7)", "ACCEL_ERR_TIMEOUT = Cint(-70)", "ACCEL_ERR_TIMEOUT: the package says -70"),
    ("model.jl", "(:accel_model_load, libaccel)", "(:accel_model_load, \"libaccel.so\")", "the library is not libaccel"),
    ("train.jl", "accumulate!(state::State) = @check ccall((:accel_state_accumulate, libaccel), Cint, (Ptr{accel_state_t},), state)",
     "accumulate!(state::State) = @check @ccall libaccel.accel_state_accumulate(state::Ptr{accel_state_t})::Cint",
     "@ccall: use ccall"),
])
def test_drift_in_the_package_is_caught(tmp_path, file, old, new, expected):
    problems = _problems(tmp_path, file, old, new)
    assert any(expected in problem for problem in problems), problems


def test_drift_in_a_header_is_caught(tmp_path):
    capi = tmp_path / "capi"
    shutil.copytree(CAPI, capi)
    header = capi / "accel" / "options.h"
    header.write_text(header.read_text().replace("const char *key, int64_t value", "const char *key, int32_t value"))
    problems, _, _ = check_ccalls.check(capi, PACKAGE)
    assert any("accel_options_set_int: argument 3 (value) is Int64" in problem for problem in problems), problems


def test_c_types_have_their_julia_spellings():
    callbacks = {"accel_get_item_fn"}
    assert check_ccalls.julia_spellings("accel_state_t *", callbacks) == {"Ptr{accel_state_t}", "Ref{accel_state_t}"}
    assert "Ref{Ptr{accel_state_t}}" in check_ccalls.julia_spellings("accel_state_t **", callbacks)
    assert {"Cstring", "Ptr{UInt8}"} <= check_ccalls.julia_spellings("const char *", callbacks)
    assert "Ptr{Ptr{UInt8}}" in check_ccalls.julia_spellings("const char *const *", callbacks)
    assert "Ptr{Ref{UInt8}}" not in check_ccalls.julia_spellings("const char *const *", callbacks)
    assert check_ccalls.julia_spellings("accel_get_item_fn", callbacks) == {"Ptr{Cvoid}"}
    assert check_ccalls.julia_spellings("size_t", callbacks) == {"Csize_t"}
    assert check_ccalls.julia_spellings("const int64_t *", callbacks, in_result=True) == {"Ptr{Int64}"}
