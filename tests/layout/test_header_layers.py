"""header_layers.py finds a loop of folders through headers, and none where there is none."""
import importlib.util
import pathlib

spec = importlib.util.spec_from_file_location("header_layers", pathlib.Path(__file__).with_name("header_layers.py"))
header_layers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(header_layers)


def write(root, path, text):
    file = root / path
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(text)


def test_a_loop_through_headers_is_found_and_implementation_files_may_reach_across(tmp_path):
    write(tmp_path, "a/x.hpp", '#include "b/y.hpp"\n')
    write(tmp_path, "b/y.hpp", '#include "c/z.hpp"\n')
    write(tmp_path, "c/z.hpp", "")
    write(tmp_path, "c/z.cpp", '#include "a/x.hpp"\n')  # an implementation file: allowed
    assert header_layers.loops(header_layers.folder_graph(str(tmp_path))) == []
    write(tmp_path, "c/z.hpp", '#include "a/x.hpp"\n')
    assert header_layers.loops(header_layers.folder_graph(str(tmp_path))) == [["a", "b", "c"]]
