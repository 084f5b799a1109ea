"""gather_for_metrics on an uneven last batch: 13 samples in batches of 4 per process. The last global
batch is completed with samples from the start of the dataset so every process gets a full batch;
gather_for_metrics drops those, so every sample is counted once, in order: tensors, nested structures, and
Python objects (strings, through gather_object) from a dataset of dicts with a collate_fn of its own."""
import torch
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator

accelerator = Accelerator()
dataset = TensorDataset(torch.arange(13), torch.arange(13) * 10)
loader = accelerator.prepare(DataLoader(dataset, batch_size=4))
seen, seen_tenfold = [], []
for index, (values, tenfold) in enumerate(loader):
    assert len(values) == 4 or accelerator.num_processes == 1  # padded on several processes
    gathered = accelerator.gather_for_metrics({"values": values, "pair": (values, tenfold)})
    seen.append(gathered["values"])
    seen_tenfold.append(gathered["pair"][1])
    assert accelerator.gradient_state.end_of_dataloader == (index == len(loader) - 1)
assert torch.equal(torch.cat(seen), torch.arange(13)), torch.cat(seen)
assert torch.equal(torch.cat(seen_tenfold), torch.arange(13) * 10)
assert len(accelerator.gather(values)) == len(values) * accelerator.num_processes  # gather keeps the padding


def collate(samples):
    return {"x": torch.stack([sample["x"] for sample in samples]), "name": [sample["name"] for sample in samples]}


named = [{"x": torch.full((2,), float(i)), "name": f"sample-{i}"} for i in range(13)]
loader = accelerator.prepare(DataLoader(named, batch_size=4, collate_fn=collate))
names, rows = [], []
for batch in loader:
    names += accelerator.gather_for_metrics(batch["name"])
    rows.append(accelerator.gather_for_metrics(batch["x"]))
assert names == [f"sample-{i}" for i in range(13)], names
assert torch.equal(torch.cat(rows)[:, 0], torch.arange(13.0))
accelerator.print(f"gather_for_metrics: ok on {accelerator.num_processes} processes")
