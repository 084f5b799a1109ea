"""Accelerate's KwargsHandler and the handlers that configure torch code around the library:
AutocastKwargs (Accelerator.autocast), ProfileKwargs (Accelerator.profile), TorchDynamoPlugin; and
FP8RecipeKwargs, whose FP8 engines (TransformerEngine, MS-AMP) accel does not have. Also exported by
accel.utils and accel.utils.dataclasses, where Accelerate has them."""
import copy
import dataclasses
import enum
import os
import typing

from ._environment import clear_environment, str_to_bool
from ._library import lib
from .errors import UnsupportedError


class KwargsHandler:
    """The base of Accelerate's kwargs handlers (dataclasses): to_kwargs() gives the fields whose values
    differ from a default-constructed instance's."""

    def to_dict(self):
        """A deep copy of the fields."""
        return copy.deepcopy(self.__dict__)

    def to_kwargs(self):
        """{field: value} for the fields that differ from the defaults. The defaults are those of an instance
        made with the environment cleared, so that a handler reading ACCELERATE_* variables (as
        TorchDynamoPlugin does) reports the values they set."""
        with clear_environment():
            defaults = self.__class__().to_dict()
        return {key: value for key, value in self.to_dict().items() if defaults[key] != value}


@dataclasses.dataclass
class AutocastKwargs(KwargsHandler):
    """torch.autocast's enabled and cache_enabled for Accelerator.autocast() (and given to
    autocast(autocast_handler=...) for one block: enabled=False runs the block in float32 inside an outer
    autocast)."""

    enabled: bool = True
    cache_enabled: bool = None


# torch.profiler.ProfilerActivity's members by Accelerate's names for them ("mita" is Accelerate's spelling).
_PROFILER_ACTIVITIES = {"cpu": "CPU", "cuda": "CUDA", "xpu": "XPU", "mita": "MTIA", "mtia": "MTIA"}


@dataclasses.dataclass
class ProfileKwargs(KwargsHandler):
    """torch.profiler.profile's settings for Accelerator.profile(): activities ("cpu", "cuda", "xpu",
    "mtia"), schedule_option (torch.profiler.schedule's wait, warmup, active, repeat, skip_first),
    on_trace_ready, record_shapes, profile_memory, with_stack, with_flops, with_modules; output_trace_dir:
    where each process writes its Chrome trace, profile_<process index>.json (None: none written)."""

    activities: typing.Optional[typing.List[str]] = None
    schedule_option: typing.Optional[typing.Dict[str, int]] = None
    on_trace_ready: typing.Optional[typing.Callable] = None
    record_shapes: bool = False
    profile_memory: bool = False
    with_stack: bool = False
    with_flops: bool = False
    with_modules: bool = False
    output_trace_dir: typing.Optional[str] = None

    def _get_profiler_activity(self, activity):
        """torch.profiler.ProfilerActivity for an activity's name; ValueError for a name this torch lacks."""
        import torch
        member = getattr(torch.profiler.ProfilerActivity, _PROFILER_ACTIVITIES.get(activity, ""), None)
        if member is None:
            known = [name for name, attribute in _PROFILER_ACTIVITIES.items()
                     if hasattr(torch.profiler.ProfilerActivity, attribute)]
            raise ValueError(f"Invalid profiler activity: {activity}. Must be one of {known}.")
        return member

    def build(self):
        """A torch.profiler.profile with these settings (not started)."""
        import torch
        activities = None if self.activities is None else [self._get_profiler_activity(a) for a in self.activities]
        schedule = None if self.schedule_option is None else torch.profiler.schedule(**self.schedule_option)
        return torch.profiler.profile(activities=activities, schedule=schedule, on_trace_ready=self.on_trace_ready,
                                      record_shapes=self.record_shapes, profile_memory=self.profile_memory,
                                      with_stack=self.with_stack, with_flops=self.with_flops,
                                      with_modules=self.with_modules)


@dataclasses.dataclass
class FP8RecipeKwargs(KwargsHandler):
    """Accelerate's FP8 recipe (TransformerEngine or MS-AMP). accel has no FP8 training: making one raises
    accel.UnsupportedError."""

    backend: str = None
    use_autocast_during_eval: bool = None
    opt_level: str = None
    margin: int = None
    interval: int = None
    fp8_format: str = None
    amax_history_len: int = None
    amax_compute_algo: str = None
    override_linear_precision: typing.Tuple[bool, bool, bool] = None

    def __post_init__(self):
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
            "FP8RecipeKwargs: accel has no FP8 mixed precision (neither TransformerEngine nor MS-AMP recipes); "
            "use mixed_precision='bf16' or 'fp16'"))


class DynamoBackend(str, enum.Enum):
    """TorchDynamo's backends, by Accelerate's names (accel's Accelerator takes only NO: LibTorch has no
    TorchDynamo)."""

    NO = "NO"
    EAGER = "EAGER"
    AOT_EAGER = "AOT_EAGER"
    INDUCTOR = "INDUCTOR"
    AOT_TS_NVFUSER = "AOT_TS_NVFUSER"
    NVPRIMS_NVFUSER = "NVPRIMS_NVFUSER"
    CUDAGRAPHS = "CUDAGRAPHS"
    OFI = "OFI"
    FX2TRT = "FX2TRT"
    ONNXRT = "ONNXRT"
    TENSORRT = "TENSORRT"
    AOT_TORCHXLA_TRACE_ONCE = "AOT_TORCHXLA_TRACE_ONCE"
    TORCHXLA_TRACE_ONCE = "TORCHXLA_TRACE_ONCE"
    IPEX = "IPEX"
    TVM = "TVM"

    def __str__(self):
        return self.value


def _flag(name):
    """An ACCELERATE_DYNAMO_* variable read as a bool (unset: False)."""
    return str_to_bool(os.environ.get(name, "False")) == 1


@dataclasses.dataclass
class TorchDynamoPlugin(KwargsHandler):
    """Accelerate's torch.compile settings: backend (a DynamoBackend or its name; default
    ACCELERATE_DYNAMO_BACKEND, else "no"), mode (ACCELERATE_DYNAMO_MODE, else "default"), fullgraph
    (ACCELERATE_DYNAMO_USE_FULLGRAPH), dynamic (ACCELERATE_DYNAMO_USE_DYNAMIC), options, disable. accel's
    Accelerator compiles nothing (dynamo_backend "no" only)."""

    backend: DynamoBackend = None
    mode: str = None
    fullgraph: bool = None
    dynamic: bool = None
    options: typing.Any = None
    disable: bool = False

    def __post_init__(self):
        if self.backend is None:
            self.backend = os.environ.get("ACCELERATE_DYNAMO_BACKEND", "no")
        self.backend = DynamoBackend(str(self.backend).upper())
        if self.mode is None:
            self.mode = os.environ.get("ACCELERATE_DYNAMO_MODE", "default")
        if self.fullgraph is None:
            self.fullgraph = _flag("ACCELERATE_DYNAMO_USE_FULLGRAPH")
        if self.dynamic is None:
            self.dynamic = _flag("ACCELERATE_DYNAMO_USE_DYNAMIC")

    def to_dict(self):
        """The fields, backend as its lower-case name ("inductor")."""
        settings = copy.deepcopy(self.__dict__)
        settings["backend"] = settings["backend"].value.lower()
        return settings
