"""The files of `accel checkpoint merge` (`merge_weights.py PHASE DIR`): PHASE "sharded" trains a module with
tied weights and BatchNorm buffers 4 steps on 2 processes under FSDP's FULL_SHARD (size-based units), then
saves its state into DIR/checkpoint (FULL_STATE_DICT) and DIR/checkpoint_pieces (SHARDED_STATE_DICT: each
process its pieces), its model into DIR/shards (max_shard_size 2000 bytes) and rank 0's
weights into DIR/weights.pt; PHASE "whole" (1 process, no sharding) loads those weights into a fresh module
and save_model's it into DIR/stage0 (one file) and DIR/stage0_shards (2000 bytes): the files a merge of the
sharded run's checkpoint or shards must give (test_accelerate_scripts.py runs the merges)."""
import sys

import torch
import torch.nn.functional as F

import accel

PHASE, DIR = sys.argv[1], sys.argv[2]


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(50, 16)
        self.body = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.BatchNorm1d(64),
                                        torch.nn.Linear(64, 16))
        self.head = torch.nn.Linear(16, 50, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, tokens):
        return self.head(self.body(self.embed(tokens)))


torch.manual_seed(0)
module = Net()
if PHASE == "sharded":
    accelerator = accel.Accelerator(cpu=True, fsdp_plugin=accel.FullyShardedDataParallelPlugin(
        sharding_strategy="FULL_SHARD", auto_wrap_policy="SIZE_BASED_WRAP", min_num_params=500))
    model, optimizer = accelerator.prepare(module, torch.optim.AdamW(module.parameters(), lr=0.01))
    for step in range(4):
        generator = torch.Generator().manual_seed(step * 10 + accelerator.process_index)
        tokens = torch.randint(0, 50, (8,), generator=generator)
        accelerator.backward(F.cross_entropy(model(tokens), torch.randint(0, 50, (8,), generator=generator)))
        optimizer.step()
        optimizer.zero_grad()
    accelerator.save_state(f"{DIR}/checkpoint")
    # The same state with each process writing its piece of every tensor, as FSDP's SHARDED_STATE_DICT.
    accelerator.state.fsdp_plugin.set_state_dict_type("SHARDED_STATE_DICT")
    accelerator.save_state(f"{DIR}/checkpoint_pieces")
    accelerator.save_model(model, f"{DIR}/shards", max_shard_size=2000)
    weights = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        torch.save(weights, f"{DIR}/weights.pt")
else:
    accelerator = accel.Accelerator(cpu=True)
    module.load_state_dict(torch.load(f"{DIR}/weights.pt"))
    model = accelerator.prepare(module)
    accelerator.save_model(model, f"{DIR}/stage0")
    accelerator.save_model(model, f"{DIR}/stage0_shards", max_shard_size=2000)
accelerator.print(f"merge_weights: {PHASE}: ok")
accelerator.end_training()
