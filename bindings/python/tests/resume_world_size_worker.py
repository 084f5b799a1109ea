"""Run by test_resume_world_size.py under `accel launch`: a prepared torch DataLoader over 26 numbered samples
(seedable sampler, data_seed 7, stateful loaders), each step's batch gathered over the processes.
    resume_world_size_worker.py order BATCH STEPS OUT       STEPS steps from the start; rank 0 writes them
    resume_world_size_worker.py save BATCH STEPS CHECKPOINT  STEPS steps, then save_state
    resume_world_size_worker.py resume BATCH STEPS CHECKPOINT OUT  load_state, then STEPS steps
RESUME_SEEDABLE=0 in the environment: the sampler is not seedable (torch plans the shuffle on one process)."""
import json
import os
import sys

import torch
from torch.utils.data import DataLoader

import accel
from accel.utils import DataLoaderConfiguration

mode, batch_size, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
accelerator = accel.Accelerator(dataloader_config=DataLoaderConfiguration(
    use_stateful_dataloader=True, use_seedable_sampler=os.environ.get("RESUME_SEEDABLE", "1") == "1", data_seed=7))
loader = accelerator.prepare(DataLoader(torch.arange(26), batch_size=batch_size, shuffle=True))
if mode == "resume":
    accelerator.load_state(sys.argv[4])
seen, batches = [], iter(loader)
for _ in range(steps):
    batch = next(batches, None)
    if batch is None:
        batches = iter(loader)
        batch = next(batches)
    seen.append(accelerator.gather(batch).tolist())
if mode == "save":
    accelerator.save_state(sys.argv[4])
elif accelerator.is_main_process:
    with open(sys.argv[-1], "w") as out:
        json.dump(seen, out)
accelerator.end_training()
