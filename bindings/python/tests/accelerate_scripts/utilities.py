"""Accelerate's smaller utilities, as scripts use them: set_trigger / check_trigger (one process raises the
flag, every process sees it once), save_state / load_state pre-hooks (a model the hooks save and load
themselves is left out of the checkpoint; removing the hooks brings it back), get_logger (main process only,
every process, in order), find_executable_batch_size (halves the batch size on out-of-memory errors only),
release_memory and extract_model_from_parallel. `utilities.py OUTPUT_DIR`."""
import json
import logging
import os
import sys

import torch

from accel import Accelerator
from accel.logging import get_logger
from accel.utils import extract_model_from_parallel, find_executable_batch_size, release_memory

accelerator = Accelerator()
processes, rank = accelerator.num_processes, accelerator.process_index
output = sys.argv[1]
os.makedirs(output, exist_ok=True)

# set_trigger / check_trigger: the last process raises it; every process sees it once, then it is down.
assert accelerator.check_trigger() is False
if rank == processes - 1:
    accelerator.set_trigger()
assert accelerator.check_trigger() is True
assert accelerator.check_trigger() is False

# Pre-hooks: the second model is saved and loaded by the hooks (as a diffusers script saves its EMA copy).
torch.manual_seed(0)
main_model, side_model = torch.nn.Linear(3, 2), torch.nn.Linear(2, 2)
optimizer = torch.optim.SGD(main_model.parameters(), lr=0.1)
main_model, side_model, optimizer = accelerator.prepare(main_model, side_model, optimizer)
calls = []


def save_hook(models, weights, output_dir):
    calls.append(("save", len(models), len(weights)))
    side = extract_model_from_parallel(side_model)
    assert models[1] is side and set(weights[1]) == {"weight", "bias"}
    if accelerator.is_main_process:
        os.makedirs(os.path.join(output_dir, "side"))
        torch.save(side.state_dict(), os.path.join(output_dir, "side", "weights.pt"))
    weights.pop(1)


def load_hook(models, input_dir):
    calls.append(("load", len(models), input_dir))
    models.pop(1).load_state_dict(torch.load(os.path.join(input_dir, "side", "weights.pt")))


saving = accelerator.register_save_state_pre_hook(save_hook)
loading = accelerator.register_load_state_pre_hook(load_hook)
first = os.path.join(output, "with_hooks")
accelerator.wait_for_everyone()
accelerator.save_state(first)
with open(os.path.join(first, "metadata.json")) as manifest:
    assert json.load(manifest)["num_models"] == 1, "the model the hook saved was saved again"
assert os.path.isfile(os.path.join(first, "side", "weights.pt")) and not os.path.exists(first + ".hook_files")
before = {name: tensor.clone() for name, tensor in extract_model_from_parallel(side_model).state_dict().items()}
main_before = extract_model_from_parallel(main_model).weight.detach().clone()
with torch.no_grad():
    for model in (main_model, side_model):
        for parameter in model.parameters():
            parameter.add_(1.0)
accelerator.load_state(first)
assert torch.equal(extract_model_from_parallel(main_model).weight, main_before)
assert all(torch.equal(extract_model_from_parallel(side_model).state_dict()[name], tensor)
           for name, tensor in before.items()), "the load hook did not restore the side model"
assert calls == [("save", 2, 2), ("load", 2, first)], calls
saving.remove()
loading.remove()
second = os.path.join(output, "without_hooks")
accelerator.save_state(second)
with open(os.path.join(second, "metadata.json")) as manifest:
    assert json.load(manifest)["num_models"] == 2
assert len(calls) == 2, "a removed hook still ran"

# get_logger: main_process_only (the default) logs on the local main process only.
records = []
handler = logging.Handler()
handler.emit = records.append
logger = get_logger("utilities", log_level="INFO")
logger.logger.addHandler(handler)
logger.info("main only")
logger.info("everyone", main_process_only=False)
logger.info("in turn", main_process_only=False, in_order=True)
logger.debug("below the level", main_process_only=False)
expected = (["main only"] if accelerator.is_local_main_process else []) + ["everyone", "in turn"]
assert [record.getMessage() for record in records] == expected, [record.getMessage() for record in records]

# find_executable_batch_size: halves on an out-of-memory error, keeps other errors, remembers what worked.
tried = []


@find_executable_batch_size(starting_batch_size=64)
def train(batch_size, limit):
    tried.append(batch_size)
    if batch_size > limit:
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
    return batch_size


assert train(10) == 8 and tried == [64, 32, 16, 8]
assert train(100) == 8 and tried[-1] == 8, "the batch size found is kept"


@find_executable_batch_size(starting_batch_size=4)
def broken(batch_size):
    raise ValueError("not about memory")


try:
    broken()
    raise AssertionError("a ValueError was retried away")
except ValueError:
    pass

# extract_model_from_parallel(recursive=True): a prepared model held inside another module is unwrapped too.
holder = torch.nn.Module()
holder.inner = main_model
assert extract_model_from_parallel(holder, recursive=True).inner is extract_model_from_parallel(main_model)

# release_memory: a None for each object.
a, b = release_memory(torch.ones(3), [1, 2])
assert a is None and b is None
accelerator.wait_for_everyone()
accelerator.print(f"utilities: ok on {processes} processes")
