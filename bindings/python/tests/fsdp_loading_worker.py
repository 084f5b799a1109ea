"""One process of test_fsdp_loading.py, started by `accel launch --nproc-per-node 2` (with --cpu, or on one GPU
shared through Gloo). FSDP's cpu_ram_efficient_loading under FULL_SHARD as Accelerate's users write it: the
main process builds a deep MLP (16 Linear(1448, 1448) units, 128 MiB) in host memory with its weights, the other
process builds it on the meta device, and prepare shards it a unit at a time. Each process measures what prepare
adds to its memory at the peak: resident memory on the CPU (the peak reset through /proc/self/clear_refs just
before), allocated device memory on a GPU. It must stay within the process's share of the model and three
units, where a process that held the whole model (on its device, or beside the broadcast) would add at least
the model; on the CPU the main process within three units, its parameters' memory going as its share comes. Then the weights gathered from the shares must be the main process's, and a step must train."""
import re

import torch
import torch.nn.functional as F

import accel

LAYERS, WIDTH = 16, 1448
plugin = accel.FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD", auto_wrap_policy="SIZE_BASED_WRAP",
                                              min_num_params=WIDTH * WIDTH, sync_module_states=True,
                                              cpu_ram_efficient_loading=True)
accelerator = accel.Accelerator(fsdp_plugin=plugin)
device = torch.device(accelerator.device)


def build():
    return torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])


def memory_status(key):
    return int(re.search(rf"{key}:\s+(\d+) kB", open("/proc/self/status").read()).group(1)) * 1024


if accelerator.is_main_process:
    torch.manual_seed(0)
    module = build()  # in host memory, whatever the device: prepare moves it a unit at a time
    built = {name: value.clone() for name, value in module.state_dict().items()}
else:
    with accel.init_empty_weights():
        module = build()
unit_bytes = (WIDTH * WIDTH + WIDTH) * 4
model_bytes = LAYERS * unit_bytes
if device.type == "cuda":
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
else:
    with open("/proc/self/clear_refs", "w") as clear:
        clear.write("5")  # the peak resident memory (VmHWM) set back to what is resident now
    before = memory_status("VmRSS")
model = accelerator.prepare(module)
if device.type == "cuda":
    torch.cuda.synchronize()
    added = torch.cuda.max_memory_allocated() - before
else:
    added = memory_status("VmHWM") - before
# The main process's parameters in host memory give their memory up as the library takes each unit: on the CPU
# that pays for its share, so prepare adds at most the units in flight there.
pays_for_share = accelerator.is_main_process and device.type == "cpu"
bound = (0 if pays_for_share else model_bytes / accelerator.num_processes) + 3 * unit_bytes
print(f"fsdp_loading_worker: process {accelerator.process_index} on {device.type}: prepare added "
      f"{added / 2**20:.1f} MiB at its peak (bound {bound / 2**20:.1f} MiB, the model {model_bytes / 2**20:.1f} MiB)",
      flush=True)
assert added <= bound, f"prepare added {added} bytes at its peak, over the share and three units ({bound})"

weights = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    differing = [name for name, value in built.items() if not torch.equal(weights[name].cpu(), value)]
    assert differing == [], f"not the main process's values after prepare: {differing}"
optimizer = accelerator.prepare(torch.optim.SGD(model.parameters(), lr=0.1))
generator = torch.Generator().manual_seed(1 + accelerator.process_index)
x, y = torch.randn(4, WIDTH, generator=generator).to(device), torch.randn(4, WIDTH, generator=generator).to(device)
accelerator.backward(F.mse_loss(model(x), y))
optimizer.step()
trained = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    assert not torch.equal(trained["0.weight"].cpu(), built["0.weight"]), "nothing trained"
accelerator.print(f"fsdp_loading_worker: ok on {device.type}")
