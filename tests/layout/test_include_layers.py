"""include_layers.py finds a loop of folders through headers or implementation files, and none where
there is none."""
import importlib.util
import pathlib

spec = importlib.util.spec_from_file_location("include_layers", pathlib.Path(__file__).with_name("include_layers.py"))
include_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(include_layers)


def write(root, path, text):
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def loops(root):
    return include_layers.loops(include_layers.folder_graph(str(root)))


def test_layers_pass_and_a_loop_through_headers_is_found(tmp_path):
    write(tmp_path, "a/x.hpp", '#include "b/y.hpp"\n')
    write(tmp_path, "b/y.hpp", '#include "c/z.hpp"\n')
    write(tmp_path, "c/z.hpp", "")
    write(tmp_path, "a/x.cpp", '#include "c/z.hpp"\n')  # downwards: allowed
    assert loops(tmp_path) == []
    write(tmp_path, "c/z.hpp", '#include "a/x.hpp"\n')
    assert loops(tmp_path) == [["a", "b", "c"]]


def test_an_implementation_file_that_reaches_back_up_is_a_loop_too(tmp_path):
    write(tmp_path, "a/x.hpp", '#include "b/y.hpp"\n')
    write(tmp_path, "b/y.hpp", "")
    write(tmp_path, "b/y.cpp", '#include "a/x.hpp"\n')
    assert loops(tmp_path) == [["a", "b"]]
