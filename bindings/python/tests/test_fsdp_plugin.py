"""Accelerate's FullyShardedDataParallelPlugin as accel trains it: its fields and FSDP_* environment read as
Accelerate reads them; FULL_SHARD (Accelerate's default) is ZeRO stage 3, SHARD_GRAD_OP stage 2 and NO_SHARD
data parallelism for every prepared model; the hybrid strategies train as those on one machine and are
refused across several, as the settings accel does not build are, naming them; state_dict_type chooses
whether save_state writes each model whole or in each process's pieces; ACCELERATE_USE_FSDP / ACCELERATE_USE_DEEPSPEED make the plugins from the environment
`accel launch` exports. (The weights under ZeRO: test_accelerate_scripts.py; units: test_torch_sharded.py.)"""
import pytest

import accel
from accel.state import AcceleratorState
from accel.utils import FullyShardedDataParallelPlugin


@pytest.fixture(autouse=True)
def no_state_left(monkeypatch):
    for name in ("ACCELERATE_USE_FSDP", "ACCELERATE_USE_DEEPSPEED", "ACCELERATE_DEEPSPEED_ZERO_STAGE",
                 "FSDP_SHARDING_STRATEGY", "FSDP_OFFLOAD_PARAMS", "FSDP_STATE_DICT_TYPE", "FSDP_AUTO_WRAP_POLICY",
                 "FSDP_TRANSFORMER_CLS_TO_WRAP", "FSDP_MIN_NUM_PARAMS", "FSDP_ACTIVATION_CHECKPOINTING",
                 "FSDP_RESHARD_AFTER_FORWARD", "FSDP_VERSION", "ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE",
                 "ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE"):
        monkeypatch.delenv(name, raising=False)
    AcceleratorState._reset_state()
    yield
    AcceleratorState._reset_state()


def test_the_strategies_map_to_zero_stages():
    assert FullyShardedDataParallelPlugin().options()["zero_stage"] == 3  # FULL_SHARD, Accelerate's default
    assert FullyShardedDataParallelPlugin(sharding_strategy="SHARD_GRAD_OP").options()["zero_stage"] == 2
    assert FullyShardedDataParallelPlugin(sharding_strategy="no_shard").options()["zero_stage"] == 0
    assert FullyShardedDataParallelPlugin(sharding_strategy=2).sharding_strategy == "SHARD_GRAD_OP"  # torch's numbers
    assert FullyShardedDataParallelPlugin(sharding_strategy="3").sharding_strategy == "NO_SHARD"

    class TorchEnumMember:  # what torch.distributed.fsdp.ShardingStrategy.SHARD_GRAD_OP looks like
        name = "SHARD_GRAD_OP"

    assert FullyShardedDataParallelPlugin(sharding_strategy=TorchEnumMember()).options()["zero_stage"] == 2
    with pytest.raises(ValueError, match="sharding_strategy 'SHARD_EVERYTHING' is not one of FULL_SHARD"):
        FullyShardedDataParallelPlugin(sharding_strategy="SHARD_EVERYTHING")


def test_cpu_offload_offloads_each_processs_share(monkeypatch):
    """cpu_offload (True, or torch's CPUOffload with offload_params, or FSDP_OFFLOAD_PARAMS) is the prepare option
    zero_cpu_offload under every strategy that splits the model (ZeRO stages 2 and 3); under NO_SHARD it is
    refused."""

    class CPUOffload:  # torch.distributed.fsdp.CPUOffload's field
        def __init__(self, offload_params):
            self.offload_params = offload_params

    assert FullyShardedDataParallelPlugin(cpu_offload=True).options()["zero_cpu_offload"] is True
    # A flag becomes a CPUOffload, as Accelerate's plugin holds it.
    assert FullyShardedDataParallelPlugin(cpu_offload=True).cpu_offload.offload_params is True
    assert FullyShardedDataParallelPlugin().cpu_offload.offload_params is False
    assert FullyShardedDataParallelPlugin(cpu_offload=CPUOffload(True)).options()["zero_cpu_offload"] is True
    assert FullyShardedDataParallelPlugin(cpu_offload=CPUOffload(False)).options()["zero_cpu_offload"] is False
    for strategy, stage in (("HYBRID_SHARD", 3), ("SHARD_GRAD_OP", 2), ("HYBRID_SHARD_ZERO2", 2)):
        options = FullyShardedDataParallelPlugin(sharding_strategy=strategy, cpu_offload=True).options()
        assert (options["zero_stage"], options["zero_cpu_offload"]) == (stage, True)
    monkeypatch.setenv("FSDP_OFFLOAD_PARAMS", "true")
    assert FullyShardedDataParallelPlugin().options()["zero_cpu_offload"] is True
    assert FullyShardedDataParallelPlugin().cpu_offload.offload_params is True
    with pytest.raises(accel.UnsupportedError, match="cpu_offload with sharding_strategy NO_SHARD"):
        FullyShardedDataParallelPlugin(sharding_strategy="NO_SHARD").options()


def test_deepspeeds_cpu_offload(monkeypatch):
    """offload_param_device / offload_optimizer_device "cpu" (or the variables accel launch exports from a config
    file's deepspeed_config) under stage 3 offload both; offload_optimizer_device under stages 1 and 2 the
    optimizer (ZeRO-Offload); offload_param_device under those, either under stage 0, and other devices are
    refused."""
    assert accel.DeepSpeedPlugin(zero_stage=3).options() == {"zero_stage": 3, "zero_cpu_offload": False}
    for field in ("offload_param_device", "offload_optimizer_device"):
        assert accel.DeepSpeedPlugin(zero_stage=3, **{field: "cpu"}).options()["zero_cpu_offload"] is True
        with pytest.raises(accel.UnsupportedError, match=f"{field} 'cpu' with zero_stage 0"):
            accel.DeepSpeedPlugin(zero_stage=0, **{field: "cpu"}).options()
    for stage in (1, 2):
        assert accel.DeepSpeedPlugin(zero_stage=stage, offload_optimizer_device="cpu").options() == {
            "zero_stage": stage, "zero_cpu_offload": True}
        with pytest.raises(accel.UnsupportedError, match=f"offload_param_device 'cpu' with zero_stage {stage}"):
            accel.DeepSpeedPlugin(zero_stage=stage, offload_param_device="cpu").options()
    with pytest.raises(accel.UnsupportedError, match="offload_param_device 'nvme': accel offloads to the CPU only"):
        accel.DeepSpeedPlugin(zero_stage=3, offload_param_device="nvme").options()
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "3")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_OPTIMIZER_DEVICE", "cpu")
    assert accel.DeepSpeedPlugin().options() == {"zero_stage": 3, "zero_cpu_offload": True}
    # What `accel launch` exports from the deepspeed_config of `accelerate config`'s ZeRO-Offload answers.
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "2")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_OFFLOAD_PARAM_DEVICE", "none")
    assert accel.DeepSpeedPlugin().options() == {"zero_stage": 2, "zero_cpu_offload": True}


def _trained(accelerator, make_optimizer):
    """A small MLP and its optimizer, prepared by accelerator and trained 6 steps with clipping and a save_state /
    load_state round trip after 3; its weights, and the tensors its optimizer's groups step."""
    import tempfile
    import torch
    import torch.nn.functional as F
    torch.manual_seed(0)
    model, optimizer = accelerator.prepare(
        *(lambda module: (module, make_optimizer(module)))(torch.nn.Sequential(
            torch.nn.Linear(6, 131), torch.nn.ReLU(), torch.nn.Linear(131, 3))))
    generator = torch.Generator().manual_seed(1)
    with tempfile.TemporaryDirectory() as folder:
        for step in range(6):
            if step == 3:
                accelerator.save_state(folder)
                accelerator.load_state(folder)
            accelerator.backward(F.cross_entropy(model(torch.randn(8, 6, generator=generator)),
                                                 torch.randint(0, 3, (8,), generator=generator)))
            accelerator.clip_grad_norm_(model.parameters(), 0.05)
            optimizer.step()
            optimizer.zero_grad()
    stepped = [] if isinstance(optimizer, accel.Optimizer) else [
        view for group in optimizer.param_groups for view in group["params"]]
    return {name: value.detach().clone() for name, value in model.state_dict().items()}, stepped, model


@pytest.mark.parametrize("plugin", ["deepspeed", "deepspeed-3", "SHARD_GRAD_OP", "FULL_SHARD"])
def test_offload_on_one_process_steps_host_copies_to_the_same_weights(make_accelerator, plugin):
    """ZeRO-Offload on one process (DeepSpeedPlugin(zero_stage=2, offload_optimizer_device="cpu"), FSDP's
    SHARD_GRAD_OP with cpu_offload): nothing is split, but the optimizer steps the library's host copies of
    the parameters (never their memory), its state beside them, to the weights of a run without offload, bit
    for bit (accel's AdamW and torch's). Stage 3 (DeepSpeed's with offload_param_device="cpu", FSDP's
    FULL_SHARD with cpu_offload) holds the model in the units' host shares too, so that a model larger than the
    device trains on one: the module's parameters have no memory between steps, and its state_dict() gathers
    them (FSDP's FULL_STATE_DICT)."""
    torch = pytest.importorskip("torch")
    offloaded = (accel.DeepSpeedPlugin(zero_stage=2, offload_optimizer_device="cpu") if plugin == "deepspeed"
                 else accel.DeepSpeedPlugin(zero_stage=3, offload_optimizer_device="cpu", offload_param_device="cpu")
                 if plugin == "deepspeed-3" else FullyShardedDataParallelPlugin(sharding_strategy=plugin, cpu_offload=True))
    for make_optimizer in (lambda module: torch.optim.AdamW(module.parameters(), lr=0.01),
                           lambda module: accel.OptimizerSpec("adamw", lr=0.01)):
        expected, _, _ = _trained(make_accelerator(), make_optimizer)
        AcceleratorState._reset_state()
        keyword = "deepspeed_plugin" if plugin.startswith("deepspeed") else "fsdp_plugin"
        weights, stepped, model = _trained(make_accelerator(**{keyword: offloaded}), make_optimizer)
        AcceleratorState._reset_state()
        assert [name for name in expected if not torch.equal(expected[name], weights[name])] == []
        ranges = [(p.data_ptr(), p.data_ptr() + p.numel() * p.element_size()) for p in model.parameters()]
        assert not any(begin <= view.data_ptr() < end for view in stepped for begin, end in ranges), \
            "offloaded, the optimizer steps the parameters' memory"
        if stepped:  # torch's optimizer: every parameter whole, the one process owning each
            assert [view.numel() for view in stepped] == [p.numel() for p in model.parameters()]
        held = [name for name, parameter in model.named_parameters() if parameter.storage().size()]
        sharded = plugin in ("deepspeed-3", "FULL_SHARD")
        assert held == ([] if sharded else [name for name, _ in model.named_parameters()])
        if sharded:
            _loads_whole_values_into_the_shares(torch, model, weights)


def _loads_whole_values_into_the_shares(torch, model, weights):
    """load_state_dict() of whole values into a module whose parameters have no memory (torch alone would write
    through a null pointer): state_dict() gives them back, torch's own errors and missing keys as for any
    module, and the parameters still hold nothing."""
    halved = {name: value * 0.5 for name, value in weights.items()}
    model.load_state_dict(halved)
    assert all(torch.equal(model.state_dict()[name], value) for name, value in halved.items())
    with pytest.raises(RuntimeError, match=r"size mismatch for 0\.weight"):
        model.load_state_dict(dict(halved, **{"0.weight": torch.zeros(2, 2)}))
    assert torch.equal(model.state_dict()["0.weight"], halved["0.weight"]), "a refused value was written"
    assert model.load_state_dict({"0.bias": weights["0.bias"]}, strict=False).missing_keys == [
        "0.weight", "2.weight", "2.bias"]
    assert torch.equal(model.state_dict()["0.bias"], weights["0.bias"])
    assert not any(parameter.storage().size() for parameter in model.parameters())


def test_load_state_dict_reaches_a_unit_gathered_since_a_forward(make_accelerator):
    """The root unit stays gathered after a forward (backward would need it): a load_state_dict() then writes
    the shares and the gathered values, so that the next forward computes with what was loaded."""
    torch = pytest.importorskip("torch")
    accelerator = make_accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD",
                                                                              cpu_offload=True))
    torch.manual_seed(0)
    module, reference = (torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
                         for _ in range(2))
    model = accelerator.prepare(module)
    x = torch.randn(3, 4)
    model(x)
    assert all(parameter.storage().size() for parameter in module.parameters()), "the root unit was released"
    module.load_state_dict(reference.state_dict())
    assert torch.equal(model(x), reference(x))
    AcceleratorState._reset_state()


def test_prepare_lends_the_parameters_memory_to_the_library_and_gives_it_back_on_failure(make_accelerator, monkeypatch):
    """Under stage 3 the module's trainable parameters hold no memory of their own while the library takes the
    units (each unit's goes as it is taken, not at the end of prepare), prepare still shards the values they
    had; a prepare that fails before taking any gives every parameter its values back."""
    torch = pytest.importorskip("torch")
    plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD", cpu_offload=True)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    module[2].bias.requires_grad_(False)  # frozen: never lent
    before = {name: value.clone() for name, value in module.state_dict().items()}
    accelerator = make_accelerator(fsdp_plugin=plugin)
    seen = {}

    def prepare(model, original=accelerator._prepare_host_model):
        seen.update((name, parameter.storage().size()) for name, parameter in module.named_parameters())
        original(model)

    monkeypatch.setattr(accelerator, "_prepare_host_model", prepare)
    model = accelerator.prepare(module)
    assert seen == {"0.weight": 1, "0.bias": 1, "2.weight": 1, "2.bias": 2}
    assert all(torch.equal(model.state_dict()[name], value) for name, value in before.items())
    AcceleratorState._reset_state()
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    before = {name: value.clone() for name, value in module.state_dict().items()}
    accelerator = make_accelerator(fsdp_plugin=plugin)

    def fail(_model):
        raise RuntimeError("prepare failed")

    monkeypatch.setattr(accelerator, "_prepare_host_model", fail)
    with pytest.raises(RuntimeError, match="prepare failed"):
        accelerator.prepare(module)
    assert all(torch.equal(value, before[name]) and value.storage().size() == value.numel()
               for name, value in module.state_dict().items())
    AcceleratorState._reset_state()


@pytest.mark.parametrize("settings, refused", [
    ({"sharding_strategy": "NO_SHARD", "cpu_offload": True}, "cpu_offload"),
    ({"sharding_strategy": "SHARD_GRAD_OP", "activation_checkpointing": True}, "activation_checkpointing"),
    ({"sharding_strategy": "SHARD_GRAD_OP", "mixed_precision_policy": {"param_dtype": "bf16"}}, "mixed_precision_policy"),
])
def test_what_accel_does_not_train_is_refused_by_the_accelerator(settings, refused):
    with pytest.raises(accel.UnsupportedError, match=refused):
        accel.Accelerator(cpu=True, fsdp_plugin=FullyShardedDataParallelPlugin(**settings))


def test_state_dict_type_chooses_how_save_state_writes_the_model(monkeypatch):
    """FULL_STATE_DICT (FSDP1's default): one whole file; SHARDED_STATE_DICT (FSDP2's default) and
    LOCAL_STATE_DICT: each process's pieces. set_state_dict_type changes it for the next save_state, None
    reading FSDP_STATE_DICT_TYPE or the version's default; FSDP2 has no LOCAL_STATE_DICT."""
    assert FullyShardedDataParallelPlugin().options()["checkpoint_model"] == "whole"
    assert FullyShardedDataParallelPlugin(fsdp_version=2).options()["checkpoint_model"] == "sharded"
    assert FullyShardedDataParallelPlugin(state_dict_type=2).state_dict_type == "LOCAL_STATE_DICT"  # torch's numbers
    plugin = FullyShardedDataParallelPlugin(sharding_strategy="SHARD_GRAD_OP", state_dict_type="sharded_state_dict")
    assert plugin.options() == {"zero_stage": 2, "zero_param_dtype": "auto", "zero_reduce_dtype": "auto",
                                "zero_hybrid_shard": False, "zero_cpu_offload": False, "checkpoint_model": "sharded"}
    plugin.set_state_dict_type("FULL_STATE_DICT")
    assert plugin.checkpoint_model() == "whole"
    monkeypatch.setenv("FSDP_STATE_DICT_TYPE", "LOCAL_STATE_DICT")
    plugin.set_state_dict_type()
    assert plugin.state_dict_type == "LOCAL_STATE_DICT" and plugin.checkpoint_model() == "sharded"
    with pytest.raises(ValueError, match="FSDP2 has no LOCAL_STATE_DICT"):
        FullyShardedDataParallelPlugin(fsdp_version=2)
    with pytest.raises(ValueError, match="state_dict_type 'PIECES' is not one of"):
        FullyShardedDataParallelPlugin(state_dict_type="PIECES")


def test_fsdp_version_and_reshard_after_forward_read_as_accelerate_1x_reads_them(monkeypatch):
    plugin = FullyShardedDataParallelPlugin(fsdp_version=2, reshard_after_forward=False)
    assert (plugin.fsdp_version, plugin.reshard_after_forward, plugin.options()["zero_stage"]) == (2, False, 3)
    assert FullyShardedDataParallelPlugin().fsdp_version == 1
    with pytest.raises(ValueError, match="fsdp_version must be 1 or 2"):
        FullyShardedDataParallelPlugin(fsdp_version=3)
    # Under FSDP1, Accelerate 1.x's config files give a sharding strategy as reshard_after_forward.
    plugin = FullyShardedDataParallelPlugin(reshard_after_forward="SHARD_GRAD_OP")
    assert (plugin.sharding_strategy, plugin.reshard_after_forward, plugin.options()["zero_stage"]) == (
        "SHARD_GRAD_OP", True, 2)
    monkeypatch.setenv("FSDP_RESHARD_AFTER_FORWARD", "FULL_SHARD")
    monkeypatch.setenv("FSDP_SHARDING_STRATEGY", "NO_SHARD")  # a strategy given wins
    assert FullyShardedDataParallelPlugin().options()["zero_stage"] == 0
    monkeypatch.setenv("FSDP_VERSION", "2")
    monkeypatch.setenv("FSDP_RESHARD_AFTER_FORWARD", "false")
    plugin = FullyShardedDataParallelPlugin()
    assert (plugin.fsdp_version, plugin.reshard_after_forward) == (2, False)


def test_the_hybrid_strategies_shard_within_each_machine():
    for strategy, stage, hybrid in [("HYBRID_SHARD", 3, True), ("HYBRID_SHARD_ZERO2", 2, True),
                                    ("FULL_SHARD", 3, False), ("SHARD_GRAD_OP", 2, False)]:
        options = FullyShardedDataParallelPlugin(sharding_strategy=strategy).options()
        assert (options["zero_stage"], options["zero_hybrid_shard"]) == (stage, hybrid), strategy


def test_a_mixed_precision_policy_gives_stage_threes_dtypes():
    torch = pytest.importorskip("torch")

    class MixedPrecision:  # torch.distributed.fsdp.MixedPrecision's fields
        param_dtype = torch.bfloat16
        reduce_dtype = None
        buffer_dtype = None

    assert FullyShardedDataParallelPlugin().options() == {"zero_stage": 3, "zero_param_dtype": "auto",
                                                          "zero_reduce_dtype": "auto", "zero_hybrid_shard": False,
                                                          "zero_cpu_offload": False, "checkpoint_model": "whole"}
    # reduce_dtype follows param_dtype when not given, as under FSDP
    plugin = FullyShardedDataParallelPlugin(mixed_precision_policy=MixedPrecision())
    assert plugin.options() == {"zero_stage": 3, "zero_param_dtype": "bf16", "zero_reduce_dtype": "bf16",
                                "zero_hybrid_shard": False, "zero_cpu_offload": False, "checkpoint_model": "whole"}
    plugin = FullyShardedDataParallelPlugin(mixed_precision_policy={"param_dtype": "fp16", "reduce_dtype": torch.float32,
                                                                    "buffer_dtype": "bfloat16"})
    assert plugin.precision() == ("fp16", "fp32", "bf16")
    with pytest.raises(accel.UnsupportedError, match="param_dtype torch.int8 is not bf16, fp16 or fp32"):
        FullyShardedDataParallelPlugin(mixed_precision_policy={"param_dtype": torch.int8}).options()


def test_buffer_dtype_casts_the_floating_buffers_but_batchnorms_for_good():
    """FSDP's buffer_dtype: a floating buffer of another dtype is replaced by a copy in it (one copy for a buffer
    two modules hold); BatchNorm's stay (FSDP keeps them out of mixed precision), integers too; the former
    dtypes come back for a state dict."""
    torch = pytest.importorskip("torch")
    from accel._torch_sharded import cast_buffers
    module = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.BatchNorm1d(3), torch.nn.Module())
    module[0].register_buffer("scale", torch.linspace(0.1, 0.9, 3, dtype=torch.float64))
    module[2].register_buffer("scale", module[0].scale)
    module[2].register_buffer("steps", torch.zeros(2, dtype=torch.int64))
    assert cast_buffers(module, None) == {}
    former = cast_buffers(module, "bf16")
    assert module[0].scale.dtype == torch.bfloat16 and module[2].scale is module[0].scale
    assert former == {id(module[0].scale): torch.float64}
    assert module[1].running_mean.dtype == torch.float32 and module[2].steps.dtype == torch.int64


def test_the_plugin_reads_the_environment_accel_launch_exports(monkeypatch):
    monkeypatch.setenv("FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP")
    monkeypatch.setenv("FSDP_AUTO_WRAP_POLICY", "TRANSFORMER_BASED_WRAP")
    monkeypatch.setenv("FSDP_TRANSFORMER_CLS_TO_WRAP", "Block,Embedding")
    monkeypatch.setenv("FSDP_MIN_NUM_PARAMS", "100")
    plugin = FullyShardedDataParallelPlugin()
    assert (plugin.sharding_strategy, plugin.auto_wrap_policy, plugin.transformer_cls_names_to_wrap,
            plugin.min_num_params, plugin.cpu_offload.offload_params, plugin.state_dict_type) == (
        "SHARD_GRAD_OP", "TRANSFORMER_BASED_WRAP", ["Block", "Embedding"], 100, False, "FULL_STATE_DICT")
    monkeypatch.setenv("FSDP_OFFLOAD_PARAMS", "true")
    assert FullyShardedDataParallelPlugin().cpu_offload.offload_params is True
    assert plugin.reshard_after_forward is True  # Accelerate's default
    monkeypatch.setenv("FSDP_RESHARD_AFTER_FORWARD", "false")
    assert FullyShardedDataParallelPlugin().reshard_after_forward is False


def test_backward_prefetch_reads_as_accelerate_reads_it(monkeypatch):
    class BackwardPrefetch:  # torch's enum, as far as a name goes
        name = "BACKWARD_POST"

    assert FullyShardedDataParallelPlugin().backward_prefetch is None  # Accelerate's NO_PREFETCH
    assert FullyShardedDataParallelPlugin(backward_prefetch=BackwardPrefetch()).backward_prefetch == "BACKWARD_POST"
    assert FullyShardedDataParallelPlugin(backward_prefetch=1).backward_prefetch == "BACKWARD_PRE"
    assert FullyShardedDataParallelPlugin(backward_prefetch="no_prefetch").backward_prefetch is None
    monkeypatch.setenv("FSDP_BACKWARD_PREFETCH", "BACKWARD_PRE")
    monkeypatch.setenv("FSDP_FORWARD_PREFETCH", "true")
    plugin = FullyShardedDataParallelPlugin()
    assert (plugin.backward_prefetch, plugin.forward_prefetch) == ("BACKWARD_PRE", True)
    with pytest.raises(ValueError, match="backward_prefetch 'BACKWARD' is not one of BACKWARD_PRE, BACKWARD_POST"):
        FullyShardedDataParallelPlugin(backward_prefetch="BACKWARD")


def test_the_environment_makes_the_accelerators_plugins(monkeypatch):
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_SHARDING_STRATEGY", "SHARD_GRAD_OP")
    accelerator = accel.Accelerator(cpu=True)
    assert accelerator._model_settings["zero_stage"] == 2
    assert accelerator.state.fsdp_plugin.sharding_strategy == "SHARD_GRAD_OP"
    assert accelerator.state.deepspeed_plugin is None
    AcceleratorState._reset_state()
    monkeypatch.delenv("ACCELERATE_USE_FSDP")
    monkeypatch.setenv("ACCELERATE_USE_DEEPSPEED", "true")
    monkeypatch.setenv("ACCELERATE_DEEPSPEED_ZERO_STAGE", "1")
    accelerator = accel.Accelerator(cpu=True)
    assert accelerator._model_settings["zero_stage"] == 1 and accelerator.state.deepspeed_plugin.zero_stage == 1
    with pytest.raises(ValueError, match="not both"):
        accel.Accelerator(cpu=True, fsdp_plugin=FullyShardedDataParallelPlugin(sharding_strategy="NO_SHARD"))


def test_distributed_type_names_fsdp_and_deepspeed_runs_on_gpus_as_accelerate_does():
    """Accelerate calls a run DEEPSPEED under a DeepSpeedPlugin on a GPU and FSDP under an FSDP plugin on several
    GPUs (is_fsdp2 under fsdp_version 2); on CPU processes it keeps MULTI_CPU (or NO) under either."""
    from accel._accelerator_process import accelerate_distributed_type
    from accel.utils import DistributedType
    fsdp, fsdp2, deepspeed = (FullyShardedDataParallelPlugin(), FullyShardedDataParallelPlugin(fsdp_version=2),
                              accel.DeepSpeedPlugin(zero_stage=3))
    gpus, cpus, one = DistributedType.MULTI_GPU, DistributedType.MULTI_CPU, DistributedType.NO
    assert accelerate_distributed_type(gpus, "cuda:1", None, fsdp) == DistributedType.FSDP
    assert accelerate_distributed_type(one, "cuda:0", None, fsdp) == one
    assert accelerate_distributed_type(gpus, "cuda:0", deepspeed, None) == DistributedType.DEEPSPEED
    assert accelerate_distributed_type(one, "cuda:0", deepspeed, None) == DistributedType.DEEPSPEED
    assert accelerate_distributed_type(gpus, "cuda:0", None, None) == gpus
    for plugins in ((None, fsdp), (deepspeed, None)):
        assert accelerate_distributed_type(cpus, "cpu", *plugins) == cpus
    accelerator = accel.Accelerator(cpu=True, fsdp_plugin=fsdp2)
    assert accelerator.distributed_type == DistributedType.NO and not accelerator.is_fsdp2
    assert not accelerator.state.is_fsdp2


def test_a_deep_copy_of_a_module_with_checkpointed_activations_runs_its_own_weights():
    """activation_checkpointing wraps each wrapped module's forward: a copy.deepcopy of the prepared module (an
    EMA copy, say) must run the copy's weights, not the original's."""
    torch = pytest.importorskip("torch")
    import copy
    plugin = FullyShardedDataParallelPlugin(sharding_strategy="NO_SHARD", activation_checkpointing=True,
                                            auto_wrap_policy="TRANSFORMER_BASED_WRAP",
                                            transformer_cls_names_to_wrap=["Linear"])
    accelerator = accel.Accelerator(cpu=True, fsdp_plugin=plugin)
    torch.manual_seed(0)
    model = accelerator.prepare(torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2)))
    copied = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in copied.parameters():
            parameter.mul_(0.5)
    x = torch.randn(5, 3)
    functional = torch.nn.functional
    expected = functional.linear(torch.tanh(functional.linear(x, copied[0].weight, copied[0].bias)),
                                 copied[2].weight, copied[2].bias)
    assert torch.allclose(copied(x), expected)
    assert not torch.allclose(model(x), expected)
