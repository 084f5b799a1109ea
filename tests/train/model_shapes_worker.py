"""One rank of the model-shapes suite (model_shapes_test.py), started by `accel launch --nproc-per-node 2`:
trains every run of RUNS_JSON with accel (the Python binding over libaccel) on the TorchScript module,
with accel on the eager torch module (a host-owned model: forward and backward stay torch's, accel syncs
the gradients), the same with the batches from a torch DataLoader prepared by accel ("loader", as a user
writes it), or with torch's DistributedDataParallel over Gloo on either module, the way Accelerate drives
it, and writes each run's parameters and buffers to OUT_DIR/<side>-<run>-rank<r>.npz.

usage: model_shapes_worker.py accel|script_sharded|eager|loader|sharded|eager,loader|torch|torch_eager RUNS_JSON OUT_DIR
(eager,loader: both, one launch)

The accel, eager and loader sides make one state for all their runs, which must then share their state
settings (mixed precision, gradient accumulation steps).

Every side starts from the weights of the same TorchScript file (the eager side loads them into the case's
torch module) and takes the same batches (RUNS_JSON names them). A step, as in
Accelerate's loop: under accumulate(model), forward (under bf16 autocast, outputs back to float32, when
the run says), the loss (cross entropy of the output, or the one forward returned), backward of
loss / gradient_accumulation_steps, then the optimizer's step and a set-to-none zero_grad where the step
synchronises. Gradients synchronise every accumulation-th micro-step, and never inside an explicit no_sync.
The accel side imports no torch; the eager side uses torch's optimizers and losses, as an Accelerate
script does."""
import contextlib
import json
import os
import sys

import numpy as np


def micro_steps(run):
    return run["steps"] * max(run["accumulation"], run["no_sync"], 1)


def in_explicit_no_sync(run, step):
    return run["no_sync"] > 1 and step % run["no_sync"] != run["no_sync"] - 1


def synchronises(run, step):
    return (step + 1) % run["accumulation"] == 0 and not in_explicit_no_sync(run, step)


def train_accel(runs, out_dir, sides=("accel",)):
    """Every run shares the state settings (mixed precision, accumulation): the driver launches a group
    of runs per setting. sides: "accel" trains the TorchScript module, "script_sharded" the same under ZeRO
    stage 3, "eager" the torch module, "loader" the torch module on a prepared DataLoader's batches,
    "sharded" the torch module under ZeRO stage 3."""
    import accel

    trainers = {"accel": train_one_accel_run, "script_sharded": train_one_script_sharded_run,
                "eager": train_one_eager_run, "loader": train_one_loader_run, "sharded": train_one_sharded_run}
    settings = {"cpu": True, "mixed_precision": runs[0]["mixed_precision"],
                "gradient_accumulation_steps": runs[0]["accumulation"]}
    assert all((run["mixed_precision"], run["accumulation"]) == (runs[0]["mixed_precision"], runs[0]["accumulation"])
               for run in runs), "one launch, one state"
    accelerator = accel.Accelerator(**settings)
    rank = accelerator.process_index
    for run in runs:
        for side in sides:
            # Another Accelerator object on the same state, for this run's model options.
            run_accelerator = accel.Accelerator(**settings, kwargs_handlers=[accel.DistributedDataParallelKwargs(
                broadcast_buffers=run["broadcast_buffers"], find_unused_parameters=run["find_unused_parameters"])],
                **({"deepspeed_plugin": accel.DeepSpeedPlugin(zero_stage=3)} if "sharded" in side else {}))
            try:
                trainers[side](accel, run_accelerator, run, rank, out_dir)
            except accel.AccelError as error:  # refused alike on every rank (a model accel cannot train): go on
                with open(os.path.join(out_dir, f"{side}-{run['run']}-rank{rank}.error"), "w") as file:
                    file.write(str(error))
            run_accelerator.free_memory()  # also restarts the accumulation counter for the next run
            run_accelerator.close()
    accelerator.end_training()


def loss_of(run, output, cross_entropy):
    """One micro-step's loss: the one forward returned (in a dict or first in a tuple), or
    cross_entropy(output) against the step's labels."""
    if run["loss"] == "dict":
        return output["loss"]
    if run["loss"] == "tuple":
        return output[0]
    return cross_entropy(output)


def train_prepared(run_accelerator, run, model, optimizer, steps, cross_entropy):
    """Accelerate's loop over a prepared model and optimizer: steps gives each micro-step's forward
    arguments and labels, cross_entropy(output, labels) is the built-in loss."""
    model.train()
    for step, (inputs, labels) in enumerate(steps):
        with run_accelerator.accumulate(model):
            scope = run_accelerator.no_sync(model) if in_explicit_no_sync(run, step) else contextlib.nullcontext()
            with scope:
                output = model(*inputs)
                run_accelerator.backward(loss_of(run, output, lambda out: cross_entropy(out, labels)))
            if not in_explicit_no_sync(run, step):
                optimizer.step()
                optimizer.zero_grad()


def steps_of(run, data, as_input):
    """Each micro-step's forward arguments and labels, from this rank's arrays; as_input(array) makes an
    argument."""
    for step in range(micro_steps(run)):
        yield [as_input(data[f"input{i}"][step]) for i in range(len(run["inputs"]))], as_input(data["target"][step])


def train_one_accel_run(accel, run_accelerator, run, rank, out_dir):
    data = np.load(run["data"][rank])
    model, optimizer = run_accelerator.prepare(run["model"], accel.OptimizerSpec(run["optimizer"], **run["options"]))
    train_prepared(run_accelerator, run, model, optimizer, steps_of(run, data, lambda array: array),
                   lambda output, labels: accel.compute_loss("cross_entropy", output, labels))
    save(out_dir, "accel", run, rank, model.named_parameters(), model.named_buffers(), lambda t: t.numpy())


def train_one_script_sharded_run(accel, run_accelerator, run, rank, out_dir):
    """As train_one_accel_run under ZeRO stage 3: libaccel cuts the TorchScript forward around the submodules it
    calls and holds what it uses otherwise (docs/fsdp.md), so even the routed case, whose second expert is
    called in a branch, gathers the same units on every rank. The weights are those save_model writes whole
    (every rank gathering each unit, process 0 writing), read back into a fresh copy of the module; the buffers
    this rank's own."""
    data = np.load(run["data"][rank])
    model, optimizer = run_accelerator.prepare(run["model"], accel.OptimizerSpec(run["optimizer"], **run["options"]))
    train_prepared(run_accelerator, run, model, optimizer, steps_of(run, data, lambda array: array),
                   lambda output, labels: accel.compute_loss("cross_entropy", output, labels))
    directory = os.path.join(out_dir, f"script_sharded-{run['run']}")
    run_accelerator.save_model(model, directory)
    run_accelerator.wait_for_everyone()
    whole = accel.Model.load(run["model"])
    whole.load_weights(directory)
    save(out_dir, "script_sharded", run, rank, whole.named_parameters(), model.named_buffers(), lambda t: t.numpy())


def eager_module(run):
    """The run's case as an eager torch module, with the TorchScript file's weights."""
    import torch

    import model_shapes

    module = next(case for case in model_shapes.CASES if case.name == run["name"]).module()
    module.load_state_dict(torch.jit.load(run["model"]).state_dict())
    return module


def torch_optimizer(run, parameters):
    import torch

    return {"sgd": torch.optim.SGD, "adamw": torch.optim.AdamW}[run["optimizer"]](parameters, **run["options"])


def train_one_eager_run(accel, run_accelerator, run, rank, out_dir):
    """The case's eager torch module with the TorchScript file's weights, a torch optimizer and a torch loss,
    prepared by accel as Accelerate prepares them (zero_grad sets to none, as torch's and Accelerate's)."""
    import torch
    import torch.nn.functional as F

    data = np.load(run["data"][rank])
    module = eager_module(run)
    model, optimizer = run_accelerator.prepare(module, torch_optimizer(run, module.parameters()))
    train_prepared(run_accelerator, run, model, optimizer, steps_of(run, data, torch.from_numpy), F.cross_entropy)
    save(out_dir, "eager", run, rank, module.named_parameters(), module.named_buffers(),
         lambda t: t.detach().numpy())


def train_one_sharded_run(accel, run_accelerator, run, rank, out_dir):
    """As train_one_eager_run under ZeRO stage 3 (DeepSpeedPlugin(zero_stage=3): each child of the root a
    unit, gathered around its forward and backward); the weights saved from the module once free_memory has
    given it its whole parameters back (collective). A case whose ranks take different paths (route) is not
    run: see model_shapes_test.py."""
    import torch
    import torch.nn.functional as F

    if "route" in run["inputs"]:
        return

    data = np.load(run["data"][rank])
    module = eager_module(run)
    model, optimizer = run_accelerator.prepare(module, torch_optimizer(run, module.parameters()))
    train_prepared(run_accelerator, run, model, optimizer, steps_of(run, data, torch.from_numpy), F.cross_entropy)
    run_accelerator.free_memory()
    save(out_dir, "sharded", run, rank, module.named_parameters(), module.named_buffers(), lambda t: t.detach().numpy())


def train_one_loader_run(accel, run_accelerator, run, rank, out_dir):
    """As train_one_eager_run, the batches from a torch DataLoader over every rank's arrays, prepared with the
    model as a user writes it: one TensorDataset field per input and the labels, its rows micro-step by
    micro-step and rank by rank, so that the prepared loader deals each rank its own batch of every step
    (batches go to the ranks in turn). A route (one value a step) is a column repeated over the step's rows,
    of which forward takes the first."""
    import torch
    import torch.nn.functional as F
    from torch.utils.data import DataLoader, TensorDataset

    ranks = [np.load(path) for path in run["data"]]
    names = [f"input{i}" for i in range(len(run["inputs"]))] + ["target"]
    rows = ranks[0]["target"].shape[1]
    columns = []
    for name, spec in zip(names, run["inputs"] + ["labels"]):
        per_rank = [data[name] if spec != "route" else np.repeat(data[name], rows, axis=1) for data in ranks]
        interleaved = np.stack(per_rank, axis=1)  # [micro-step, rank, row, ...]
        columns.append(torch.from_numpy(interleaved.reshape(-1, *interleaved.shape[3:])))
    module = eager_module(run)
    model, optimizer, loader = run_accelerator.prepare(module, torch_optimizer(run, module.parameters()),
                                                       DataLoader(TensorDataset(*columns), batch_size=rows))
    assert len(loader) == micro_steps(run)
    routes = [i for i, spec in enumerate(run["inputs"]) if spec == "route"]
    steps = (([column[:1] if i in routes else column for i, column in enumerate(batch[:-1])], batch[-1])
             for batch in loader)
    train_prepared(run_accelerator, run, model, optimizer, steps, F.cross_entropy)
    save(out_dir, "loader", run, rank, module.named_parameters(), module.named_buffers(),
         lambda t: t.detach().numpy())


def train_torch(runs, out_dir, side="torch"):
    """side "torch": DDP over the TorchScript module; "torch_eager": over the eager module (the eager side's
    reference: autograd may sum a scripted module's gradients in another order)."""
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F
    from torch.nn.parallel import DistributedDataParallel

    dist.init_process_group("gloo", init_method="env://")
    rank = dist.get_rank()
    for run in runs:
        data = np.load(run["data"][rank])
        module = torch.jit.load(run["model"]) if side == "torch" else eager_module(run)
        module.train()
        ddp = DistributedDataParallel(module, broadcast_buffers=run["broadcast_buffers"],
                                      find_unused_parameters=run["find_unused_parameters"])
        optimizer = torch_optimizer(run, ddp.parameters())
        bf16 = run["mixed_precision"] == "bf16"
        for step in range(micro_steps(run)):
            inputs = [torch.from_numpy(data[f"input{i}"][step]) for i in range(len(run["inputs"]))]
            # Accelerate's accumulate(model) and no_sync(model): DDP's no_sync on the steps that do not sync.
            scope = ddp.no_sync() if not synchronises(run, step) else contextlib.nullcontext()
            with scope:
                autocast = torch.autocast("cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()
                with autocast:
                    output = ddp(*inputs)
                if bf16:  # Accelerate's convert_outputs_to_fp32
                    output = output.float()
                loss = loss_of(run, output, lambda out: F.cross_entropy(out, torch.from_numpy(data["target"][step])))
                if run["accumulation"] > 1:
                    loss = loss / run["accumulation"]
                loss.backward()
            if synchronises(run, step):
                optimizer.step()
                optimizer.zero_grad(set_to_none=True)
        save(out_dir, side, run, rank, module.named_parameters(), module.named_buffers(),
             lambda t: t.detach().numpy())
    dist.destroy_process_group()


def save(out_dir, side, run, rank, parameters, buffers, to_numpy):
    arrays = {f"parameter:{name}": np.array(to_numpy(tensor)) for name, tensor in parameters}
    arrays.update({f"buffer:{name}": np.array(to_numpy(tensor)) for name, tensor in buffers})
    np.savez(os.path.join(out_dir, f"{side}-{run['run']}-rank{rank}.npz"), **arrays)


def main():
    side, runs_path, out_dir = sys.argv[1:]
    with open(runs_path) as file:
        runs = json.load(file)
    if side in ("torch", "torch_eager"):
        train_torch(runs, out_dir, side)
    else:
        train_accel(runs, out_dir, side.split(","))


if __name__ == "__main__":
    main()
