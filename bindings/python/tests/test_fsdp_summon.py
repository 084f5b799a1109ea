"""Accelerator.summon_full_params (FSDP's) on a module sharded by zero_stage 3, one offloaded process
(accel._torch_sharded_state_dict): the whole parameters for a with-block, written back into the shares, under
a mixed precision policy in their own dtype, and training unchanged by a block between its backwards. Two
processes: fsdp_device_worker.py (test_fsdp_on_a_device.py)."""
import copy

import pytest

import accel
from accel.state import AcceleratorState
from accel.utils import FullyShardedDataParallelPlugin

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("fresh_state")


def test_summon_full_params_gathers_the_units_and_writes_back_what_the_block_changed(make_accelerator):
    """Accelerator.summon_full_params (FSDP's): inside the block the parameters hold their whole values; with
    writeback what it changed is in the shares afterwards, without it nothing; the units released either way;
    a forward inside refused; rank0_only with writeback, FSDP's ValueError; a model not sharded runs the block
    as it is."""
    accelerator = make_accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(
        sharding_strategy="FULL_SHARD", cpu_offload=True, auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20))
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    before = {name: value.clone() for name, value in module.state_dict().items()}
    model = accelerator.prepare(module)
    with accelerator.summon_full_params(model), torch.no_grad():
        assert all(torch.equal(parameter, before[name]) for name, parameter in module.named_parameters())
        with accelerator.summon_full_params(model):  # nested: nothing more
            pass
        assert all(parameter.storage().size() for parameter in module.parameters()), "the nested block released"
        module[0].weight.mul_(2)
        with pytest.raises(RuntimeError, match="a forward inside summon_full_params"):
            model(torch.ones(1, 4))
    assert not any(parameter.storage().size() for parameter in module.parameters())
    assert torch.equal(model.state_dict()["0.weight"], before["0.weight"] * 2)
    with accelerator.summon_full_params(model, writeback=False), torch.no_grad():
        module[2].bias.add_(1)
    assert torch.equal(model.state_dict()["2.bias"], before["2.bias"])
    with pytest.raises(ValueError, match="rank0_only=True with writeback=True"):
        accelerator.summon_full_params(model, rank0_only=True)
    AcceleratorState._reset_state()
    plain = torch.nn.Linear(2, 2)
    with make_accelerator().summon_full_params(plain):
        assert plain.weight.storage().size() == 4
    AcceleratorState._reset_state()
    AcceleratorState._reset_state()


def test_summon_full_params_under_a_mixed_precision_policy_holds_the_exact_values(make_accelerator):
    """As FSDP summons full precision parameters: inside the block the parameters hold their fp32 values, not
    param_dtype's rounding of them, and a change bf16 would round away is written back; after it they are
    bf16 again, and backward still hands each unit over as its gradients are accumulated (the hooks that a
    change of dtype drops on torch < 2.1 made anew)."""
    accelerator = make_accelerator(fsdp_plugin=FullyShardedDataParallelPlugin(
        sharding_strategy="FULL_SHARD", cpu_offload=True, mixed_precision_policy={"param_dtype": "bf16"},
        auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20))
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    exact = {name: value.clone() for name, value in module.state_dict().items()}
    model, _ = accelerator.prepare(module, torch.optim.SGD(module.parameters(), lr=0.1))
    with accelerator.summon_full_params(model), torch.no_grad():
        assert all(parameter.dtype == torch.float32 and torch.equal(parameter, exact[name])
                   for name, parameter in module.named_parameters())
        module[0].weight.add_(1e-4)
    assert all(parameter.dtype == torch.bfloat16 and not parameter.storage().size() for parameter in module.parameters())
    assert torch.equal(model.state_dict()["0.weight"], exact["0.weight"] + 1e-4)
    hosted = accelerator._hosted_owning(module[0].weight)
    model(torch.ones(3, 4)).sum().backward()
    assert not any(unit.waiting for unit in hosted._units), "a unit's accumulation hooks were lost"
    with accelerator.summon_full_params(model), torch.no_grad():
        module[2].bias.add_(1)
        model.load_state_dict(exact)  # into the shares, and into the values the block holds and writes back
        assert torch.equal(module[2].bias, exact["2.bias"])
    assert all(torch.equal(value, exact[name]) for name, value in model.state_dict().items())
    AcceleratorState._reset_state()


def _accumulated_weights(make_accelerator, summon):
    """The weights after 3 steps of 3 accumulated backwards each, bf16 units, AdamW; with summon, a
    summon_full_params block (writeback of unchanged values) after each accumulating backward."""
    accelerator = make_accelerator(gradient_accumulation_steps=3, fsdp_plugin=FullyShardedDataParallelPlugin(
        sharding_strategy="FULL_SHARD", cpu_offload=True, mixed_precision_policy={"param_dtype": "bf16"},
        auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20))
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    model, optimizer = accelerator.prepare(module, torch.optim.AdamW(module.parameters(), lr=0.01))
    generator = torch.Generator().manual_seed(1)
    for step in range(9):
        with accelerator.accumulate(model):
            accelerator.backward(model(torch.randn(3, 4, generator=generator)).square().sum())
            if summon and not accelerator.sync_gradients:
                with accelerator.summon_full_params(model):
                    pass
            optimizer.step()
            optimizer.zero_grad()
    weights = accelerator.get_state_dict(model)
    accelerator.end_training()
    AcceleratorState._reset_state()
    return weights


def test_a_block_between_accumulating_backwards_changes_no_step(make_accelerator):
    """The parameters change dtype and back while gradients accumulate in param_dtype: the steps are those of a
    run without the blocks, bit for bit."""
    plain = _accumulated_weights(make_accelerator, summon=False)
    summoned = _accumulated_weights(make_accelerator, summon=True)
    assert [name for name, value in plain.items() if not torch.equal(value, summoned[name])] == []


def test_with_grads_gives_each_parameter_its_averaged_gradient_for_the_block(make_accelerator):
    """with_grads (FSDP's): .grad holds the gradient the optimizer steps (on one process a plain module's, bit for
    bit) for the block and None after it; None inside before any backward, zeros after zero_grad; refused while
    gradients accumulate unsynchronised."""
    accelerator = make_accelerator(gradient_accumulation_steps=2, fsdp_plugin=FullyShardedDataParallelPlugin(
        sharding_strategy="FULL_SHARD", cpu_offload=True, auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20))
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    plain = copy.deepcopy(module)
    model, optimizer = accelerator.prepare(module, torch.optim.SGD(module.parameters(), lr=0.1))
    with accelerator.summon_full_params(model, with_grads=True):
        assert all(parameter.grad is None for parameter in module.parameters())
    x = torch.randn(3, 4)
    with accelerator.accumulate(model):
        accelerator.backward(model(x).square().sum())
        with pytest.raises(accel.UnsupportedError, match="accumulate without synchronising"):
            with accelerator.summon_full_params(model, with_grads=True):
                pass
    with accelerator.accumulate(model):
        accelerator.backward(model(x).square().sum())
    plain(x).square().sum().backward()  # the two backwards of half the loss each (accumulation)
    with accelerator.summon_full_params(model, with_grads=True):
        summoned = {name: parameter.grad.clone() for name, parameter in module.named_parameters()}
    assert [name for name, parameter in plain.named_parameters() if not torch.equal(summoned[name], parameter.grad)] == []
    assert all(parameter.grad is None for parameter in module.parameters())
    optimizer.step()
    optimizer.zero_grad()
    with accelerator.summon_full_params(model, with_grads=True):
        assert all(torch.equal(parameter.grad, torch.zeros_like(parameter)) for parameter in module.parameters())
