"""An eager nn.Module trained on 2 processes under ZeRO (`zero_identity.py STAGE ACCUMULATION OUT`: Accelerate's
DeepSpeedPlugin(zero_stage=STAGE), or with STAGE "fsdp" its FullyShardedDataParallelPlugin(SHARD_GRAD_OP), with
"fsdp-full" FULL_SHARD with a size-based wrap policy and cpu_offload (on the CPU the shares stay where they
are: the option's path through the plugin and the library), "fsdp-keep" the same with reshard_after_forward False,
"fsdp-ckpt" the same with activation_checkpointing (each Linear's forward recomputed in backward, the
recomputation consuming the backward's prefetches: forward_prefetch and BACKWARD_PRE), "fsdp-post" the same
without checkpointing, with forward_prefetch and BACKWARD_POST ("fsdp-keep" with forward_prefetch; DeepSpeed's
stage 3 prefetches forward and BACKWARD_PRE), "fsdp-hybrid" and "fsdp-hybrid2" HYBRID_SHARD with that wrap policy and
HYBRID_SHARD_ZERO2 (launched on several machines by tests/train/hybrid_shard_test.sh), "1-offload" DeepSpeed's
stage 1 with offload_optimizer_device "cpu" and "fsdp-offload" SHARD_GRAD_OP with cpu_offload (ZeRO stage 2), whose
optimizers step the library's host copies of the process's elements, never the module's parameters;
a STAGE ending in "-delays" also sleeps a random 0-4 ms, drawn per process, before every module's forward
(so before each unit's gather), before every gradient is accumulated (so before each reduction) and before
every optimizer step), clipping on, by three optimizers in turn: accel's AdamW (OptimizerSpec),
torch's AdamW and torch's SGD with momentum, each with a fresh copy of the module and a LambdaLR. Layers of
131 units, so that the processes own pieces of parameters. Each run saves its state after 10 steps, trains
10 more, loads the state back and trains those 10 again: the weights must come out the same (the optimizer's
share of the state restored). Writes rank 0's final weights and optimizer state bytes per optimizer to OUT;
the test compares stages 1, 2 and 3 with stage 0: the same weights bit for bit, about half the state. Under
ZeRO a torch optimizer over parameters of no prepared module is refused. Under stage 3 the module holds no
parameter memory between steps."""
import copy
import random
import sys
import tempfile
import time

import torch
import torch.nn.functional as F

import accel
from accel.utils import broadcast_object_list, load_checkpoint_in_model

STAGE, ACCUMULATION, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
DELAYS = STAGE.endswith("-delays")
STAGE = STAGE[:-len("-delays")] if DELAYS else STAGE
STEPS, SAVED_AT = 20, 10

if STAGE in ("fsdp", "fsdp-offload"):  # FSDP's SHARD_GRAD_OP, which accel trains as ZeRO stage 2
    accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION,
                                    fsdp_plugin=accel.FullyShardedDataParallelPlugin(
                                        sharding_strategy="SHARD_GRAD_OP", cpu_offload=STAGE == "fsdp-offload"))
elif STAGE == "1-offload":
    accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION,
                                    deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=1, offload_optimizer_device="cpu"))
elif STAGE == "fsdp-hybrid2":  # SHARD_GRAD_OP within each machine, replicated between them
    accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION,
                                    fsdp_plugin=accel.FullyShardedDataParallelPlugin(sharding_strategy="HYBRID_SHARD_ZERO2"))
elif STAGE in ("fsdp-full", "fsdp-keep", "fsdp-ckpt", "fsdp-post", "fsdp-hybrid"):  # FULL_SHARD (ZeRO-3), each Linear a unit
    accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION,
                                    fsdp_plugin=accel.FullyShardedDataParallelPlugin(
                                        sharding_strategy="HYBRID_SHARD" if STAGE == "fsdp-hybrid" else "FULL_SHARD",
                                        auto_wrap_policy="SIZE_BASED_WRAP",
                                        min_num_params=20, reshard_after_forward=STAGE != "fsdp-keep",
                                        cpu_offload=STAGE == "fsdp-full",
                                        activation_checkpointing=STAGE == "fsdp-ckpt",
                                        forward_prefetch=STAGE != "fsdp-full",
                                        backward_prefetch={"fsdp-post": "BACKWARD_POST",
                                                           "fsdp-ckpt": "BACKWARD_PRE"}.get(STAGE)))
else:
    accelerator = accel.Accelerator(cpu=True, gradient_accumulation_steps=ACCUMULATION,
                                    deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=int(STAGE)))
torch.manual_seed(0)
template = torch.nn.Sequential(torch.nn.Linear(6, 131), torch.nn.ReLU(), torch.nn.Linear(131, 3))
OPTIMIZERS = {
    "accel-adamw": lambda model: accel.OptimizerSpec("adamw", lr=0.01),
    "torch-adamw": lambda model: torch.optim.AdamW(model.parameters(), lr=0.01),
    "torch-sgd": lambda model: torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3),
}


delays = random.Random()


def delay(*_):
    if DELAYS:
        time.sleep(delays.uniform(0, 0.004))


def delayed(module):
    """module with the random delays hooked in before its forwards and its gradients' accumulation, registered
    before prepare's hooks, so that they run first."""
    for sub in module.modules():
        sub.register_forward_pre_hook(delay)
    for parameter in module.parameters():
        parameter.register_hook(lambda grad: delay() or grad)
    return module


def micro_steps(model, optimizer, scheduler, generator, first, last):
    for _ in range(first * ACCUMULATION, last * ACCUMULATION):
        x = torch.randn(8, 6, generator=generator)
        y = torch.randint(0, 3, (8,), generator=generator)
        with accelerator.accumulate(model):
            accelerator.backward(F.cross_entropy(model(x), y))
            if accelerator.sync_gradients:
                accelerator.clip_grad_norm_(model.parameters(), 0.05)
            delay()
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()


def weights_of(model):
    return {name: value.detach().clone() for name, value in accelerator.get_state_dict(model).items()}


def state_bytes(optimizer, model):
    if isinstance(optimizer, accel.Optimizer):
        return model._hosted.model.grad_sync_stat("optimizer_state_bytes")
    return sum(value.numel() * value.element_size() for entry in optimizer.state.values()
               for value in entry.values() if isinstance(value, torch.Tensor) and value.dim() > 0)


if STAGE != "0":
    # Under ZeRO a torch optimizer steps a share of one prepared module's parameters: others are refused.
    loose = torch.nn.Parameter(torch.zeros(3))
    try:
        accelerator.prepare(torch.optim.SGD([loose], lr=0.1))
        raise AssertionError("a torch optimizer over parameters of no prepared module was prepared under ZeRO")
    except accel.UnsupportedError as error:
        assert "prepared module" in str(error), error

delays.seed(accelerator.process_index)
results = {}
for name, make in OPTIMIZERS.items():
    module = delayed(copy.deepcopy(template))
    initial = [parameter.detach().clone() for parameter in module.parameters()]
    optimizer = make(module)
    if isinstance(optimizer, accel.OptimizerSpec):
        model, optimizer = accelerator.prepare(module, optimizer)
        scheduler = accelerator.prepare(accel.SchedulerSpec("linear", optimizer, warmup_steps=2, total_steps=40))
    else:
        scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0 / (1 + 0.05 * step))
        model, optimizer, scheduler = accelerator.prepare(module, optimizer, scheduler)
    if STAGE in ("1-offload", "fsdp-offload") and not isinstance(optimizer, accel.Optimizer):
        # The torch optimizer's groups hold the library's copies, none of them in a parameter's memory.
        ranges = [(p.data_ptr(), p.data_ptr() + p.numel() * p.element_size()) for p in module.parameters()]
        stepped = [view for group in optimizer.param_groups for view in group["params"]]
        assert stepped and not any(begin <= view.data_ptr() < end for view in stepped for begin, end in ranges), \
            f"{name}: offloaded, the optimizer steps the parameters' memory"
    generator = torch.Generator().manual_seed(1 + accelerator.process_index)
    micro_steps(model, optimizer, scheduler, generator, 0, SAVED_AT)
    resumed_data = generator.get_state()
    with tempfile.TemporaryDirectory() as folder:
        folder = broadcast_object_list([folder])[0]  # one checkpoint folder for every process
        accelerator.save_state(folder)
        micro_steps(model, optimizer, scheduler, generator, SAVED_AT, STEPS)
        final = weights_of(model)
        accelerator.load_state(folder)
        accelerator.wait_for_everyone()
    generator.set_state(resumed_data)
    micro_steps(model, optimizer, scheduler, generator, SAVED_AT, STEPS)
    again = weights_of(model)
    assert [key for key in final if not torch.equal(final[key], again[key])] == [], f"{name}: the resume differs"
    assert all(not torch.equal(before, final[name]) for before, name in zip(initial, final)), "nothing trained"
    if STAGE == "fsdp-ckpt":
        # Each Linear's forward runs again in backward, its activations not kept.
        calls, linear = [], F.linear
        F.linear = lambda *args, **kwargs: calls.append(1) or linear(*args, **kwargs)
        accelerator.backward(model(torch.randn(2, 6)).sum() * 0)
        F.linear = linear
        optimizer.zero_grad()
        assert len(calls) == 4, f"{name}: {len(calls)} linear calls for a forward and backward of 2 Linears"
    if STAGE in ("3", "fsdp-full", "fsdp-keep", "fsdp-ckpt", "fsdp-hybrid"):
        held = [key for key, parameter in accelerator.unwrap_model(model).named_parameters() if parameter.storage().size()]
        assert held == [], f"{name}: parameters still held between steps: {held}"
        # After a forward the units are released (reshard_after_forward), or kept to the backward.
        probe = model(torch.randn(2, 6))
        kept = [bool(parameter.storage().size()) for parameter in module.parameters()]
        assert all(kept) if STAGE == "fsdp-keep" else not any(kept), f"{name}: {kept} after the forward"
        accelerator.backward(probe.sum() * 0)
        optimizer.zero_grad()
        # save_model streams the units (the library writes them as they are gathered) into the files of
        # any stage; get_state_dict gives the weights to the main process only, as Accelerate's FSDP.
        assert accelerator.is_main_process or again == {}, "get_state_dict copies on the main process only"
        with tempfile.TemporaryDirectory() as saved:
            saved = broadcast_object_list([saved])[0]
            accelerator.save_model(model, saved, max_shard_size=2000)
            if accelerator.is_main_process:
                loaded = copy.deepcopy(template)
                load_checkpoint_in_model(loaded, saved)
                differing = [key for key, value in loaded.state_dict().items() if not torch.equal(value, again[key])]
                assert differing == [], f"{name}: save_model wrote other values for {differing}"
            accelerator.wait_for_everyone()
    results[name] = {"weights": final, "optimizer_state_bytes": state_bytes(optimizer, model)}
    accelerator.free_memory()
    # free_memory gives a sharded module its whole parameters back.
    if accelerator.is_main_process:
        assert all(torch.equal(again[key], value) for key, value in module.state_dict().items()), f"{name}: free_memory"

if accelerator.is_main_process:
    torch.save(results, OUT)
accelerator.print(f"zero_identity: stage {STAGE}{' with delays' if DELAYS else ''}, accumulation {ACCUMULATION}: ok")
