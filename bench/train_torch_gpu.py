#!/usr/bin/env python3
"""The Python sides of the GPU training benchmark: the loop of bench/train_accel.c in eager PyTorch and in
Hugging Face Accelerate (bench/run_gpu.sh runs both, interleaved with train_accel and train_libtorch, and
compares step times).

    python3 bench/train_torch_gpu.py eager|accelerate|compiled MODEL [steps] [warmup] [--cpu] [--bf16] [--serve]

The model: examples/make_mlp.py's MLP 784-1024-1024-10 built as a plain nn.Module and given the weights of
the TorchScript file MODEL that the C and C++ sides train (bench_torch.load_mlp): an eager or Accelerate
user trains an nn.Module, not a TorchScript module. SGD (lr 0.01, no momentum) and F.cross_entropy on the
same 4 synthetic batches of 64 as the other sides (the same xorshift64* numbers, rank 0's), copied to the
device once before the first step; torch.set_num_threads(1). The device is cuda:0, or the CPU with --cpu
(bench/run_gpu.sh's check of its own plumbing on a machine without a GPU).
  eager       a step as the PyTorch AMP recipe writes it: optimizer.zero_grad(set_to_none=True) (what
              accel_optimizer_zero_grad does, and torch 2's default), the forward and the loss under
              torch.autocast(device, dtype=torch.bfloat16) with --bf16, loss.backward(), optimizer.step()
  accelerate  Accelerator(mixed_precision="bf16" with --bf16, else "no"; cpu=True with --cpu), the model and
              optimizer through accelerator.prepare; a step as Accelerate's documentation writes it, the
              sequence accel's step follows: with accelerator.accumulate(model): forward (autocast and the
              logits back to float32 are Accelerate's), loss, accelerator.backward(loss), optimizer.step(),
              optimizer.zero_grad()
  compiled    accelerate's loop with Accelerator(dynamo_plugin=TorchDynamoPlugin(backend="inductor",
              mode="reduce-overhead")): accelerator.prepare compiles the model with torch.compile, whose
              "reduce-overhead" mode replays the forward and backward as CUDA graphs (inductor kernels);
              each step starts with torch.compiler.cudagraph_mark_step_begin(), as torch's documentation
              asks of a training loop in that mode. Compiling happens in the first warm-up steps.
The loss of the last warm-up step is read before the clock starts and the loss of the last timed step
before it stops (on a GPU the steps only queue kernels; the C sides wait the same way, having no
synchronize). Prints one line of key=value pairs like train_accel's, starting with torch_eager or
hf_accelerate. With --serve, as train_accel's serve: "ready" after the warm-up, then a round (`warmup` more
steps, `steps` timed ones, its line) for every line read from standard input, until the input ends.
"""
import argparse
import contextlib
import os
import sys
import time

import torch
import torch.nn.functional as F

from bench_torch import BATCH, BATCHES, LR, cpu_s, load_mlp, make_batches, minor_faults


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("side", choices=["eager", "accelerate", "compiled"])
    parser.add_argument("model")
    parser.add_argument("steps", type=int, nargs="?", default=100)
    parser.add_argument("warmup", type=int, nargs="?", default=10)
    parser.add_argument("--cpu", action="store_true", help="run on the CPU instead of cuda:0")
    parser.add_argument("--bf16", action="store_true", help="mixed precision bf16 (autocast)")
    parser.add_argument("--serve", action="store_true", help="a timed round per line of standard input")
    args = parser.parse_args()
    if args.steps < 1 or args.warmup < 1:
        parser.error("steps and warmup must be at least 1")
    torch.set_num_threads(1)
    precision = "bf16" if args.bf16 else "no"
    model = load_mlp(args.model)
    model.train()
    versions = f"torch={torch.__version__}"

    if args.side == "eager":
        device = torch.device("cpu" if args.cpu else "cuda:0")
        model.to(device)
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)

        def autocast():
            if not args.bf16:
                return contextlib.nullcontext()
            return torch.autocast(device.type, dtype=torch.bfloat16)

        def step(x, y):
            optimizer.zero_grad(set_to_none=True)
            with autocast():
                loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            return loss

        name = "torch_eager"
    else:
        import accelerate
        from accelerate import Accelerator

        compiled = args.side == "compiled"
        plugins = {}
        if compiled:
            from accelerate.utils import TorchDynamoPlugin

            plugins["dynamo_plugin"] = TorchDynamoPlugin(backend="inductor", mode="reduce-overhead")
        accelerator = Accelerator(mixed_precision=precision, cpu=args.cpu, **plugins)
        device = accelerator.device
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        model, optimizer = accelerator.prepare(model, optimizer)

        def step(x, y):
            if compiled:
                torch.compiler.cudagraph_mark_step_begin()
            with accelerator.accumulate(model):
                loss = F.cross_entropy(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            return loss

        name = "hf_compiled" if compiled else "hf_accelerate"
        versions += f" accelerate={accelerate.__version__}"

    batches = [(x.to(device), y.to(device)) for x, y in make_batches(0)]
    taken = 0  # the batches are cycled through by a count of the steps taken, round after round
    first_loss = None

    def warm_up():
        nonlocal taken, first_loss
        for _ in range(args.warmup):
            loss = step(*batches[taken % BATCHES])
            taken += 1
            if first_loss is None:
                first_loss = loss.item()
        loss.item()  # no warm-up kernel still running on the clock

    def timed_round():
        nonlocal taken
        faults_start = minor_faults()
        cpu_start = cpu_s()
        start = time.perf_counter()
        for _ in range(args.steps):
            loss = step(*batches[taken % BATCHES])
            taken += 1
        last_loss = loss.item()
        elapsed = time.perf_counter() - start
        cpu_elapsed = cpu_s() - cpu_start
        faults = minor_faults() - faults_start
        threads = len(os.listdir("/proc/self/task"))
        print(f"{name} processes=1 steps={args.steps} warmup={args.warmup} step_ms={1e3 * elapsed / args.steps:.3f} "
              f"samples_per_s={BATCH * args.steps / elapsed:.1f} first_loss={first_loss:.6f} "
              f"last_loss={last_loss:.6f} omp_num_threads={os.environ.get('OMP_NUM_THREADS', 'unset')} "
              f"torch_num_threads={torch.get_num_threads()} threads={threads} cpu_per_wall={cpu_elapsed / elapsed:.2f} "
              f"page_faults_per_step={faults / args.steps:.0f} device={device} precision={precision} {versions}",
              flush=True)

    warm_up()
    if not args.serve:
        timed_round()
        return 0
    print("ready", flush=True)
    for _ in sys.stdin:
        warm_up()
        timed_round()
    return 0


if __name__ == "__main__":
    sys.exit(main())
