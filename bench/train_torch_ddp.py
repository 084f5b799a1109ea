#!/usr/bin/python3
"""The PyTorch DDP side of the training benchmark, in Debian's Python torch (bench/run_train.sh runs it
interleaved with bench/train_accel.c and compares).

    accel launch --nproc-per-node 2 --cpu --master-port 0 -- /usr/bin/python3 bench/train_torch_ddp.py MODEL [steps] [warmup]

The launcher sets RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT; the process group is
init_process_group("gloo") through env://. The model: examples/make_mlp.py's MLP (784-1024-1024-10,
an nn.Module) with the weights of the TorchScript file MODEL that the other sides train, wrapped in
DistributedDataParallel with its default bucket settings; torch.optim.SGD (lr 0.01, no momentum) and
F.cross_entropy, batch 64 per process, cycling through the same 4 synthetic batches as
bench/train_accel.c (the same xorshift64* numbers, seeded by the rank). A step: zero_grad, forward,
loss, backward, step. Warm-up steps, then dist.barrier(), then the timed steps; rank 0 prints one line of
key=value pairs like train_accel's.
"""
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel

from bench_torch import BATCH, BATCHES, LR, cpu_s, load_mlp, make_batches, minor_faults


def main() -> int:
    if len(sys.argv) < 2:
        print(f"usage: {sys.argv[0]} MODEL [steps] [warmup]", file=sys.stderr)
        return 2
    path = sys.argv[1]
    steps = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    warmup = int(sys.argv[3]) if len(sys.argv) > 3 else 10
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()
    batches = make_batches(rank)

    model = load_mlp(path)
    model.train()
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.SGD(ddp.parameters(), lr=LR)

    def step(i):
        x, y = batches[i % BATCHES]
        optimizer.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        optimizer.step()
        return loss

    first_loss = step(0).item()
    for i in range(1, warmup):
        step(i)
    dist.barrier()
    faults_start = minor_faults()
    cpu_start = cpu_s()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(warmup + i)
    elapsed = time.perf_counter() - start
    cpu_elapsed = cpu_s() - cpu_start
    faults = minor_faults() - faults_start
    threads = len(os.listdir("/proc/self/task"))
    last_loss = loss.item()
    if rank == 0:
        print(f"torch_ddp processes={world} steps={steps} warmup={warmup} step_ms={1e3 * elapsed / steps:.3f} "
              f"samples_per_s={world * BATCH * steps / elapsed:.1f} first_loss={first_loss:.6f} "
              f"last_loss={last_loss:.6f} omp_num_threads={os.environ.get('OMP_NUM_THREADS', 'unset')} "
              f"torch_num_threads={torch.get_num_threads()} threads={threads} cpu_per_wall={cpu_elapsed / elapsed:.2f} "
              f"page_faults_per_step={faults / steps:.0f} "
              f"torch={torch.__version__}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
