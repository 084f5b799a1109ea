"""accel.utils.save_fsdp_model and load_fsdp_model (Accelerate's) under FULL_STATE_DICT, one offloaded process
under FULL_SHARD: Accelerate's pytorch_model_fsdp.bin, torch.save of the whole state dict, loaded back into
the shares; the other state_dict_types refused, naming what to use. Two processes: fsdp_device_worker.py
(test_fsdp_on_a_device.py)."""
import pytest

import accel
from accel.utils import FullyShardedDataParallelPlugin, load_fsdp_model, save_fsdp_model

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("fresh_state")


def test_a_saved_model_is_accelerates_file_and_loads_back_into_the_shares(make_accelerator, tmp_path):
    plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD", cpu_offload=True,
                                            auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20,
                                            state_dict_type="FULL_STATE_DICT")
    accelerator = make_accelerator(fsdp_plugin=plugin)
    torch.manual_seed(0)
    module = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    model, optimizer = accelerator.prepare(module, torch.optim.SGD(module.parameters(), lr=0.1))
    accelerator.backward(model(torch.randn(3, 4)).square().sum())
    optimizer.step()
    saved = {name: value.clone() for name, value in accelerator.get_state_dict(model).items()}
    save_fsdp_model(plugin, accelerator, model, tmp_path)
    save_fsdp_model(plugin, accelerator, model, tmp_path, model_index=1)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["pytorch_model_fsdp.bin", "pytorch_model_fsdp_1.bin"]
    written = torch.load(tmp_path / "pytorch_model_fsdp.bin")
    assert sorted(written) == sorted(saved) and all(torch.equal(written[name], saved[name]) for name in saved)
    module.load_state_dict({name: value * 0.5 for name, value in saved.items()})
    result = load_fsdp_model(plugin, accelerator, model, tmp_path)
    assert list(result.missing_keys) == [] and list(result.unexpected_keys) == []
    loaded = accelerator.get_state_dict(model)
    assert [name for name, value in saved.items() if not torch.equal(loaded[name], value)] == []
    assert not any(parameter.storage().size() for parameter in module.parameters()), "left gathered"
    plain = torch.nn.Sequential(torch.nn.Linear(4, 5), torch.nn.ReLU(), torch.nn.Linear(5, 2))
    load_fsdp_model(plugin, accelerator, plain, tmp_path, model_index=1)  # not prepared: the main process loads
    assert all(torch.equal(value, saved[name]) for name, value in plain.state_dict().items())


@pytest.mark.parametrize("state_dict_type", ["SHARDED_STATE_DICT", "LOCAL_STATE_DICT"])
def test_other_state_dict_types_and_adapters_are_refused_naming_what_to_use(make_accelerator, tmp_path,
                                                                           state_dict_type):
    plugin = FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD", state_dict_type=state_dict_type)
    accelerator = make_accelerator()
    module = torch.nn.Linear(2, 2)
    for call in (save_fsdp_model, load_fsdp_model):
        with pytest.raises(accel.UnsupportedError, match=f"{call.__name__} under {state_dict_type}: .*save_state"):
            call(plugin, accelerator, module, tmp_path)
    plugin.set_state_dict_type("FULL_STATE_DICT")
    with pytest.raises(accel.UnsupportedError, match=r"adapter_only=True\): a PEFT adapter"):
        save_fsdp_model(plugin, accelerator, module, tmp_path, adapter_only=True)
    assert list(tmp_path.iterdir()) == []
