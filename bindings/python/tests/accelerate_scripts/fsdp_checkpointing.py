"""FSDP's activation_checkpointing with nested units (`fsdp_checkpointing.py MODE OPTIMIZER OUT`, OPTIMIZER torch
or accel: torch's SGD with momentum or accel's): residual blocks of two
Linears under a callable auto_wrap_policy that wraps each block and each Linear, so a recomputed block runs
its Linears' units again inside backward, after some have been reduced. The root holds a parameter of its
own (its unit stays gathered after a forward, for the backward), and each step runs a forward with gradients
after the backward and before the step, as a metric would: the step must not leave that unit's old values
in use. MODE "full" trains 5 steps under FULL_SHARD with activation_checkpointing, MODE "ddp" the same module
with neither (data parallelism); both write rank 0's weights to OUT, which test_accelerate_scripts.py compares
bit for bit."""
import sys

import torch
import torch.nn.functional as F

import accel

MODE, OPTIMIZER, OUT = sys.argv[1:4]


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(8, 32)
        self.b = torch.nn.Linear(32, 8)

    def forward(self, x):
        return x + self.b(torch.relu(self.a(x)))


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.Sequential(Block(), Block())
        self.head = torch.nn.Linear(8, 3)
        self.scale = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        return self.head(self.blocks(x)) * self.scale


def policy(module, recurse, nonwrapped_numel):
    return isinstance(module, (Block, torch.nn.Linear))


plugin = None
if MODE == "full":
    plugin = accel.FullyShardedDataParallelPlugin(sharding_strategy="FULL_SHARD", auto_wrap_policy=policy,
                                                  activation_checkpointing=True)
accelerator = accel.Accelerator(cpu=True, fsdp_plugin=plugin)
torch.manual_seed(0)
module = Net()
spec = (accel.OptimizerSpec("sgd", lr=0.1, momentum=0.9) if OPTIMIZER == "accel"
        else torch.optim.SGD(module.parameters(), lr=0.1, momentum=0.9))
model, optimizer = accelerator.prepare(module, spec)
for step in range(5):
    generator = torch.Generator().manual_seed(step * 7 + accelerator.process_index)
    x, y = torch.randn(4, 8, generator=generator), torch.randint(0, 3, (4,), generator=generator)
    accelerator.backward(F.cross_entropy(model(x), y))
    model(x)  # a metric's forward, with gradients, that no backward follows
    optimizer.step()
    optimizer.zero_grad()
weights = accelerator.get_state_dict(model)
if accelerator.is_main_process:
    torch.save(weights, OUT)
accelerator.print(f"fsdp_checkpointing: {MODE}: ok")
