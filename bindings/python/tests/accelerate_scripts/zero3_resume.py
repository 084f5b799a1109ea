"""A checkpoint of ZeRO resumed elsewhere (`zero3_resume.py PHASE STAGE DIR [OPTIMIZER [PLUGIN]]`): PHASE "save"
trains an eager module 6 steps under ZeRO stage STAGE, saves its state into DIR (save_state_async), trains 6
more and writes rank 0's weights to DIR/expected.pt; PHASE "resume" (another stage and number of processes)
loads DIR, trains the same 6 steps on the same global batches and must end with those weights. OPTIMIZER
"accel" (accel's SGD with momentum; the default) or "torch" (torch's AdamW and a StepLR schedule): either
saves each process's share of the state under ZeRO, and any number of processes reads them all. The global
batch is 24 rows, split evenly over 1, 2 or 3 processes. PLUGIN: "deepspeed" (DeepSpeedPlugin(zero_stage=STAGE), the
default; under stage 3 each process writes its pieces of the model, as DeepSpeed's checkpoints are partitioned, in
the background too), or FSDP's (FULL_SHARD, SHARD_GRAD_OP or NO_SHARD for stages 3, 2 and 0) with state_dict_type
"full" (FULL_STATE_DICT: under stage 3 the model's one file streamed before the call returns, the rest written in
the background) or "sharded" (SHARDED_STATE_DICT: pieces, as DeepSpeed's)."""
import sys

import torch
import torch.nn.functional as F

import accel

PHASE, STAGE, DIR = sys.argv[1], int(sys.argv[2]), sys.argv[3]
OPTIMIZER = sys.argv[4] if len(sys.argv) > 4 else "accel"
PLUGIN = sys.argv[5] if len(sys.argv) > 5 else "deepspeed"
if PLUGIN == "deepspeed":
    plugins = {"deepspeed_plugin": accel.DeepSpeedPlugin(zero_stage=STAGE)}
else:
    strategy = {3: "FULL_SHARD", 2: "SHARD_GRAD_OP", 0: "NO_SHARD"}[STAGE]
    plugins = {"fsdp_plugin": accel.FullyShardedDataParallelPlugin(
        sharding_strategy=strategy, state_dict_type={"full": "FULL_STATE_DICT", "sharded": "SHARDED_STATE_DICT"}[PLUGIN])}
# split_batches: the schedule steps once per global batch, as the batch is cut here (Accelerate's scheduler
# otherwise steps once per process, and runs on different numbers of processes follow different schedules).
accelerator = accel.Accelerator(cpu=True, dataloader_config=accel.DataLoaderConfiguration(split_batches=True),
                                **plugins)
torch.manual_seed(0)
module = torch.nn.Sequential(torch.nn.Linear(6, 131), torch.nn.ReLU(), torch.nn.Linear(131, 3))
if OPTIMIZER == "torch":
    adamw = torch.optim.AdamW(module.parameters(), lr=0.01)
    model, optimizer, scheduler = accelerator.prepare(module, adamw, torch.optim.lr_scheduler.StepLR(adamw, 2, 0.5))
else:
    model, optimizer = accelerator.prepare(module, accel.OptimizerSpec("sgd", lr=0.05, momentum=0.9))
    scheduler = None
rows = 24 // accelerator.num_processes


def train(first, last):
    for step in range(first, last):
        generator = torch.Generator().manual_seed(step)
        x, y = torch.randn(24, 6, generator=generator), torch.randint(0, 3, (24,), generator=generator)
        mine = slice(accelerator.process_index * rows, (accelerator.process_index + 1) * rows)
        accelerator.backward(F.cross_entropy(model(x[mine]), y[mine]))
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
        optimizer.zero_grad()


if PHASE == "save":
    train(0, 6)
    accelerator.save_state_async(DIR)
    train(6, 12)
    accelerator.wait_for_save()
    weights = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        torch.save(weights, f"{DIR}/expected.pt")
else:
    accelerator.load_state(DIR)
    train(6, 12)
    weights = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        expected = torch.load(f"{DIR}/expected.pt")
        differing = [name for name in expected if not torch.allclose(expected[name], weights[name], rtol=0, atol=1e-6)]
        assert differing == [], differing
accelerator.print(f"zero3_resume: {PHASE} at stage {STAGE} on {accelerator.num_processes} ({OPTIMIZER}): ok")
