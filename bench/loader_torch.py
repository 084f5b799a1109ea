"""The torch half of the loader benchmark: torch.utils.data.DataLoader over a TensorDataset.

Same shape of data as bench/loader_bench.c (60000 x 784 float32, int64 labels 0..9), batch 64, shuffle on,
num_workers=0, one thread. Prints one line of key=value pairs that bench/run_loader.sh parses.

    /usr/bin/python3 bench/loader_torch.py [epochs] [warmup_batches]
"""
import sys
import time

import torch
from torch.utils.data import DataLoader, TensorDataset

ROWS, COLS, BATCH = 60000, 784, 64


def main():
    epochs = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    warmup_batches = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    torch.set_num_threads(1)
    torch.manual_seed(1234)
    x = torch.rand(ROWS, COLS, dtype=torch.float32)
    y = torch.randint(0, 10, (ROWS,), dtype=torch.int64)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True, num_workers=0)

    touched = 0.0
    for i, (bx, by) in enumerate(loader):  # warm-up: part of an epoch
        touched += float(bx[0, 0]) + int(by[0])
        if i + 1 >= warmup_batches:
            break

    batches = samples = 0
    start = time.perf_counter()
    for _ in range(epochs):
        for bx, by in loader:
            touched += float(bx[0, 0]) + int(by[0])  # touch the data, as the accel side does
            samples += bx.shape[0]
            batches += 1
    seconds = time.perf_counter() - start
    assert batches == epochs * len(loader) and samples == epochs * ROWS, (batches, samples)
    print(f"torch epochs={epochs} batches={batches} samples_per_epoch={samples // epochs} seconds={seconds:.4f} "
          f"batches_per_s={batches / seconds:.1f} bytes_per_s={samples * (COLS * 4 + 8) / seconds:.4g} "
          f"threads={torch.get_num_threads()} torch={torch.__version__} touched={touched:.1f}")


if __name__ == "__main__":
    main()
