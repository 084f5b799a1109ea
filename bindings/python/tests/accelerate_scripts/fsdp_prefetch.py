"""FSDP's prefetch under FULL_SHARD on 2 processes (`fsdp_prefetch.py MODE OUT`; MODE "none", "pre" or
"post": backward_prefetch NO_PREFETCH, BACKWARD_PRE or BACKWARD_POST, the last two with forward_prefetch).
A module of four Linears, each a unit, whose forward skips the second on some steps (the same on every
process), so that a prefetch guessed from the previous forward is sometimes not used; torch's AdamW, 4
steps. Writes to OUT (rank 0): the final weights, and per step the units whose gathers were started ahead in
the forward and in the backward, in order. The test compares the modes: the same weights bit for bit, and
the prefetches the rules give. get_state_dict starts each unit's gather while the one before it is read."""
import sys

import torch
import torch.nn.functional as F

import accel
import accel._torch_sharded_unit

MODE, OUT = sys.argv[1], sys.argv[2]
DETOURS = (True, True, False, True)

plugin = accel.FullyShardedDataParallelPlugin(
    sharding_strategy="FULL_SHARD", auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20,
    backward_prefetch={"none": "NO_PREFETCH", "pre": "BACKWARD_PRE", "post": "BACKWARD_POST"}[MODE],
    forward_prefetch=MODE != "none")
accelerator = accel.Accelerator(cpu=True, fsdp_plugin=plugin)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(6, 16), torch.nn.Linear(16, 16),
                                           torch.nn.Linear(16, 16), torch.nn.Linear(16, 3)])

    def forward(self, x, detour):
        x = F.relu(self.layers[0](x))
        if detour:
            x = F.relu(self.layers[1](x))
        return self.layers[3](F.relu(self.layers[2](x)))


torch.manual_seed(0)
module = Net()
optimizer = torch.optim.AdamW(module.parameters(), lr=0.01)
model, optimizer = accelerator.prepare(module, optimizer)
hosted = accelerator._hosted_owning(next(module.parameters()))
assert len(hosted._units) == 4

started = []
prefetch = accel._torch_sharded_unit.Unit.prefetch


def recorded_prefetch(unit):
    if not (unit.gathered or unit.prefetched):
        started[-1]["backward" if hosted._end_queued else "forward"].append(unit.index)
    prefetch(unit)


accel._torch_sharded_unit.Unit.prefetch = recorded_prefetch
generator = torch.Generator().manual_seed(1 + accelerator.process_index)
for detour in DETOURS:
    started.append({"forward": [], "backward": []})
    x, y = torch.randn(5, 6, generator=generator), torch.randn(5, 3, generator=generator)
    accelerator.backward(F.mse_loss(model(x, detour), y))
    optimizer.step()
    optimizer.zero_grad()
    assert all(not unit.prefetched and not unit.gathered for unit in hosted._units), "a unit held after the step"
prefetches = hosted.model.grad_sync_stat("unit_prefetches")
weights = accelerator.get_state_dict(model)
# The state dict's gathers: each unit's after the first started while the one before it is read.
assert hosted.model.grad_sync_stat("unit_prefetches") - prefetches == 3
if accelerator.is_main_process:
    torch.save({"weights": weights, "started": started}, OUT)
accelerator.end_training()
