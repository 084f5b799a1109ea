"""A module whose parameters have two dtypes in one unit (`fsdp_mixed_dtypes.py MODE OUT`): an fp32 Linear and
an fp64 one under FSDP's NO_WRAP (one unit, the whole module), which FSDP refuses ("expects uniform dtype") and
accel splits into a unit per dtype, gathered together. MODE "full" trains 5 steps under FULL_SHARD, MODE
"ddp" under data parallelism; both write rank 0's weights to OUT, which test_accelerate_scripts.py compares
bit for bit."""
import sys

import torch
import torch.nn.functional as F

import accel

MODE, OUT = sys.argv[1], sys.argv[2]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.low = torch.nn.Linear(6, 16)
        self.high = torch.nn.Linear(16, 3).double()

    def forward(self, x):
        return self.high(torch.relu(self.low(x)).double()).float()


plugin = accel.FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD") if MODE == "full" else None
accelerator = accel.Accelerator(cpu=True, fsdp_plugin=plugin)
torch.manual_seed(0)
module = Net()
model, optimizer = accelerator.prepare(module, torch.optim.AdamW(module.parameters(), lr=0.01))
for step in range(5):
    generator = torch.Generator().manual_seed(step * 5 + accelerator.process_index)
    x, y = torch.randn(4, 6, generator=generator), torch.randint(0, 3, (4,), generator=generator)
    accelerator.backward(F.cross_entropy(model(x), y))
    optimizer.step()
    optimizer.zero_grad()
weights = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    assert weights["high.weight"].dtype == torch.float64 and weights["low.weight"].dtype == torch.float32
    torch.save(weights, OUT)
accelerator.print(f"fsdp_mixed_dtypes: {MODE}: ok")
