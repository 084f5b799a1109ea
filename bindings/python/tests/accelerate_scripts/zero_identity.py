"""An eager nn.Module trained on 2 processes with accel's AdamW under ZeRO (`zero_identity.py STAGE OUT`:
Accelerate's DeepSpeedPlugin(zero_stage=STAGE)), clipping on: layers of 131 units, so that the processes own
pieces of parameters. Writes rank 0's final weights and optimizer state bytes to OUT; the test compares
stages 1 and 2 with stage 0: the same weights bit for bit, about half the state. Under stages 1 and 2 a
torch optimizer is refused at prepare."""
import sys

import torch
import torch.nn.functional as F

import accel

STAGE, OUT = int(sys.argv[1]), sys.argv[2]

accelerator = accel.Accelerator(cpu=True, deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=STAGE))
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(6, 131), torch.nn.ReLU(), torch.nn.Linear(131, 3))
initial = [parameter.detach().clone() for parameter in model.parameters()]
if STAGE:
    # A torch optimizer would step every parameter on every process: refused at prepare, naming the way out.
    try:
        accelerator.prepare(torch.optim.AdamW(model.parameters()))
        raise AssertionError("a torch optimizer was prepared under ZeRO")
    except accel.UnsupportedError as error:
        assert "accel.OptimizerSpec" in str(error), error
model, optimizer = accelerator.prepare(model, accel.OptimizerSpec("adamw", lr=0.01))
generator = torch.Generator().manual_seed(1 + accelerator.process_index)
for step in range(20):
    x = torch.randn(8, 6, generator=generator)
    y = torch.randint(0, 3, (8,), generator=generator)
    accelerator.backward(F.cross_entropy(model(x), y))
    accelerator.clip_grad_norm_(model.parameters(), 0.05)
    optimizer.step()
    optimizer.zero_grad()
assert all(not torch.equal(before, after) for before, after in zip(initial, model.parameters())), "nothing trained"
# What shows the split took effect: rank 0's AdamW state, from the prepared module's accel model.
state_bytes = model._hosted.model.grad_sync_stat("optimizer_state_bytes")
if accelerator.is_main_process:
    weights = {name: value.detach().clone() for name, value in accelerator.unwrap_model(model).state_dict().items()}
    torch.save({"weights": weights, "optimizer_state_bytes": state_bytes}, OUT)
