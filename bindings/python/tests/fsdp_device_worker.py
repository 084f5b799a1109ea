"""One process of test_fsdp_on_a_device.py, started by `accel launch --nproc-per-node 2` (with --cpu, or on
one GPU shared through Gloo): `fsdp_device_worker.py MODE OUT`, an eager module trained as an Accelerate user
writes it under FullyShardedDataParallelPlugin, MODE "whole" (NO_SHARD), "sharded" (FULL_SHARD, each Linear a
unit) or "offloaded" (FULL_SHARD with cpu_offload), torch's AdamW with clipping, 8 steps. It checks what the
mode promises on its device (under FULL_SHARD no parameter memory between steps; offloaded, the optimizer's
pieces and state in host memory), that the module's own state_dict() holds get_state_dict's weights, that its
load_state_dict() of whole values after step 4 holds them and summon_full_params keeps what its block changes
after step 6 (the same values in every mode, so that the final weights show both; under FULL_SHARD with
offload_to_cpu, the block's parameters in host memory), that save_fsdp_model's file after step 7 is loaded back
by load_fsdp_model after step 8, and rank 0 writes the final weights to OUT."""
import os
import sys

import torch
import torch.nn.functional as F

import accel
from accel.utils import load_fsdp_model, save_fsdp_model

MODE, OUT = sys.argv[1], sys.argv[2]
SAVED = os.path.join(os.path.dirname(OUT), f"fsdp_model_{MODE}")
plugin = accel.FullyShardedDataParallelPlugin(sharding_strategy="NO_SHARD" if MODE == "whole" else "FULL_SHARD",
                                              auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20,
                                              cpu_offload=MODE == "offloaded")
accelerator = accel.Accelerator(fsdp_plugin=plugin)
device = torch.device(accelerator.device)
torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Linear(6, 131), torch.nn.ReLU(), torch.nn.Linear(131, 3)).to(device)
model, optimizer = accelerator.prepare(module, torch.optim.AdamW(module.parameters(), lr=0.01))
generator = torch.Generator().manual_seed(1 + accelerator.process_index)
for step in range(8):
    x, y = torch.randn(8, 6, generator=generator).to(device), torch.randint(0, 3, (8,), generator=generator).to(device)
    accelerator.backward(F.cross_entropy(model(x), y))
    accelerator.clip_grad_norm_(model.parameters(), 0.05)
    optimizer.step()
    optimizer.zero_grad()
    if step == 3:  # whole values loaded into the module (under FULL_SHARD into each process's shares)
        halved = {name: value * 0.5 for name, value in module.state_dict().items()}
        module.load_state_dict(halved)
        reread = module.state_dict()
        assert all(torch.equal(reread[name], value) for name, value in halved.items()), f"{MODE}: load_state_dict"
    if step == 5:  # the whole parameters changed in place inside summon_full_params, kept by its writeback
        offload_to_cpu = MODE == "sharded"  # FSDP's: the whole parameters in host memory for the block
        with accelerator.summon_full_params(model, offload_to_cpu=offload_to_cpu), torch.no_grad():
            assert all(parameter.storage().size() for parameter in module.parameters()), f"{MODE}: summoned"
            where = {parameter.device for parameter in module.parameters()}
            assert where == {torch.device("cpu") if offload_to_cpu else device}, f"{MODE}: summoned on {where}"
            for parameter in module.parameters():
                parameter.mul_(0.75)
        assert all(parameter.device == device for parameter in module.parameters()), f"{MODE}: not back on {device}"
    if step == 6:  # Accelerate's pytorch_model_fsdp.bin, loaded back after the next step
        save_fsdp_model(plugin, accelerator, model, SAVED)
    if step == 7:
        load_fsdp_model(plugin, accelerator, model, SAVED)
        written = torch.load(os.path.join(SAVED, "pytorch_model_fsdp.bin"))
        loaded = accelerator.get_state_dict(model)
        assert not accelerator.is_main_process or all(torch.equal(loaded[name], value.to(loaded[name].device))
                                                      for name, value in written.items()), f"{MODE}: load_fsdp_model"
    if MODE != "whole":
        held = [name for name, parameter in module.named_parameters() if parameter.storage().size()]
        assert held == [], f"step {step}: parameters held between steps: {held}"
stepped = [piece for group in optimizer.param_groups for piece in group["params"]]
state = [value for entry in optimizer.state.values() for value in entry.values()
         if isinstance(value, torch.Tensor) and value.dim() > 0]
expected = torch.device("cpu") if MODE == "offloaded" else device
assert stepped and all(piece.device == expected for piece in stepped), [piece.device for piece in stepped]
assert state and all(value.device == expected for value in state), [value.device for value in state]
weights = accelerator.get_state_dict(model)
# The module's own state_dict() gathers the units on every process (FSDP's FULL_STATE_DICT; collective), and
# leaves them released.
whole = accelerator.unwrap_model(model).state_dict()
if accelerator.is_main_process:
    assert sorted(whole) == sorted(weights) and all(torch.equal(whole[name], value) for name, value in weights.items())
assert MODE == "whole" or not any(parameter.storage().size() for parameter in module.parameters())
if accelerator.is_main_process:
    torch.save({name: value.detach().cpu() for name, value in weights.items()}, OUT)
accelerator.print(f"fsdp_device_worker: {MODE} on {device}: ok")
