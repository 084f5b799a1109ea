"""One rank of test_two_processes.py, started by `accel launch --nproc-per-node 2`: runs the collectives,
a few training steps and an evaluation, and writes what it saw to OUT_DIR/rank<r>.json for the test to
check. numpy only (no torch import), so that both ranks start fast.

usage: two_process_worker.py MODEL_RANK0.pt MODEL_RANK1.pt UNUSED_PARAMETER_MODEL.pt OUT_DIR
"""
import json
import os
import sys

import numpy as np

import accel


def collectives(accelerator, rank, out_dir):
    mine = np.arange(2, dtype=np.float32) + 1 + 2 * rank  # rank 0 [1, 2], rank 1 [3, 4]
    seen = {"gather": accelerator.gather(mine).tolist(),
            "gather_rows_differ": accelerator.gather(np.arange(1 + rank)).tolist(),
            "reduce": {how: accelerator.reduce(mine, how).tolist() for how in ("sum", "mean", "max")},
            "pad": accelerator.pad_across_processes(np.arange(3 - rank), pad_index=-1).tolist(),
            "gather_object": accelerator.gather_object([f"rank {rank}"])}
    nested = accelerator.reduce({"loss": np.array(1 + rank, np.float32), "parts": [mine, np.arange(3) * (rank + 1)]}, "sum")
    seen["reduce_nested"] = {"loss": float(nested["loss"]), "parts": [part.tolist() for part in nested["parts"]]}
    overwritten = np.full(2, rank, dtype=np.float64)
    accelerator.broadcast(overwritten, from_process=1)
    seen["broadcast"] = overwritten.tolist()
    quarter = np.arange(4, dtype=np.float32) + 4 * rank  # rank 0 [0, 1, 2, 3], rank 1 [4, 5, 6, 7]
    seen["reduce_scatter"] = {how: accelerator.reduce_scatter(quarter, np.zeros(2, np.float32), how).tolist()
                              for how in ("sum", "mean")}
    # A transposed (non-contiguous) output: written through a copy, in the caller's array.
    columns = np.zeros((4, 2), np.float32)
    accelerator.all_gather(quarter, columns.T)
    seen["all_gather_transposed"] = columns.tolist()
    try:
        accelerator.gather(np.zeros((1, 1 + rank)))
    except accel.ShapeMismatchError as error:
        seen["shape_mismatch"] = str(error)
    marker = os.path.join(out_dir, "written by the main process")
    with accelerator.main_process_first():
        if rank == 0:
            open(marker, "w").close()
        else:
            seen["main_went_first"] = os.path.exists(marker)
    with accelerator.split_between_processes(["A", "B", "C"], apply_padding=True) as letters:
        seen["split_letters"] = letters
    with accelerator.split_between_processes({"n": np.arange(5), "s": "abcde"}) as parts:
        seen["split_dict"] = {"n": parts["n"].tolist(), "s": parts["s"]}
    return seen


def flat_weights(model):
    return np.concatenate([tensor.numpy().ravel() for tensor in model.parameters()])


def train(accelerator, model_path):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 4)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    model, loader, optimizer = accelerator.prepare(
        model_path, accel.DataLoaderSpec(accel.Dataset.from_tensors({"x": x, "y": y}), batch_size=8, shuffle=True),
        accel.OptimizerSpec("sgd", lr=0.5))
    initial = flat_weights(model).tolist()
    losses = []
    for _ in range(3):
        for batch in loader:
            with accelerator.accumulate(model):
                loss = accel.compute_loss("cross_entropy", model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            losses.append(float(accelerator.reduce(loss.numpy().reshape(1), "mean")[0]))
    return model, {"initial_weights": initial, "weights": flat_weights(model).tolist(),
                   "first_loss": losses[0], "last_loss": losses[-1], "steps": len(losses),
                   "grad_syncs": model.grad_sync_stat("syncs"), "grad_reduce_ms": model.grad_sync_stat("reduce_ms")}


def evaluate(accelerator, model):
    labels = np.arange(7)  # 7 samples in batches of 2 on 2 ranks: the last global batch is padded by one
    features = np.zeros((7, 4), dtype=np.float32)
    loader = accelerator.prepare(accel.DataLoaderSpec(accel.Dataset.from_tensors({"x": features, "y": labels}),
                                                      batch_size=2))
    gathered, predictions = [], 0
    for batch in loader:
        gathered += accelerator.gather_for_metrics(batch["y"].numpy()).tolist()
        predictions += len(accelerator.gather_for_metrics(model.evaluate(batch["x"]).numpy()))
    return {"gather_for_metrics": gathered, "predictions": predictions, "batches_per_rank": len(loader)}


def unused_parameters(rank, unused_model_path):
    """backward fails on a parameter without a gradient unless find_unused_parameters is set."""
    allowing = accel.Accelerator(cpu=True, kwargs_handlers=[accel.DistributedDataParallelKwargs(
        find_unused_parameters=True)])
    strict = accel.Accelerator(cpu=True)
    x, y = np.ones((2, 4), dtype=np.float32), np.array([0, rank])
    for accelerator in (allowing, strict):
        model = accelerator.prepare(unused_model_path)
        try:
            accelerator.backward(accel.compute_loss("cross_entropy", model(x), y))
            yield "ok"
        except accel.InvalidArgumentError as error:
            yield str(error)


def sharded_state_dict(model_path, out_dir):
    """A TorchScript model trained under ZeRO stage 3 (no process holds its whole parameters): get_state_dict
    gathers them unit by unit for the main process only, to the very values save_model writes."""
    accelerator = accel.Accelerator(cpu=True, deepspeed_plugin=accel.DeepSpeedPlugin(zero_stage=3))
    model, optimizer = accelerator.prepare(model_path, accel.OptimizerSpec("sgd", lr=0.1, momentum=0.9))
    x = np.random.default_rng(accelerator.process_index).standard_normal((4, 4)).astype(np.float32)
    for _ in range(3):
        accelerator.backward(accel.compute_loss("cross_entropy", model(x), np.array([0, 1, 0, 1])))
        optimizer.step()
        optimizer.zero_grad()
    state = accelerator.get_state_dict(model)
    directory = os.path.join(out_dir, "sharded_saved")
    accelerator.save_model(model, directory)
    accelerator.wait_for_everyone()
    saved = accel.Model.load(model_path)
    saved.load_weights(directory)
    expected = saved.state_dict()
    return {"units": model.num_units(), "state_dict_names": sorted(state),
            "state_dict_equals_saved": all(np.array_equal(state[name].numpy(), expected[name].numpy()) for name in state),
            "names_saved": sorted(expected)}


def main():
    *model_paths, unused_model_path, out_dir = sys.argv[1:]
    accelerator = accel.Accelerator(cpu=True)
    rank = accelerator.process_index
    seen = {"num_processes": accelerator.num_processes, "distributed_type": accelerator.distributed_type.value,
            "backend": accelerator.backend, "is_main_process": accelerator.is_main_process}
    seen.update(collectives(accelerator, rank, out_dir))
    model, training = train(accelerator, model_paths[rank])  # different initial weights on each rank
    seen.update(training)
    seen.update(evaluate(accelerator, model))
    seen["unused_parameters"] = list(unused_parameters(rank, unused_model_path))
    seen["sharded_state_dict"] = sharded_state_dict(model_paths[0], out_dir)
    accelerator.end_training()
    with open(os.path.join(out_dir, f"rank{rank}.json"), "w") as file:
        json.dump(seen, file)


if __name__ == "__main__":
    main()
