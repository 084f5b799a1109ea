"""accel.test_utils: Accelerate's test utilities (accelerate.test_utils) for tests of accel: skip decorators
and test cases (accel.test_utils.testing), the regression problem (accel.test_utils.training) and the
scripts run on several processes (accel.test_utils.scripts). Needs torch."""
from .testing import (DEFAULT_LAUNCH_COMMAND, AccelerateTestCase, MockingTestCase, TempDirTestCase,
                      are_the_same_tensors, assert_exception, capture_call_output, device_count,
                      execute_subprocess_async, get_launch_command, memory_allocated_func, path_in_accelerate_package,
                      require_bnb, require_cpu, require_cuda, require_huggingface_suite, require_mlu, require_mps,
                      require_multi_device, require_multi_gpu, require_multi_xpu, require_musa, require_non_cpu,
                      require_non_torch_xla, require_non_xpu, require_npu, require_pippy, require_single_device,
                      require_single_gpu, require_single_xpu, require_torch_min_version, require_torchvision,
                      require_tpu, require_transformer_engine, require_xpu, skip, slow, torch_device)
from .training import RegressionDataset, RegressionModel, RegressionModel4XPU

from .scripts import test_ops, test_script, test_sync  # isort: skip (after the names the scripts import from here)

__all__ = ["DEFAULT_LAUNCH_COMMAND", "AccelerateTestCase", "MockingTestCase", "TempDirTestCase", "are_the_same_tensors",
           "assert_exception", "capture_call_output", "device_count", "execute_subprocess_async", "get_launch_command",
           "memory_allocated_func", "path_in_accelerate_package", "require_bnb", "require_cpu", "require_cuda",
           "require_huggingface_suite", "require_mlu", "require_mps", "require_multi_device", "require_multi_gpu",
           "require_multi_xpu", "require_musa", "require_non_cpu", "require_non_torch_xla", "require_non_xpu",
           "require_npu", "require_pippy", "require_single_device", "require_single_gpu", "require_single_xpu",
           "require_torch_min_version", "require_torchvision", "require_tpu", "require_transformer_engine",
           "require_xpu", "skip", "slow", "torch_device", "RegressionDataset", "RegressionModel", "RegressionModel4XPU",
           "test_ops", "test_script", "test_sync"]
