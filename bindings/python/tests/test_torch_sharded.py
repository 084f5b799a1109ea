"""How ZeRO stage 3 cuts a torch module into units (accel._torch_sharded.unit_groups and wrap_policy), as
FSDP's wrap policies and DeepSpeed's stage 3 do; the training itself runs on several processes
(test_accelerate_scripts.py: zero_identity's stage 3 and FULL_SHARD runs, bit for bit stage 0's weights)."""
import functools

import pytest

torch = pytest.importorskip("torch")

from accel._torch_sharded import unit_groups, wrap_policy  # noqa: E402
from accel.utils import FullyShardedDataParallelPlugin  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.attention = torch.nn.Linear(8, 8)
        self.mlp = torch.nn.Linear(8, 8)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8)
        self.blocks = torch.nn.ModuleList([Block(), Block()])
        self.head = torch.nn.Linear(8, 10)
        self.scale = torch.nn.Parameter(torch.ones(1))


def units_by_name(net, wrap):
    """The parameter names of each unit (sorted), the units sorted."""
    group_of, _ = unit_groups(net, wrap)
    units = {}
    for name, parameter in net.named_parameters():
        units.setdefault(group_of[id(parameter)], []).append(name)
    return sorted(sorted(names) for names in units.values())


def test_no_wrap_is_one_unit_of_every_parameter():
    net = Net()
    assert units_by_name(net, wrap_policy(FullyShardedDataParallelPlugin(auto_wrap_policy="NO_WRAP"))) == [
        sorted(name for name, _ in net.named_parameters())]


def test_transformer_based_wrap_makes_a_unit_of_each_block_and_one_of_the_rest():
    net = Net()
    plugin = FullyShardedDataParallelPlugin(auto_wrap_policy="TRANSFORMER_BASED_WRAP",
                                            transformer_cls_names_to_wrap=["Block"])
    assert units_by_name(net, wrap_policy(plugin)) == sorted([
        ["embed.weight", "head.bias", "head.weight", "scale"],
        sorted(f"blocks.0.{layer}.{kind}" for layer in ("attention", "mlp") for kind in ("weight", "bias")),
        sorted(f"blocks.1.{layer}.{kind}" for layer in ("attention", "mlp") for kind in ("weight", "bias"))])


def test_size_based_wrap_counts_what_units_below_do_not_hold():
    net = Net()
    # Each Linear(8, 8) holds 72 elements: a block's two (144) reach 100 only together.
    plugin = FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=100)
    units = units_by_name(net, wrap_policy(plugin))
    assert ["blocks.0.attention.bias", "blocks.0.attention.weight", "blocks.0.mlp.bias", "blocks.0.mlp.weight"] in units
    # The list holding both blocks (288) is not wrapped again: what the blocks hold is theirs.
    assert ["embed.weight", "head.bias", "head.weight", "scale"] in units and len(units) == 3


def test_a_callable_policy_gets_torchs_arguments():
    seen = []

    def policy(module, recurse, nonwrapped_numel):
        seen.append((type(module).__name__, recurse, nonwrapped_numel))
        return isinstance(module, torch.nn.Linear) and module.out_features == 10

    net = Net()
    units = units_by_name(net, wrap_policy(FullyShardedDataParallelPlugin(auto_wrap_policy=functools.partial(policy))))
    assert ["head.bias", "head.weight"] in units and len(units) == 2
    assert ("Linear", False, 90) in seen


def test_deepspeeds_stage_three_makes_a_unit_of_each_child_of_the_root():
    net = Net()
    assert units_by_name(net, wrap_policy(deepspeed=True)) == sorted([
        ["embed.weight"], sorted(name for name, _ in net.named_parameters() if name.startswith("blocks.")),
        ["head.bias", "head.weight"], ["scale"]])


def test_tied_weights_put_their_units_together():
    net = Net()
    net.head.weight = net.embed.weight  # an output layer tied to the embedding, as language models do
    units = units_by_name(net, wrap_policy(deepspeed=True))
    assert ["embed.weight", "head.bias"] in units and len(units) == 3


def test_frozen_parameters_are_in_no_unit():
    net = Net()
    net.embed.weight.requires_grad_(False)
    group_of, _ = unit_groups(net, wrap_policy(deepspeed=True))
    assert id(net.embed.weight) not in group_of and id(net.head.weight) in group_of
