"""FSDP's cpu_ram_efficient_loading as Accelerate's users write it: only the main process builds the model with
its weights; the others build it on the meta device (init_empty_weights, buffers too), reading nothing, and
prepare gives them the main process's values (sync_module_states). Under FULL_SHARD the gathered weights, the
frozen parameter (kept whole) and every process's BatchNorm buffers must then be the main process's, and
training must run; an optimizer made over meta parameters before prepare is refused."""
import copy

import torch
import torch.nn.functional as F
from _training_step import accumulated_step

from accel import Accelerator, FullyShardedDataParallelPlugin, init_empty_weights

plugin = FullyShardedDataParallelPlugin(auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=20,
                                        sync_module_states=True, cpu_ram_efficient_loading=True)
accelerator = Accelerator(cpu=True, fsdp_plugin=plugin)


def build():
    model = torch.nn.Sequential(torch.nn.Linear(6, 32), torch.nn.BatchNorm1d(32), torch.nn.ReLU(),
                                torch.nn.Linear(32, 3))
    model[0].bias.requires_grad_(False)
    return model


torch.manual_seed(0)
reference = build()
with torch.no_grad():  # buffers away from their defaults, which a fresh module would hold anyway
    reference[1].running_mean.uniform_(-1, 1)
    reference[1].running_var.uniform_(1, 2)
if accelerator.is_main_process:
    model = copy.deepcopy(reference)
else:
    with init_empty_weights(include_buffers=True):
        model = build()
    assert all(tensor.is_meta for tensor in model.state_dict().values())
    try:
        accelerator.prepare(torch.optim.SGD(model.parameters(), lr=0.1))
        raise AssertionError("an optimizer over meta parameters was prepared")
    except ValueError as error:
        assert "make the optimizer after prepare(model)" in str(error), error

model = accelerator.prepare(model)
module = accelerator.unwrap_model(model)
for name in ("running_mean", "running_var", "num_batches_tracked"):
    assert torch.equal(getattr(module[1], name), getattr(reference[1], name)), name
assert torch.equal(module[0].bias.detach(), reference[0].bias.detach()), "the frozen bias"
whole = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    differing = [name for name, value in reference.state_dict().items() if not torch.equal(whole[name], value)]
    assert differing == [], f"not the main process's values after prepare: {differing}"
optimizer = accelerator.prepare(torch.optim.SGD([p for p in module.parameters() if p.requires_grad], lr=0.1))
generator = torch.Generator().manual_seed(1 + accelerator.process_index)
for _ in range(3):
    x, y = torch.randn(8, 6, generator=generator), torch.randint(0, 3, (8,), generator=generator)
    accumulated_step(accelerator, model, optimizer, None, F.cross_entropy, x, y)
trained = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    assert not torch.equal(trained["3.weight"], reference.state_dict()["3.weight"]), "nothing trained"
accelerator.print(f"ram_efficient_loading: ok on {accelerator.num_processes} processes")
