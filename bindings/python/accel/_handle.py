"""The base of every class that owns a library handle: freed by close(), by leaving a `with` block, or, as a
fall-back, when the object is garbage-collected. The C ABI makes any free order safe (children keep their
parents alive), so nothing here orders the frees."""


class Handle:
    _free = None  # the accel_<object>_free function, set by each subclass

    def __init__(self, pointer):
        self._pointer = pointer

    @property
    def pointer(self):
        """The live cffi pointer; ValueError once closed (the library would refuse a freed handle anyway,
        but this names the Python object)."""
        if self._pointer is None:
            raise ValueError(f"this {type(self).__name__} is closed")
        return self._pointer

    @property
    def closed(self):
        return self._pointer is None

    def close(self):
        """Frees the handle now; a second call does nothing."""
        pointer, self._pointer = getattr(self, "_pointer", None), None
        if pointer is not None:
            type(self)._free(pointer)

    def __enter__(self):
        return self

    def __exit__(self, *exc_info):
        self.close()

    def __del__(self):
        self.close()
