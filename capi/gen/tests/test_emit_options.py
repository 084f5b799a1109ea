"""The option tables as the one source: a default, range or choice written once in option_tables.py reaches
both the C++ table the library checks against and the reference in options.h; a key shared by two objects
with different specs, and a header without the reference's markers, are refused."""
import pytest

from abi import HeaderError
from emit_options import BEGIN, END, OPTIONS_HEADER, emit_tables
from option_model import Option, Scope
from option_tables import SCOPES

HEADER = f"/* the options module.\n{BEGIN}\n * old text\n{END}\n * after. */\n"


def _scope(*options, name="optimizer", area="train", includes=()):
    return Scope(name, f"accel_{name}_new", area=area, header=f"{name}_options.hpp", function=f"{name}_option_scope",
                 note=f"{name.capitalize()} keys.", options=list(options), includes=includes)


def test_one_line_gives_the_cpp_spec_and_the_reference():
    scope = _scope(Option("lr", float, 0.25, "the learning rate", positive=True, maximum=10.0),
                   Option("kind", str, "a", "which", choices=("a", "b")))
    files = emit_tables([scope], HEADER)
    cpp = files["src/train/option_table.cpp"]
    assert '{"lr", OptionType::Double, 0.25, {}, true, 10.0},' in cpp
    assert '{"kind", OptionType::String, std::string("a"), {"a", "b"}, false},' in cpp
    assert "const OptionScope& optimizer_option_scope()" in cpp and '#include "train/optimizer_options.hpp"' in cpp
    header = files[OPTIONS_HEADER]
    assert " *   lr               double > 0, <= 10; default 0.25\n *                    the learning rate\n" in header
    assert ' *   kind             string: "a", "b"; default "a"\n' in header
    assert "old text" not in header and header.endswith(f"{END}\n * after. */\n")


def test_an_included_scope_lends_its_keys_and_per_handle_keys_are_listed():
    loss = _scope(Option("reduction", str, "mean", choices=("mean", "sum")), name="loss")
    step = _scope(Option("max_grad_norm", float, 0.0), name="step", includes=("loss",))
    state = _scope(Option("project_dir", str, "", per_handle=True), name="state", area="distributed")
    files = emit_tables([loss, step, state], HEADER)
    step_table = files["src/train/option_table.cpp"].split("step_option_scope()")[1]
    assert '"max_grad_norm"' in step_table and '"reduction"' in step_table
    assert 'static const std::vector<std::string> keys{"project_dir"};' in files["src/distributed/option_table.cpp"]
    assert "default \"\"; each handle's" in files[OPTIONS_HEADER]


def test_a_key_shared_with_another_spec_is_refused_naming_both_objects():
    first = _scope(Option("eps", float, 1e-8, positive=True))
    second = _scope(Option("eps", float, 1e-6, positive=True), name="scheduler")
    with pytest.raises(HeaderError, match="eps of scheduler differs from eps of optimizer"):
        emit_tables([first, second], HEADER)


def test_a_header_without_the_markers_is_refused():
    with pytest.raises(HeaderError, match="no .*<generated: option keys"):
        emit_tables([_scope(Option("lr", float, 0.1))], "/* no block */\n")


def test_a_default_of_the_wrong_type_is_refused_where_it_is_written():
    with pytest.raises(ValueError, match="option lr: default '0.1' is not a float"):
        Option("lr", float, "0.1")


def test_the_real_tables_cover_every_object_with_unique_keys_within_each():
    assert {scope.object for scope in SCOPES} == {"state", "loader", "model", "optimizer", "scheduler", "loss",
                                                 "train step", "trackers"}
    for scope in SCOPES:
        keys = [option.key for option in scope.options]
        assert len(keys) == len(set(keys)), scope.object
