#!/usr/bin/python3
"""The eager side of the training benchmark: the bench MLP as a Python nn.Module (bench_torch.load_mlp),
trained by a plain torch loop or by accel's Python package as an Accelerate script trains it
(bench/run_train.sh compares them with each other and with bench/train_torch_ddp.py).

    /usr/bin/python3 bench/train_torch_eager.py torch MODEL [steps] [warmup]
    accel launch --nproc-per-node N --cpu --master-port 0 -- /usr/bin/python3 bench/train_torch_eager.py accel MODEL [steps] [warmup]

torch: one process; a step is zero_grad, forward, F.cross_entropy, backward, torch.optim.SGD's step.
accel: Accelerator(cpu=True).prepare(module, torch.optim.SGD(...)), then zero_grad, forward, loss,
accelerator.backward(loss), step (the gradients all-reduced from autograd's hooks with several processes).
Both: SGD lr 0.01, batch 64 per process cycling through bench_torch's 4 synthetic batches of the rank,
torch.set_num_threads(1). Warm-up steps, then (accel) a barrier, then the timed steps; rank 0 prints one
line of key=value pairs, "torch_eager ..." or "accel_eager ...", as the other sides do. The accel package
is bindings/python of this checkout; the library is ACCEL_LIBRARY (run_train.sh sets it).
"""
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bench_torch import BATCH, BATCHES, LR, load_mlp, make_batches  # noqa: E402


def main() -> int:
    if len(sys.argv) < 3 or sys.argv[1] not in ("torch", "accel"):
        print(f"usage: {sys.argv[0]} torch|accel MODEL [steps] [warmup]", file=sys.stderr)
        return 2
    mode, path = sys.argv[1], sys.argv[2]
    steps = int(sys.argv[3]) if len(sys.argv) > 3 else 100
    warmup = int(sys.argv[4]) if len(sys.argv) > 4 else 10
    torch.set_num_threads(1)
    model = load_mlp(path)
    model.train()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    if mode == "accel":
        from accel import Accelerator
        accelerator = Accelerator(cpu=True)
        model, optimizer = accelerator.prepare(model, optimizer)
        rank, world, backward, barrier = (accelerator.process_index, accelerator.num_processes,
                                          accelerator.backward, accelerator.wait_for_everyone)
    else:
        rank, world, backward, barrier = 0, 1, torch.Tensor.backward, lambda: None
    batches = make_batches(rank)

    def step(i):
        x, y = batches[i % BATCHES]
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        backward(loss)
        optimizer.step()
        return loss

    first_loss = step(0).item()
    for i in range(1, warmup):
        step(i)
    barrier()
    start = time.perf_counter()
    for i in range(steps):
        loss = step(warmup + i)
    elapsed = time.perf_counter() - start
    last_loss = loss.item()
    if rank == 0:
        print(f"{mode}_eager processes={world} steps={steps} warmup={warmup} step_ms={1e3 * elapsed / steps:.3f} "
              f"samples_per_s={world * BATCH * steps / elapsed:.1f} first_loss={first_loss:.6f} "
              f"last_loss={last_loss:.6f} torch_num_threads={torch.get_num_threads()} torch={torch.__version__}",
              flush=True)
    barrier()
    return 0


if __name__ == "__main__":
    sys.exit(main())
