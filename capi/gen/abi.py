"""What the generator knows of the C ABI: the declarations of capi/accel/*.h, as read_headers.py reads
them and the emit_*.py modules write them out for each binding."""
from dataclasses import dataclass, field
from typing import Dict, Tuple


class HeaderError(Exception):
    """A header the generator cannot turn into bindings; the message names the header and line."""


# #define constants have no C type, and a binding needs one. Each family takes the type of the values it
# is compared with: dtypes are int32_t (accel_tensor_dtype), the dimension limit size_t (a tensor's ndim);
# the rest (error codes, distributed types, version numbers) int. The first matching prefix wins.
CONSTANT_TYPES = (
    ("ACCEL_DTYPE_", "int32_t"),
    ("ACCEL_TENSOR_MAX_DIMS", "size_t"),
    ("ACCEL_", "int"),
)

# The C scalar types a declaration may use; anything else must be a type the headers declare.
SCALAR_TYPES = ("void", "char", "int", "double", "size_t", "int32_t", "int64_t", "uint64_t")


@dataclass(frozen=True)
class CType:
    """A C type as a declaration spells it: the base type, whether the base is const, and for each `*`
    from the innermost out whether that pointer itself is const (`const char *const *` is
    CType("char", True, (True, False)))."""
    base: str
    const: bool = False
    pointers: Tuple[bool, ...] = ()
    struct: bool = False  # spelled `struct base` (a struct the headers only forward-declare)

    def c(self, name=""):
        """The C spelling, with a declarator name or without: `const char *const *names`."""
        base = ("const " if self.const else "") + ("struct " if self.struct else "") + self.base
        stars = "".join("*const " if const else "*" for const in self.pointers)
        if not stars:
            return f"{base} {name}" if name else base
        return f"{base} {stars}{name}" if name else f"{base} {stars.rstrip()}"

    @property
    def is_void(self):
        return self.base == "void" and not self.pointers


@dataclass(frozen=True)
class Parameter:
    name: str
    type: CType


@dataclass(frozen=True)
class Handle:
    """`typedef struct tag name;`: an opaque handle type, only pointed to."""
    name: str
    tag: str


@dataclass(frozen=True)
class Constant:
    """`#define ACCEL_... <integer>`."""
    name: str
    value: int

    @property
    def type(self):
        return CType(next(c_type for prefix, c_type in CONSTANT_TYPES if self.name.startswith(prefix)))


@dataclass(frozen=True)
class Callback:
    """`typedef RESULT (*name)(PARAMETERS);`."""
    name: str
    result: CType
    parameters: Tuple[Parameter, ...]


@dataclass(frozen=True)
class ForwardStruct:
    """`struct tag;`: a struct a header names without defining it (DLPack's)."""
    tag: str


@dataclass(frozen=True)
class Function:
    name: str
    result: CType
    parameters: Tuple[Parameter, ...]
    nodiscard: bool
    # {model state: error code} from the "Model states: ... -> CODE" sentence of the comment before it.
    model_states: Dict[str, str] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Module:
    """One header: capi/accel/<name>.h, its one-sentence description, its declarations in order."""
    name: str
    description: str
    items: tuple

    @property
    def header(self):
        return f"accel/{self.name}.h"

    def of(self, kind):
        return [item for item in self.items if isinstance(item, kind)]


@dataclass(frozen=True)
class Api:
    """Every module, in the order of the umbrella header capi/accel.h."""
    modules: Tuple[Module, ...]

    def of(self, kind):
        return [item for module in self.modules for item in module.of(kind)]
