"""What an option table (option_tables.py) is made of: a Scope per kind of object, an Option per key."""
import math
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Option:
    key: str
    type: type  # bool, int, float or str
    default: object
    doc: str = ""
    choices: tuple = ()  # allowed strings, for str options that are enumerations
    positive: bool = False  # numbers that must be > 0
    maximum: float = math.inf  # floats: the largest value accepted
    above: float = -math.inf  # numbers: bounds the value must lie strictly between
    below: float = math.inf
    comma_list: bool = False  # str options with choices: a comma-separated list of them, possibly empty
    per_handle: bool = False  # state keys each handle has its own value of

    def __post_init__(self):
        if not isinstance(self.default, self.type) or (self.type is int and isinstance(self.default, bool)):
            raise ValueError(f"option {self.key}: default {self.default!r} is not a {self.type.__name__}")
        if self.choices and self.type is not str:
            raise ValueError(f"option {self.key}: only str options have choices")
        if self.comma_list and not self.choices:
            raise ValueError(f"option {self.key}: a comma_list option needs its choices")


@dataclass(frozen=True)
class Scope:
    object: str  # its name in messages
    taken_by: str  # the C function that reads these keys
    area: str  # the folder of src/ whose code reads them
    header: str  # that folder's header declaring `function`
    function: str  # the C++ function returning the scope
    note: str  # the reference's sentence introducing the keys
    options: list = field(default_factory=list)
    from_environment: bool = False  # ACCEL_<KEY> variables apply
    includes: tuple = ()  # names of scopes whose keys this one takes too (a train step takes the loss keys)
