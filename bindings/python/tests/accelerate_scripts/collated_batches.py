"""Every prepared batch, on every process, is exactly what torch's default_collate makes of the samples it
holds: the same structure and the same dtype, shape, strides and values of each tensor (images with a
size-1 channel, several channels, bools, ints, floats; a TensorDataset read by the library without copies,
a map-style dataset of dicts, a stream dispatched from rank 0, a shuffled loader). Each sample carries its
index, by which the script looks it up; gather_for_metrics then sees every index once."""
import torch
from torch.utils.data import DataLoader, IterableDataset, TensorDataset, default_collate

from _torch_checks import same_as_torchs
from accel import Accelerator


class Stream(IterableDataset):
    def __init__(self, samples):
        self.samples = samples

    def __iter__(self):
        return iter(self.samples)


accelerator = Accelerator()
generator = torch.Generator().manual_seed(0)
images = torch.randn(22, 1, 8, 8, generator=generator)
channels = torch.randn(22, 3, 4, 4, generator=generator, dtype=torch.float64)
samples = [{"index": i, "image": images[i], "weight": i / 4, "flag": i % 3 == 0} for i in range(22)]
cases = {
    "images": (TensorDataset(torch.arange(22), images), lambda batch: batch[0]),
    "channels and bools": (TensorDataset(torch.arange(22), channels, torch.arange(22) % 2 == 0), lambda b: b[0]),
    "dicts": (samples, lambda batch: batch["index"]),
    "streamed dicts": (Stream(samples), lambda batch: batch["index"]),
}
for name, (dataset, indices_of) in cases.items():
    lookup = samples if isinstance(dataset, Stream) else dataset
    for settings in ({"batch_size": 4}, {"batch_size": 3, "shuffle": not isinstance(dataset, Stream)}):
        loader = accelerator.prepare(DataLoader(dataset, **settings))
        seen = []
        for number, batch in enumerate(loader):
            indices = indices_of(batch)
            expected = default_collate([lookup[i] for i in indices.tolist()])
            same_as_torchs(batch, expected, f"{name} {settings}, batch {number}")
            seen += accelerator.gather_for_metrics(indices).tolist()
        assert sorted(seen) == list(range(22)), (name, settings, seen)
accelerator.print(f"collated_batches: ok on {accelerator.num_processes} processes")
