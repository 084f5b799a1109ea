"""An eager torch MLP trained through the accel Python package on the processes `accel launch` starts,
under a ZeRO stage (DeepSpeedPlugin(zero_stage=STAGE): stage 3 gathers each Linear around its forward and
backward), for bench/run_zero_memory.sh's stage 3 rows and step times.

usage: train_torch_sharded.py STAGE STEPS IN WIDTH DEPTH OUT [SAVE_DIR [OPTIMIZER [load]]]
OPTIMIZER: torch (torch.optim.AdamW, the default) or accel (accel.OptimizerSpec("adamw"), the library's).
With SAVE_DIR, accelerator.save_state(SAVE_DIR) after the steps (the checkpoint's memory, part 3 of
run_zero_memory.sh); with "load" after it, nothing is trained: the fresh processes prepare the model and
load_state(SAVE_DIR) (a resumed run's first call), and rank 0 prints
  accel-torch-load stage=S rss_load_kb=L
L: the processes' peak resident memory after the load, summed over them. Otherwise rank 0 prints one line:
  accel-torch stage=S step_ms=T parameter_bytes=P optimizer_state_bytes=O rss_training_kb=R rss_peak_kb=Q
    rss_built_kb=B rss_prepare_kb=A
step_ms: the median step (forward, backward, AdamW) after 3 warm-up steps; parameter_bytes: what this
process holds of the parameters between steps (torch's storage plus, under stage 3, its share in the
library); optimizer_state_bytes: AdamW's state on this process; rss_training_kb: the processes' peak
resident memory after the steps, summed over them; rss_peak_kb: the same at the end (after the save):
process memory without the page cache, which a cgroup's figure counts; rss_built_kb and rss_prepare_kb: the
same just before prepare (the model built in host memory) and just after it (prepare's peak). With SAVE_DIR, save_ms=W follows
them: the save_state's wall time, every process done. Under stage 3 it adds PyTorch's
bounds for fully_shard, per process (P the model's parameter bytes, N the processes):
  gather_wait_ms=W share_bytes=S forward_peak_bytes=F forward_bound_bytes=B after_step_bytes=A
  after_step_bound_bytes=C
gather_wait_ms: the time per step the units' gathers waited for their all-gathers (the library's
unit_gather_wait_ms; what prefetching hides); S: the parameters' share held in the library (P/N and
alignment); F: S plus the most parameter memory the units gathered at once during a forward (over the
steps after the warm-up; a prefetched unit counts); B: S + 3 x the largest unit; A: S plus the share's
gradients and the optimizer's state after a step; C: 4 x S. The package is bindings/python of this
checkout; the library is ACCEL_LIBRARY (run_zero_memory.sh sets it). Stage 3 prefetches as DeepSpeed's
does (the next unit's gather started as a unit's forward and backward begin); ZERO_PREFETCH=off in the
environment switches that off. ZERO_CHECKPOINT_MODEL=whole has save_state write the model as one file streamed
by process 0, =sharded as each process's pieces (FSDP's SHARDED_STATE_DICT; DeepSpeed's stage 3 default).
ZERO_STRATEGY (FULL_SHARD, HYBRID_SHARD, NO_SHARD: bench/run_hybrid.sh) trains under Accelerate's
FullyShardedDataParallelPlugin with that strategy instead, each Linear a unit (STAGE is then only printed).
"""
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bindings", "python"))
import accel  # noqa: E402

WARMUP = 3


def main() -> int:
    use_accel_optimizer = len(sys.argv) >= 9 and sys.argv[8] == "accel"
    loading = len(sys.argv) == 10 and sys.argv[9] == "load"
    if (len(sys.argv) not in (7, 8, 9, 10) or not all(value.isdigit() for value in sys.argv[1:7])
            or (len(sys.argv) >= 9 and sys.argv[8] not in ("torch", "accel"))
            or (len(sys.argv) == 10 and not loading)):
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    stage, steps, inputs, width, depth, outputs = (int(value) for value in sys.argv[1:7])
    strategy = os.environ.get("ZERO_STRATEGY")
    if strategy:
        plugin = accel.FullyShardedDataParallelPlugin(sharding_strategy=strategy, auto_wrap_policy="SIZE_BASED_WRAP",
                                                      min_num_params=1000, forward_prefetch=True,
                                                      backward_prefetch="BACKWARD_PRE")
        accelerator = accel.Accelerator(cpu=True, fsdp_plugin=plugin)
    else:
        accelerator = accel.Accelerator(cpu=True, deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=stage))
    torch.manual_seed(0)
    layers = [torch.nn.Linear(inputs, width), torch.nn.ReLU()]
    for _ in range(depth - 1):
        layers += [torch.nn.Linear(width, width), torch.nn.ReLU()]
    layers.append(torch.nn.Linear(width, outputs))
    module = torch.nn.Sequential(*layers)
    spec = (accel.OptimizerSpec("adamw", lr=1e-4) if use_accel_optimizer
            else torch.optim.AdamW(module.parameters(), lr=1e-4))
    rss_built = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    model, optimizer = accelerator.prepare(module, spec)
    rss_prepared = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    hosted = accelerator._hosted_owning(next(module.parameters()))
    if os.environ.get("ZERO_CHECKPOINT_MODEL"):
        hosted.model.set_checkpoint_model(os.environ["ZERO_CHECKPOINT_MODEL"])
    if loading:
        accelerator.load_state(sys.argv[7])
        rss = accelerator.reduce(torch.tensor([resource.getrusage(resource.RUSAGE_SELF).ru_maxrss]), reduction="sum")
        if accelerator.is_main_process:
            print(f"accel-torch-load stage={stage} rss_load_kb={int(rss[0])}", flush=True)
        accelerator.end_training()
        return 0
    generator = torch.Generator().manual_seed(1 + accelerator.process_index)
    units = getattr(hosted, "_units", [])
    if os.environ.get("ZERO_PREFETCH") == "off":
        hosted._forward_prefetch, hosted._backward_prefetch = False, None
    gathered_peak = [0]

    def count_held():
        if not hosted._end_queued:
            held = sum(u.flat.numel() * u.flat.element_size() for u in units if u.gathered or u.prefetched)
            gathered_peak[0] = max(gathered_peak[0], held)

    def counting(unit):
        gather, prefetch = unit.gather, unit.prefetch

        def counted_gather():
            gather()
            count_held()

        def counted_prefetch():
            prefetch()
            count_held()
        unit.gather, unit.prefetch = counted_gather, counted_prefetch
    for unit in units:  # stage 3 on several processes: the most parameter memory gathered at once in a forward
        counting(unit)
    times = []
    for step in range(WARMUP + steps):
        x = torch.randn(64, inputs, generator=generator)
        y = torch.randint(0, outputs, (64,), generator=generator)
        started = time.perf_counter()
        accelerator.backward(F.cross_entropy(model(x), y))
        optimizer.step()
        optimizer.zero_grad()
        if step == WARMUP - 1 and units:
            warm_wait_ms = hosted.model.grad_sync_stat("unit_gather_wait_ms")
        if step >= WARMUP:
            times.append(time.perf_counter() - started)
    parameter_bytes = sum(p.storage().size() * p.element_size() for p in module.parameters())
    # A hybrid strategy splits the units over each machine's processes.
    shards = accelerator.num_processes
    if strategy and strategy.startswith("HYBRID"):
        shards = int(os.environ.get("LOCAL_WORLD_SIZE", shards))
    share_bytes = sum(hosted.model.unit_numel(u) // shards * 4 for u in range(len(units)))
    parameter_bytes += share_bytes
    if use_accel_optimizer:
        state_bytes = int(hosted.model.grad_sync_stat("optimizer_state_bytes"))
    else:
        state_bytes = sum(value.numel() * value.element_size() for entry in optimizer.state.values()
                          for value in entry.values() if isinstance(value, torch.Tensor) and value.dim() > 0)
    bounds = ""
    if units:
        largest = max(u.flat.numel() * u.flat.element_size() for u in units)
        after_step = share_bytes + int(hosted.model.grad_sync_stat("gradient_bytes")) + state_bytes
        wait_ms = (hosted.model.grad_sync_stat("unit_gather_wait_ms") - warm_wait_ms) / steps
        bounds = (f" gather_wait_ms={wait_ms:.2f}"
                  f" share_bytes={share_bytes} forward_peak_bytes={share_bytes + gathered_peak[0]}"
                  f" forward_bound_bytes={share_bytes + 3 * largest} after_step_bytes={after_step}"
                  f" after_step_bound_bytes={4 * share_bytes}")
    rss_training = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    saving = ""
    if len(sys.argv) >= 8:
        accelerator.wait_for_everyone()
        started = time.perf_counter()
        accelerator.save_state(sys.argv[7])
        accelerator.wait_for_everyone()
        saving = f" save_ms={(time.perf_counter() - started) * 1000:.0f}"
    rss = accelerator.reduce(torch.tensor([rss_training, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
                                           rss_built, rss_prepared]), reduction="sum")
    if accelerator.is_main_process:
        print(f"accel-torch stage={stage} step_ms={statistics.median(times) * 1000:.2f} "
              f"parameter_bytes={parameter_bytes} optimizer_state_bytes={state_bytes} "
              f"rss_training_kb={int(rss[0])} rss_peak_kb={int(rss[1])} rss_built_kb={int(rss[2])} "
              f"rss_prepare_kb={int(rss[3])}" + saving + bounds, flush=True)
    accelerator.end_training()
    return 0


if __name__ == "__main__":
    sys.exit(main())
