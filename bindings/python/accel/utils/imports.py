"""accel.utils.imports: Accelerate's is_*_available functions, answering for this machine: whether a package
is installed, whether torch has a device. torch is imported only by the functions that ask it about a
device, so `import accel` still works without torch.

The library itself runs on the CPU and, when built with CUDA, on CUDA GPUs: is_cuda_available says
whether accel can use CUDA here; the other device functions say what torch has (as Accelerate's do),
which accel's Accelerator does not use."""
import functools
import importlib.metadata
import importlib.util
import warnings

from ..version import has_feature
from .versions import compare_versions, is_torch_version


def _is_package_available(module, distribution=None):
    """Whether module can be imported and its distribution (module's name unless given) is installed, so a
    stray folder of the same name does not count."""
    try:
        if importlib.util.find_spec(module) is None:
            return False
        importlib.metadata.metadata(distribution or module)
    except (ImportError, ValueError, importlib.metadata.PackageNotFoundError):
        return False
    return True


def _torch():
    """The torch module, or None where torch is not installed."""
    try:
        import torch
    except ImportError:
        return None
    return torch


def _torch_device_available(name, plugin=None):
    """Whether torch has device type name (torch.<name>.is_available()), importing its plug-in package
    first when it comes as one (torch_npu, torch_mlu, torch_musa)."""
    torch = _torch()
    if torch is None or (plugin is not None and not _is_package_available(plugin)):
        return False
    if plugin is not None:
        importlib.import_module(plugin)
    backend = getattr(torch, name, None)
    return backend is not None and bool(backend.is_available())


def is_torch_distributed_available():
    torch = _torch()
    return torch is not None and torch.distributed.is_available()


def is_cuda_available():
    """Whether accel can run on CUDA here: the loaded library was built with CUDA and torch sees a GPU."""
    torch = _torch()
    return has_feature("cuda") and torch is not None and torch.cuda.is_available()


def is_bf16_available(ignore_tpu=False):
    """Whether bf16 mixed precision works on the device accel uses: on CUDA, when the GPU supports it; on
    the CPU always. ignore_tpu: Accelerate's, for TPUs, which accel has not."""
    if is_cuda_available():
        return bool(_torch().cuda.is_bf16_supported())
    return True


def is_mps_available(min_version="1.12"):
    """Whether torch (at least min_version) has Apple's MPS backend, built and usable."""
    torch = _torch()
    return (torch is not None and is_torch_version(">=", min_version) and hasattr(torch.backends, "mps")
            and torch.backends.mps.is_available() and torch.backends.mps.is_built())


@functools.lru_cache
def is_npu_available(check_device=False):
    """Whether torch has Ascend NPUs (through torch_npu). check_device is Accelerate's argument: torch's
    is_available() answers either way (as for the MLU, MUSA and XPU functions)."""
    return _torch_device_available("npu", "torch_npu")


@functools.lru_cache
def is_mlu_available(check_device=False):
    """Whether torch has Cambricon MLUs (through torch_mlu)."""
    return _torch_device_available("mlu", "torch_mlu")


@functools.lru_cache
def is_musa_available(check_device=False):
    """Whether torch has Moore Threads MUSA GPUs (through torch_musa)."""
    return _torch_device_available("musa", "torch_musa")


@functools.lru_cache
def is_xpu_available(check_device=False):
    """Whether torch has Intel XPUs."""
    return _torch_device_available("xpu")


@functools.lru_cache
def is_torch_xla_available(check_is_tpu=False, check_is_gpu=False):
    """Whether torch_xla is installed (and, with check_is_tpu / check_is_gpu, runs on TPUs / GPUs)."""
    if not _is_package_available("torch_xla"):
        return False
    if check_is_tpu or check_is_gpu:
        import torch_xla.runtime
        device_type = torch_xla.runtime.device_type()
        return device_type == "TPU" if check_is_tpu else device_type in ("GPU", "CUDA")
    return True


def is_deepspeed_available():
    """Whether DeepSpeed is installed (accel's DeepSpeedPlugin does ZeRO stages 1 and 2 without it)."""
    return _is_package_available("deepspeed")


def is_transformers_available():
    return _is_package_available("transformers")


def is_datasets_available():
    return _is_package_available("datasets")


def is_peft_available():
    return _is_package_available("peft")


def is_timm_available():
    return _is_package_available("timm")


def is_torchvision_available():
    return _is_package_available("torchvision")


def is_triton_available():
    return _is_package_available("triton")


def is_bnb_available():
    return _is_package_available("bitsandbytes")


def is_transformer_engine_available():
    return _is_package_available("transformer_engine", "transformer-engine")


def is_msamp_available():
    return _is_package_available("msamp", "ms-amp")


def is_fp8_available():
    """Whether an FP8 engine (MS-AMP or TransformerEngine) is installed; accel uses neither."""
    return is_msamp_available() or is_transformer_engine_available()


def is_ipex_available():
    """Whether Intel Extension for PyTorch is installed for this torch (the same major.minor version, as
    IPEX requires; a mismatch warns and answers False, as Accelerate's). accel does not use it."""
    if not (_is_package_available("torch") and _is_package_available("intel_extension_for_pytorch")):
        return False
    torch_version = importlib.metadata.version("torch")
    ipex_version = importlib.metadata.version("intel_extension_for_pytorch")
    if _major_minor(torch_version) != _major_minor(ipex_version):
        warnings.warn(f"Intel Extension for PyTorch {_major_minor(ipex_version)} needs to work with PyTorch "
                      f"{_major_minor(ipex_version)}.*, but PyTorch {torch_version} is found. Please switch to the "
                      "matching version and run again.")
        return False
    return True


def _major_minor(version):
    """The major.minor part of a version: "2.3" of "2.3.1+cpu"."""
    return ".".join(version.split("+")[0].split(".")[:2])


def is_pytest_available():
    return _is_package_available("pytest")


def is_pippy_available():
    """Whether torch has pipeline parallelism (torch.distributed.pipelining, torch >= 2.4)."""
    return _torch() is not None and is_torch_version(">=", "2.4.0")


def is_schedulefree_available():
    return _is_package_available("schedulefree")


def is_import_timer_available():
    return _is_package_available("import_timer")


def is_tensorboard_available():
    return _is_package_available("tensorboard") or _is_package_available("tensorboardX")


def is_wandb_available():
    return _is_package_available("wandb")


def is_comet_ml_available():
    return _is_package_available("comet_ml")


def is_clearml_available():
    return _is_package_available("clearml")


def is_dvclive_available():
    return _is_package_available("dvclive")


def is_mlflow_available():
    return _is_package_available("mlflow") or _is_package_available("mlflow", "mlflow-skinny")


def is_aim_available():
    return _is_package_available("aim")


def is_pandas_available():
    return _is_package_available("pandas")


def is_tqdm_available():
    return _is_package_available("tqdm")


def is_rich_available():
    return _is_package_available("rich")


def is_torchdata_available():
    return _is_package_available("torchdata")


def is_torchdata_stateful_dataloader_available():
    """Whether torchdata with StatefulDataLoader (torchdata >= 0.8.0) is installed."""
    return is_torchdata_available() and compare_versions("torchdata", ">=", "0.8.0")
