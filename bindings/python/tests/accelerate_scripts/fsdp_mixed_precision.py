"""FSDP's mixed precision under stage 3 (`fsdp_mixed_precision.py REDUCE`, REDUCE bf16 or fp32): an eager
module trained 8 steps through FullyShardedDataParallelPlugin(FULL_SHARD, size-based units,
mixed_precision_policy param_dtype bf16 and reduce_dtype REDUCE) with torch's AdamW must end with the weights
of FSDP's recipe computed here in one process: fp32 master weights; each step every process's rows go
forward and backward through a bf16 copy of the masters, inputs cast to bf16; the gradients are cast to
REDUCE, divided by the number of processes and summed in rank order, then cast to fp32 for AdamW on the
masters. Bit for bit, on every process's gathered state dict (fp32). The bf16 run prefetches (forward and
BACKWARD_PRE: each share cast before its all-gather starts), the fp32 one does not. The module scales its hidden
layer by an fp32 buffer, and the policy's buffer_dtype is bf16: the buffer is computed with in bf16, as the
recipe's bf16 copy holds it, and the state dict gives it back in fp32 (FSDP's full state dict), its values
those of bf16."""
import copy
import sys

import torch
import torch.nn.functional as F

import accel

REDUCE = {"bf16": torch.bfloat16, "fp32": torch.float32}[sys.argv[1]]
plugin = accel.FullyShardedDataParallelPlugin(
    sharding_strategy="FULL_SHARD", auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=500,
    mixed_precision_policy={"param_dtype": torch.bfloat16, "reduce_dtype": REDUCE, "buffer_dtype": torch.bfloat16},
    forward_prefetch=REDUCE is torch.bfloat16,
    backward_prefetch="BACKWARD_PRE" if REDUCE is torch.bfloat16 else None)
accelerator = accel.Accelerator(cpu=True, fsdp_plugin=plugin)


class Scale(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.register_buffer("scale", torch.linspace(0.5, 1.5, width))

    def forward(self, x):
        return x * self.scale


torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Linear(6, 131), torch.nn.ReLU(), Scale(131), torch.nn.Linear(131, 40),
                             torch.nn.ReLU(), torch.nn.Linear(40, 3))
masters = copy.deepcopy(module)
initial = copy.deepcopy(module.state_dict())
masters_optimizer = torch.optim.AdamW(masters.parameters(), lr=0.01)
model, optimizer = accelerator.prepare(module, torch.optim.AdamW(module.parameters(), lr=0.01))
computed_in = set()
module[3].register_forward_hook(lambda _module, _inputs, output: computed_in.add(output.dtype))
processes = accelerator.num_processes
rows = 24 // processes

for step in range(8):
    generator = torch.Generator().manual_seed(step)
    x, y = torch.randn(24, 6, generator=generator), torch.randint(0, 3, (24,), generator=generator)
    mine = slice(accelerator.process_index * rows, (accelerator.process_index + 1) * rows)
    accelerator.backward(F.cross_entropy(model(x[mine]).float(), y[mine]))
    optimizer.step()
    optimizer.zero_grad()

    total = None
    for rank in range(processes):
        compute = copy.deepcopy(masters).to(torch.bfloat16)
        part = slice(rank * rows, (rank + 1) * rows)
        F.cross_entropy(compute(x[part].to(torch.bfloat16)).float(), y[part]).backward()
        share = [parameter.grad.to(REDUCE) / processes for parameter in compute.parameters()]
        total = share if total is None else [a + b for a, b in zip(total, share)]
    for parameter, gradient in zip(masters.parameters(), total):
        parameter.grad = gradient.float()
    masters_optimizer.step()
    masters_optimizer.zero_grad()

assert computed_in == {torch.bfloat16}, f"the units computed in {computed_in}"
weights = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    for name, expected in masters.state_dict().items():
        assert weights[name].dtype == torch.float32, f"{name} came back as {weights[name].dtype}"
        if name == "2.scale":  # kept in bf16 since prepare
            expected = expected.to(torch.bfloat16).float()
        assert torch.equal(weights[name], expected), \
            f"{name} differs from FSDP's recipe by up to {(weights[name] - expected).abs().max()}"
    assert not any(torch.equal(weights[name], value) for name, value in initial.items() if name != "2.scale"), \
        "a weight did not move"
    print(f"fsdp_mixed_precision: reduce {sys.argv[1]}: bit for bit", flush=True)
accelerator.end_training()
