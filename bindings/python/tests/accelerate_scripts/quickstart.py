"""The issue's 19-line Accelerate script (eager nn.Sequential, AdamW, TensorDataset + DataLoader, LambdaLR,
F.cross_entropy, accumulate, gather_for_metrics, save_state), then its numbers checked: the accuracy, every
sample counted once, and a checkpoint that load_state restores bit for bit. `quickstart.py OUTPUT_DIR`."""
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator

accelerator = Accelerator(gradient_accumulation_steps=2)
torch.manual_seed(0)
x = torch.randn(300, 8)
y = (x[:, 0] + x[:, 1] > 0).long() + (x[:, 2] > 0.5).long()
model = torch.nn.Sequential(torch.nn.Linear(8, 32), torch.nn.ReLU(), torch.nn.Linear(32, 3))
optimizer = torch.optim.AdamW(model.parameters(), lr=2e-2)
scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (1 + step / 100))
loader = DataLoader(TensorDataset(x, y), batch_size=16, shuffle=True)
model, optimizer, loader, scheduler = accelerator.prepare(model, optimizer, loader, scheduler)
for epoch in range(10):
    for inputs, labels in loader:
        with accelerator.accumulate(model):
            loss = F.cross_entropy(model(inputs), labels)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
model.eval()
predictions, references = [], []
for inputs, labels in accelerator.prepare(DataLoader(TensorDataset(x, y), batch_size=64)):
    with torch.no_grad():
        gathered = accelerator.gather_for_metrics((model(inputs).argmax(-1), labels))
    predictions.append(gathered[0])
    references.append(gathered[1])
accelerator.save_state(sys.argv[1])

# The numbers: every sample once, in order; a model that learnt; a checkpoint that restores everything.
accuracy = (torch.cat(predictions) == torch.cat(references)).float().mean().item()
assert torch.equal(torch.cat(references), y), "gather_for_metrics did not give every label once, in order"
assert accuracy > 0.9, accuracy
weights = {name: tensor.clone() for name, tensor in accelerator.unwrap_model(model).state_dict().items()}
lr, moments = scheduler.get_last_lr(), [state["exp_avg"].clone() for state in optimizer.state.values()]
with torch.no_grad():
    for parameter in model.parameters():
        parameter.add_(1.0)
scheduler.step()
accelerator.load_state(sys.argv[1])
restored = accelerator.unwrap_model(model).state_dict()
assert all(torch.equal(restored[name], tensor) for name, tensor in weights.items())
assert scheduler.get_last_lr() == lr
assert all(torch.equal(state["exp_avg"], moment) for state, moment in zip(optimizer.state.values(), moments))
accelerator.print(f"quickstart: ok on {accelerator.num_processes} processes, accuracy {accuracy:.3f}")
