"""A run interrupted mid-epoch and resumed into fresh objects, as an Accelerate user writes it, against the
same run uninterrupted: a CNN with BatchNorm, AdamW, OneCycleLR, accumulation over 2 batches, a JSONL
tracker, ProjectConfiguration(automatic_checkpoint_naming=True, total_limit=2) and save_state after every
epoch. The interrupted run saves after 4 batches of epoch 1, forgets everything (free_memory), builds,
prepares and registers fresh objects, load_state()s the newest checkpoint and skip_first_batches the 4
batches already done. Checked: the same weights and buffers bit for bit, the same logged losses, and on
every process, after every save_state, at most total_limit numbered checkpoints.
`resume_fresh_objects.py OUTPUT_DIR`."""
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from _training_step import accumulated_step
from accel import Accelerator, DataLoaderConfiguration
from accel.state import AcceleratorState
from accel.utils import ProjectConfiguration, set_seed

EPOCHS, BATCH, INTERRUPT_AFTER, TOTAL_LIMIT = 3, 4, 4, 2


class Counter:
    """An object registered for checkpointing: the optimizer steps taken."""

    def __init__(self):
        self.steps = 0

    def state_dict(self):
        return {"steps": self.steps}

    def load_state_dict(self, state):
        self.steps = state["steps"]


def fresh_objects(accelerator):
    set_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.BatchNorm2d(4), torch.nn.ReLU(),
                                torch.nn.Flatten(), torch.nn.Linear(4 * 8 * 8, 3))
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    scheduler = torch.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=1e-2, total_steps=200)
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(64, 1, 8, 8, generator=generator)
    y = torch.randint(0, 3, (64,), generator=generator)
    loader = DataLoader(TensorDataset(x, y), batch_size=BATCH, shuffle=True)
    counter = Counter()
    prepared = accelerator.prepare(model, optimizer, loader, scheduler)
    accelerator.register_for_checkpointing(counter)
    return (*prepared, counter)


def checkpoints_seen(project_dir):
    folder = os.path.join(project_dir, "checkpoints")
    return sorted(name for name in os.listdir(folder) if name.startswith("checkpoint_") and "." not in name)


def save(accelerator):
    accelerator.save_state()
    seen = checkpoints_seen(accelerator.project_dir)
    assert len(seen) <= TOTAL_LIMIT, f"process {accelerator.process_index} sees {seen}"


def train(accelerator, objects, epochs, skip=0):
    model, optimizer, loader, scheduler, counter = objects
    for epoch in epochs:
        model.train()
        loader.set_epoch(epoch)
        batches = accelerator.skip_first_batches(loader, skip) if skip else loader
        done = skip
        skip = 0
        for inputs, labels in batches:
            loss = accumulated_step(accelerator, model, optimizer, scheduler, F.cross_entropy, inputs, labels)
            if accelerator.sync_gradients:
                counter.steps += 1
                accelerator.log({"loss": accelerator.gather(loss.detach()).mean().item()}, step=counter.steps)
            done += 1
            if (epoch, done) == INTERRUPTION:
                save(accelerator)
                return "interrupted"
        save(accelerator)
    return "finished"


def make_accelerator(project_dir):
    AcceleratorState._reset_state(True)
    accelerator = Accelerator(gradient_accumulation_steps=2, log_with="jsonl",
                              dataloader_config=DataLoaderConfiguration(use_seedable_sampler=True),
                              project_config=ProjectConfiguration(project_dir=project_dir,
                                                                  automatic_checkpoint_naming=True,
                                                                  total_limit=TOTAL_LIMIT))
    accelerator.init_trackers("run")
    return accelerator


def weights(model):
    return {name: tensor.detach().clone() for name, tensor in model.state_dict().items()}


def logged_losses(project_dir):
    with open(os.path.join(project_dir, "run", "metrics.jsonl")) as lines:
        return [(record["step"], record["loss"]) for record in map(json.loads, lines)]


output = sys.argv[1]
INTERRUPTION = (None, None)
uninterrupted = make_accelerator(os.path.join(output, "uninterrupted"))
objects = fresh_objects(uninterrupted)
assert train(uninterrupted, objects, range(EPOCHS)) == "finished"
expected = weights(uninterrupted.unwrap_model(objects[0]))
uninterrupted.end_training()

INTERRUPTION = (1, INTERRUPT_AFTER)
resumed = make_accelerator(os.path.join(output, "resumed"))
objects = fresh_objects(resumed)
assert train(resumed, objects, range(EPOCHS)) == "interrupted"
objects = resumed.free_memory(*objects)
objects = fresh_objects(resumed)
resumed.load_state()
assert resumed.project_configuration.iteration == 2, resumed.project_configuration.iteration
assert objects[4].steps == (len(objects[2]) + INTERRUPT_AFTER) // 2, objects[4].steps
assert train(resumed, objects, range(1, EPOCHS), skip=INTERRUPT_AFTER) == "finished"
got = weights(resumed.unwrap_model(objects[0]))
resumed.end_training()

differing = [name for name in expected if not torch.equal(expected[name], got[name])]
assert sorted(got) == sorted(expected) and differing == [], f"weights differ: {differing}"
if resumed.is_main_process:
    losses = dict(logged_losses(os.path.join(output, "uninterrupted")))
    assert dict(logged_losses(os.path.join(output, "resumed"))) == losses
    assert checkpoints_seen(os.path.join(output, "resumed")) == ["checkpoint_2", "checkpoint_3"]
print(f"resume_fresh_objects: ok on {resumed.num_processes} processes")
