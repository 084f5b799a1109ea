"""accel.Options: typed setters, the text form, and the configuration in effect."""
import pathlib
import re

import numpy as np
import pytest

import accel
from accel.options import resolved_value


def test_values_are_set_by_their_python_type(monkeypatch):
    monkeypatch.setenv("ACCEL_TIMEOUT_S", "99")
    options = accel.Options({"batch_size": np.int64(4), "lr": 0.5, "shuffle": True, "mixed_precision": "bf16",
                             "drop_last": None})
    options.set_string("device", "cpu")
    options.set_text("even_batches", "off")
    dump = options.dump()
    for line in ("batch_size=4 (set)", "lr=0.5 (set)", "shuffle=true (set)", "mixed_precision=bf16 (set)",
                 "device=cpu (set)", "even_batches=false (set)", "drop_last=false (default)", "timeout_s=99 (env)"):
        assert line in dump.splitlines()
    assert resolved_value(options, "loader", "batch_size") == "4"
    with pytest.raises(KeyError):
        resolved_value(options, "state", "batch_size")


def test_a_value_of_the_wrong_type_is_refused():
    with pytest.raises(accel.BadOptionValueError, match="shuffle"):
        accel.Options({"shuffle": 3})
    with pytest.raises(TypeError, match="option 'lr'"):
        accel.Options({"lr": [0.1]})


def test_the_options_header_names_every_key_of_every_object():
    """capi/accel/options.h is the table of every setting: a key added to an object without a line there fails."""
    header = (pathlib.Path(__file__).resolve().parents[3] / "capi" / "accel" / "options.h").read_text()
    keys = [line.partition("=")[0] for line in accel.Options({}).dump().splitlines() if not line.startswith("# ")]
    assert keys and [key for key in keys if not re.search(rf"\b{key}\b", header)] == []
