"""Accelerate's public names of issue 30 that accel.utils and the Accelerator gained: the kwargs handlers
(KwargsHandler, AutocastKwargs, ProfileKwargs, TorchDynamoPlugin, FP8RecipeKwargs), the is_*_available
checks (is_ipex_available by torch's version), the structure helpers (is_namedtuple, find_device, listify,
pad_input_tensors, convert_outputs_to_fp32), save, check_os_kernel, tqdm, DistributedType's members, the
logger's caller records, trigger_sync_in_backward on one process
(tests/accelerate_scripts/trigger_sync_and_test_ops.py runs it on two), and pickling an Accelerator."""
import collections
import dataclasses
import logging
import pickle
import shutil
import typing
import warnings
from unittest import mock

import pytest
import torch

import accel
from accel import utils
from accel.logging import get_logger
from accel.utils.safetensors_io import load_file


@dataclasses.dataclass
class Handler(utils.KwargsHandler):
    count: int = 0
    flag: bool = False
    scale: float = 3.0


def test_to_kwargs_gives_the_fields_that_differ_from_the_defaults():
    assert Handler().to_kwargs() == {}
    assert Handler(count=2, scale=2.25).to_kwargs() == {"count": 2, "scale": 2.25}
    assert Handler(flag=False).to_kwargs() == {}


def test_torch_dynamo_plugin_reads_accelerates_variables_and_reports_them(monkeypatch):
    monkeypatch.setenv("ACCELERATE_DYNAMO_BACKEND", "inductor")
    monkeypatch.setenv("ACCELERATE_DYNAMO_MODE", "reduce-overhead")
    monkeypatch.setenv("ACCELERATE_DYNAMO_USE_FULLGRAPH", "yes")
    plugin = utils.TorchDynamoPlugin()
    assert plugin.backend is utils.DynamoBackend.INDUCTOR and plugin.fullgraph is True and plugin.dynamic is False
    assert plugin.to_kwargs() == {"backend": "inductor", "mode": "reduce-overhead", "fullgraph": True}
    with pytest.raises(ValueError):
        utils.TorchDynamoPlugin(backend="no-such-backend")


def test_fp8_recipes_are_refused_saying_so():
    with pytest.raises(accel.UnsupportedError, match="no FP8"):
        utils.FP8RecipeKwargs(backend="te")


def test_an_autocast_handler_turns_torch_autocast_off_for_its_block(make_accelerator):
    accelerator = make_accelerator(mixed_precision="bf16")
    a = torch.rand(4, 4)
    with accelerator.autocast():
        assert torch.mm(a, a).dtype == torch.bfloat16
        with accelerator.autocast(autocast_handler=utils.AutocastKwargs(enabled=False)):
            assert torch.mm(a, a).dtype == torch.float32
        assert torch.mm(a, a).dtype == torch.bfloat16
    with pytest.warns(FutureWarning, match="cache_enabled"), accelerator.autocast(cache_enabled=True):
        assert torch.mm(a, a).dtype == torch.bfloat16
    assert accelerator.autocast_handler.cache_enabled is True


def test_the_accelerators_autocast_handler_is_the_default_and_comes_once(make_accelerator):
    off = utils.AutocastKwargs(enabled=False)
    with pytest.raises(ValueError, match="only pass one `AutocastKwargs`"):
        accel.Accelerator(cpu=True, mixed_precision="bf16", kwargs_handlers=[off, utils.AutocastKwargs()])
    accelerator = make_accelerator(mixed_precision="bf16", kwargs_handlers=[off])
    with accelerator.autocast():
        assert torch.mm(torch.ones(2, 2), torch.ones(2, 2)).dtype == torch.float32


def test_profile_follows_the_handlers_schedule_and_writes_each_processs_trace(make_accelerator, tmp_path):
    traces = []
    schedule = {"wait": 1, "warmup": 1, "active": 2, "repeat": 2}
    handler = utils.ProfileKwargs(activities=["cpu"], schedule_option=schedule, on_trace_ready=traces.append,
                                  output_trace_dir=str(tmp_path / "traces"))
    accelerator = make_accelerator(kwargs_handlers=[handler])
    with accelerator.profile() as profiler:
        for _ in range(12):
            torch.ones(3).add_(1)
            profiler.step()
    assert isinstance(profiler, torch.profiler.profile) and len(traces) == 2  # repeat=2 cycles of 4 steps
    assert (tmp_path / "traces" / "profile_0.json").stat().st_size > 0
    with accelerator.profile(utils.ProfileKwargs(activities=["cpu"])) as profiler:
        torch.ones(3).mul_(2)
    assert "CPU time total" in profiler.key_averages().table()
    with pytest.raises(ValueError, match="Invalid profiler activity: tpu"):
        utils.ProfileKwargs(activities=["tpu"]).build()


def test_a_package_counts_as_available_only_with_its_distribution_installed(tmp_path, monkeypatch):
    (tmp_path / "wandb").mkdir()
    (tmp_path / "wandb" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not utils.is_wandb_available()  # a folder of that name is not the package
    (tmp_path / "wandb-0.1.dist-info").mkdir()
    (tmp_path / "wandb-0.1.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: wandb\nVersion: 0.1\n")
    assert utils.is_wandb_available()


def test_the_checks_answer_for_this_machine():
    import importlib.util
    installed = {name: importlib.util.find_spec(name) is not None
                 for name in ("tensorboard", "tensorboardX", "torchdata", "torch_xla", "deepspeed", "tqdm")}
    assert utils.is_tensorboard_available() == (installed["tensorboard"] or installed["tensorboardX"])
    assert utils.is_torch_xla_available() == installed["torch_xla"]
    assert utils.is_deepspeed_available() == installed["deepspeed"]
    assert utils.is_tqdm_available() == installed["tqdm"]
    if not installed["torchdata"]:
        assert not utils.is_torchdata_stateful_dataloader_available()
    assert utils.is_cuda_available() == (accel.has_feature("cuda") and torch.cuda.is_available())
    if not utils.is_cuda_available():
        assert utils.is_bf16_available()  # the CPU's bf16 autocast
    assert utils.is_torch_version(">=", "1.12") and not utils.is_torch_version(">=", "100")
    assert utils.compare_versions("numpy", ">", "1.0")
    with pytest.raises(ValueError, match="must be one of"):
        utils.compare_versions("numpy", "=>", "1.0")


def test_ipex_counts_only_for_the_torch_version_it_is_built_for(tmp_path, monkeypatch):
    import importlib.metadata
    (tmp_path / "intel_extension_for_pytorch").mkdir()
    (tmp_path / "intel_extension_for_pytorch" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert not utils.is_ipex_available()  # a folder of that name is not the package
    torch_minor = ".".join(importlib.metadata.version("torch").split(".")[:2])
    for version, available in (("0.1.0", False), (f"{torch_minor}.100", True)):
        info = tmp_path / f"intel_extension_for_pytorch-{version}.dist-info"
        info.mkdir()
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: intel_extension_for_pytorch\n"
                                       f"Version: {version}\n")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            assert utils.is_ipex_available() == available, version
        assert any("needs to work with PyTorch" in str(w.message) for w in caught) != available
        shutil.rmtree(info)
    assert utils.is_pytest_available()


def test_distributed_type_has_accelerates_members():
    names = ["NO", "MULTI_CPU", "MULTI_GPU", "MULTI_NPU", "MULTI_MLU", "MULTI_MUSA", "MULTI_XPU", "DEEPSPEED",
             "FSDP", "XLA", "MEGATRON_LM"]
    assert [member.name for member in utils.DistributedType] == names
    assert all(member.value == member.name for member in utils.DistributedType)
    assert accel.DistributedType is utils.DistributedType is utils.dataclasses.DistributedType


def test_structure_helpers():
    Point = collections.namedtuple("Point", "x y")

    class Quantised(typing.NamedTuple):
        value: torch.Tensor

    assert utils.is_namedtuple(Point(1, 2)) and utils.is_namedtuple(Quantised(torch.ones(1)))
    assert not utils.is_namedtuple((1, 2)) and not utils.is_namedtuple("xy")
    assert utils.find_device({"a": 1, "b": [2, torch.zeros(1)]}) == torch.device("cpu")
    assert utils.find_device([1, "a"]) is None
    assert utils.listify({"a": torch.tensor([[1.5, 2]], dtype=torch.bfloat16)}) == {"a": [[1.5, 2.0]]}
    for rows, processes, padded in ((1, 2, 2), (3, 2, 4), (4, 3, 6), (3, 4, 4), (61, 6, 66), (13, 6, 18), (6, 2, 6)):
        result = utils.pad_input_tensors(torch.ones(rows, 2), rows, processes)
        assert result.shape == (padded, 2) and result[rows:].eq(0).all() and result[:rows].eq(1).all()
    assert utils.pad_input_tensors(torch.ones(2, 3), 3, 2, dim=1).shape == (2, 4)


def test_outputs_converted_to_fp32_until_the_model_is_unwrapped():
    model = torch.nn.Linear(2, 2)
    model._original_forward = model.forward
    model.forward = utils.convert_outputs_to_fp32(lambda x: model._original_forward(x).bfloat16())
    assert model(torch.ones(1, 2)).dtype == torch.float32
    with pytest.raises(pickle.PicklingError, match="unwrap the model"):
        pickle.dumps(model.forward.__wrapped__)
    unwrapped = utils.extract_model_from_parallel(torch.nn.DataParallel(model), keep_fp32_wrapper=False)
    assert unwrapped is model and "_original_forward" not in vars(model)
    # Where CUDA is, DataParallel moved the model to its first GPU.
    assert pickle.loads(pickle.dumps(model))(torch.ones(1, 2, device=model.weight.device)).dtype == torch.float32


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors is in prototype stage")
def test_a_nested_tensor_is_left_unpadded_with_a_warning(accelerator):
    nested = torch.nested.nested_tensor([torch.tensor([1.0, 2, 3]), torch.tensor([1.0])])
    with pytest.warns(utils.CannotPadNestedTensorWarning):
        assert utils.pad_across_processes(nested) is nested
    with pytest.warns(utils.CannotPadNestedTensorWarning):
        padded = accelerator.pad_across_processes({"nested": nested, "plain": torch.arange(3)})
    assert padded["nested"] is nested and padded["plain"].tolist() == [0, 1, 2]


@pytest.mark.parametrize("release,system,warned", [("5.4.0-35-generic", "Linux", True),
                                                   ("5.15.0-35-generic", "Linux", False),
                                                   ("5.4.0", "Darwin", False)])
def test_check_os_kernel_warns_below_5_5_on_linux(accelerator, caplog, release, system, warned):
    with mock.patch("platform.uname", return_value=mock.Mock(release=release, system=system)):
        utils.check_os_kernel()
    records = [record for record in caplog.records if record.levelno == logging.WARNING]
    assert len(records) == warned
    if warned:
        assert "5.4.0" in records[0].getMessage() and "5.5.0" in records[0].getMessage()


def test_save_writes_torch_files_and_safetensors_without_shared_tensors(accelerator, tmp_path, caplog):
    tied = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    tied.add_module("again", tied[0])
    utils.save({"step": 3}, tmp_path / "state.bin")
    assert torch.load(tmp_path / "state.bin") == {"step": 3}
    with caplog.at_level(logging.WARNING):
        utils.save(tied.state_dict(), tmp_path / "model.safetensors", safe_serialization=True)
    assert ["Removed shared tensor" in record.getMessage() for record in caplog.records] == [True]
    loaded = load_file(tmp_path / "model.safetensors")
    assert sorted(loaded) == ["0.bias", "0.weight"] and torch.equal(loaded["0.weight"], tied[0].weight)


@pytest.mark.skipif(utils.is_tqdm_available(), reason="tqdm is installed: the bar is drawn")
def test_tqdm_needs_the_tqdm_package():
    with pytest.raises(ImportError, match="requires `tqdm`"):
        utils.tqdm(range(3))


def test_log_records_name_the_caller(accelerator, caplog):
    logger = get_logger(__name__)
    logger.warning("here")
    line = test_log_records_name_the_caller.__code__.co_firstlineno + 2
    logger.warning_once("once")
    logger.warning_once("once")
    assert [(r.filename, r.lineno, r.funcName, r.getMessage()) for r in caplog.records] == [
        ("test_utils_names.py", line, "test_log_records_name_the_caller", "here"),
        ("test_utils_names.py", line + 2, "test_log_records_name_the_caller", "once")]


def test_trigger_sync_in_backward_on_one_process_leaves_the_gradients_local(accelerator):
    model = torch.nn.Linear(2, 1)
    reference = torch.nn.Linear(2, 1)
    reference.load_state_dict(model.state_dict())
    model = accelerator.prepare(model)
    x = torch.tensor([[1.0, -2.0]])
    with accelerator.no_sync(model):
        loss = model(x).sum()
    with accelerator.trigger_sync_in_backward(model):
        accelerator.backward(loss)
    reference(x).sum().backward()
    assert torch.equal(model.weight.grad, reference.weight.grad)


def test_an_accelerator_pickles_with_its_prepared_loaders(make_accelerator):
    accelerator = make_accelerator(mixed_precision="bf16", gradient_accumulation_steps=2)
    loader = accelerator.prepare(torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.arange(6.0)),
                                                             batch_size=2))
    copy = pickle.loads(pickle.dumps(accelerator))
    assert (copy.mixed_precision, copy.gradient_accumulation_steps) == ("bf16", 2)
    assert len(copy._dataloaders) == 1 and len(copy._dataloaders[0]) == len(loader) == 3
    assert [batch[0].tolist() for batch in copy._dataloaders[0]] == [batch[0].tolist() for batch in loader]
    del copy  # the process's Accelerator is still the first one
    assert accel.state.AcceleratorState()._accelerator is accelerator


class AutocastProbe(torch.nn.Linear):
    """A Linear that records whether its forward ran under CPU autocast."""

    def forward(self, x):
        self.autocast_was_on = torch.is_autocast_cpu_enabled()
        return super().forward(x)


def test_a_prepared_modules_forward_follows_the_accelerators_autocast_handler(make_accelerator):
    for handlers, autocast_on in (([], True), ([utils.AutocastKwargs(enabled=False)], False)):
        model = make_accelerator(mixed_precision="bf16", kwargs_handlers=handlers).prepare(AutocastProbe(2, 2))
        assert model(torch.ones(1, 2)).dtype == torch.float32 and model.autocast_was_on is autocast_on


def test_the_deprecated_loader_flags_read_back_from_the_dataloader_config(make_accelerator):
    accelerator = make_accelerator()
    assert (accelerator.split_batches, accelerator.dispatch_batches, accelerator.even_batches,
            accelerator.use_seedable_sampler) == (False, None, True, False)
    accel.state.AcceleratorState._reset_state()
    with pytest.warns(FutureWarning, match="dispatch_batches"):
        accelerator = make_accelerator(dispatch_batches=True, use_seedable_sampler=True)
    assert (accelerator.dispatch_batches, accelerator.use_seedable_sampler) == (True, True)


def test_what_prepare_makes_carries_accelerates_prepared_mark(make_accelerator):
    model = torch.nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.zeros(4, 2)), batch_size=2)
    untouched = [1, 2]
    prepared = make_accelerator().prepare(model, optimizer, loader, untouched)
    assert [getattr(value, "_is_accelerate_prepared", False) for value in prepared] == [True, True, True, False]


def test_accelerates_device_variable_chooses_the_device_unless_accels_own_does(monkeypatch):
    monkeypatch.setenv("ACCELERATE_TORCH_DEVICE", "cuda:64")
    with pytest.raises(accel.UnsupportedError, match="device 'cuda:64'"):  # honoured, and refused on this build
        accel.Accelerator()
    monkeypatch.setenv("ACCEL_DEVICE", "cpu")
    with accel.Accelerator() as accelerator:
        assert accelerator.device == "cpu"
        accelerator.end_training()


def test_accels_own_log_records_go_to_accelerates_logger_names(caplog):
    with caplog.at_level(logging.WARNING, logger="accelerate.utils.environment"):
        utils.convert_dict_to_env_variables({"BAD NAME": "1"})
    assert [record.name for record in caplog.records] == ["accelerate.utils.environment"]


def test_verify_device_map_finds_a_model_dispatched_over_several_devices(make_accelerator):
    accelerator = make_accelerator()
    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2))
    assert not accelerator.verify_device_map(model)
    model[1].hf_device_map = {"": "cpu"}
    assert not accelerator.verify_device_map(model)
    model[1].hf_device_map = {"0": "cpu", "1": "disk"}
    assert accelerator.verify_device_map(model)


def test_lomo_backward_needs_a_prepared_lomo_optimizer_and_calls_its_fused_backward(make_accelerator, monkeypatch):
    accelerator = make_accelerator()
    model = torch.nn.Linear(2, 1)
    with pytest.raises(ValueError, match="No LOMO optimizer found"):
        accelerator.lomo_backward(model(torch.ones(1, 2)).sum(), 0.1)
    calls = []

    class Lomo(torch.optim.SGD):  # lomo_optim's class, as far as accel looks at it
        def fused_backward(self, loss, lr):
            calls.append(lr)
            loss.backward()

    monkeypatch.setattr(Lomo, "__module__", "lomo_optim.lomo")
    model, _ = accelerator.prepare(model, Lomo(model.parameters(), lr=0.1))
    accelerator.lomo_backward(model(torch.ones(1, 2)).sum(), 0.05)
    assert calls == [0.05] and model.weight.grad is not None
