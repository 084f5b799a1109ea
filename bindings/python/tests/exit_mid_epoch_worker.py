"""Leaves a loader mid-epoch while its prefetch threads are inside a Python __getitem__, and lets the
interpreter exit without closing anything (test_exit_mid_epoch.py runs it)."""
import sys
import time

import numpy as np

import accel


class SlowDataset:
    def __len__(self):
        return 10_000

    def __getitem__(self, index):
        time.sleep(0.001)  # the threads are inside Python when the interpreter exits
        return {"x": np.full(4, index, dtype=np.float32)}


accelerator = accel.Accelerator(cpu=True)
loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_map(SlowDataset()), batch_size=8,
                                                  prefetch_threads=2))
for step, batch in enumerate(loader):
    if step == 3:
        break
print("leaving mid-epoch", flush=True)
sys.exit(0)
