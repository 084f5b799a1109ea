"""accel.Options, the library's options object: key/value settings handed to constructors.

The keys, their types and defaults are documented in capi/accel/options.h and in each module's header.
The rest of the package builds these from keyword arguments; an Options object of one's own shows the
configuration in effect (dump(): defaults, ACCEL_* environment, values set).
"""
import numbers

import numpy as np

from ._handle import Handle
from ._library import ffi, lib
from .errors import check


class Options(Handle):
    _free = lib.accel_options_free

    def __init__(self, settings=None):
        """settings: a mapping of key to value, applied with update()."""
        out = ffi.new("accel_options_t **")
        check(lib.accel_options_new(out))
        super().__init__(out[0])
        self.update(settings or {})

    def update(self, settings):
        """Sets each key by its Python type: bool, integer, real, or str (the text form, parsed by the key's
        own type, so "true" sets a bool key and "30" an int key); numpy scalars count as their kind. None
        leaves the key as it is."""
        for key, value in settings.items():
            if value is None:
                continue
            if isinstance(value, (bool, np.bool_)):  # before integers: bool is one
                self.set_bool(key, value)
            elif isinstance(value, numbers.Integral):
                self.set_int(key, int(value))
            elif isinstance(value, numbers.Real):
                self.set_double(key, float(value))
            elif isinstance(value, str):
                self.set_text(key, value)
            else:
                raise TypeError(f"option {key!r}: {type(value).__name__} is not a bool, int, float or str")
        return self

    def set_bool(self, key, value):
        check(lib.accel_options_set_bool(self.pointer, key.encode(), int(bool(value))))

    def set_int(self, key, value):
        check(lib.accel_options_set_int(self.pointer, key.encode(), value))

    def set_double(self, key, value):
        check(lib.accel_options_set_double(self.pointer, key.encode(), value))

    def set_string(self, key, value):
        """For string-typed keys only (mixed_precision, device, ...)."""
        check(lib.accel_options_set_string(self.pointer, key.encode(), value.encode()))

    def set_text(self, key, text):
        check(lib.accel_options_set(self.pointer, key.encode(), text.encode()))

    def dump(self):
        """The configuration these options resolve to now, one "key=value (source)" line per key of every
        object; source is default, env (an ACCEL_* variable, state keys only) or set."""
        out = ffi.new("char **")
        check(lib.accel_options_dump(self.pointer, out))
        try:
            return ffi.string(out[0]).decode()
        finally:
            lib.accel_string_free(out[0])


def resolved_value(options, section, key):
    """The text value a key of one object ("state", "loader", ...) resolves to, read from dump(): the
    library has no getter, and dump() is where the environment's part is applied."""
    current = None
    for line in options.dump().splitlines():
        if line.startswith("# "):
            current = line[2:].split(" ", 1)[0]
        elif current == section and line.partition("=")[0] == key:
            return line.partition("=")[2].rsplit(" (", 1)[0]
    raise KeyError(f"{section}.{key}")
