#!/usr/bin/python3
"""Trains an MLP (64-128-128-10) on scikit-learn's handwritten digits on as many processes as it is
launched on, the way an Accelerate training script does; the Python twin of examples/train_digits.c.

    accel launch --nproc-per-node 2 --cpu --master-port 0 -- \\
        /usr/bin/python3 bindings/python/examples/train_digits.py --epochs 5

The data: sklearn.datasets.load_digits() (1797 rows of 64 pixels 0..16, shipped with Debian's
python3-sklearn, no download), pixels scaled to [0, 1], rows shuffled with a fixed seed, the last 360 held
out for the test. Training: AdamW with a cosine schedule and warmup, gradients clipped to norm 1, the mean
loss of each epoch over every rank printed by the main process. Evaluation: argmax of the logits, gathered
with gather_for_metrics so each test sample counts once. The model is saved into DIR/model/ and the last
line printed is the test accuracy.

Needs the package on the path (PYTHONPATH=bindings/python) and libaccel (ACCEL_LIBRARY, next to the
package, or installed). The model is a TorchScript module written with torch, or --model PATH.
"""
import argparse
import io
import math
import os

import numpy as np

import accel

TEST_ROWS = 360
TRAIN_BATCH = 32  # per process
TEST_BATCH = 64  # per process
TRAIN_DATA_SEED = 42
SPLIT_SEED = 0


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--project-dir", default="build/demo-python", help="where the model is saved (DIR/model)")
    parser.add_argument("--model", help="a TorchScript MLP taking [N, 64] (default: written with torch, seed 0)")
    parser.add_argument("--epochs", type=int, default=20)
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--max-steps", type=int, help="stop after this many optimizer steps")
    return parser.parse_args()


def digits():
    """(train, test) dicts of "x" float32 [N, 64] and "y" int64 [N], the same split on every rank."""
    from sklearn.datasets import load_digits
    data = load_digits()
    order = np.random.default_rng(SPLIT_SEED).permutation(len(data.target))
    x = (data.data[order] / 16.0).astype(np.float32)
    y = data.target[order].astype(np.int64)
    return {"x": x[:-TEST_ROWS], "y": y[:-TEST_ROWS]}, {"x": x[-TEST_ROWS:], "y": y[-TEST_ROWS:]}


def mlp_torchscript():
    """The model of examples/make_mlp.py, as TorchScript bytes: 64-128-128-10 with ReLU, seed 0."""
    import torch

    class MLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2, self.fc3 = torch.nn.Linear(64, 128), torch.nn.Linear(128, 128), torch.nn.Linear(128, 10)

        def forward(self, x):
            return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))

    torch.manual_seed(0)
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(MLP()), buffer)
    return buffer.getvalue()


def main():
    args = parse_args()
    accelerator = accel.Accelerator()  # the launcher's environment says how many processes there are
    train_rows, test_rows = digits()
    # Sized in single-process steps (Accelerate's rule: the scheduler steps once per process for each
    # optimizer step), so the schedule ends with the training whatever the number of processes.
    single_process_steps = args.epochs * math.ceil(len(train_rows["y"]) / TRAIN_BATCH)
    model, train_loader, test_loader, optimizer, scheduler = accelerator.prepare(
        args.model or mlp_torchscript(),
        accel.DataLoaderSpec(accel.Dataset.from_tensors(train_rows), batch_size=TRAIN_BATCH, shuffle=True),
        accel.DataLoaderSpec(accel.Dataset.from_tensors(test_rows), batch_size=TEST_BATCH),
        accel.OptimizerSpec("adamw", lr=args.lr, weight_decay=0.01, no_decay="*bias"),
        accel.SchedulerSpec("cosine", total_steps=single_process_steps, warmup_steps=single_process_steps // 20))
    accelerator.print(f"digits: {len(train_rows['y'])} training rows, {TEST_ROWS} test rows; MLP 64-128-128-10; "
                      f"{accelerator.num_processes} process(es) ({accelerator.distributed_type.value}, "
                      f"{accelerator.device})")
    accelerator.print(f"training: {args.epochs} epochs of {len(train_loader)} steps per process, batch "
                      f"{TRAIN_BATCH} per process, adamw lr {args.lr:g}, cosine schedule", flush=True)

    steps = 0
    total_steps = args.epochs * len(train_loader)
    if args.max_steps is not None:
        total_steps = min(total_steps, args.max_steps)
    bar = accel.ProgressBar(accelerator, total_steps, "training")
    for epoch in range(args.epochs):
        model.train()
        losses = []
        for batch in train_loader:
            with accelerator.accumulate(model):
                loss = accel.compute_loss("cross_entropy", model(batch["x"]), batch["y"])
                accelerator.backward(loss)
                if accelerator.sync_gradients:
                    accelerator.clip_grad_norm_(model, 1.0)
                    steps += 1
                    bar.update(1, loss=loss.item())
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            losses.append(loss.item())
            if args.max_steps is not None and steps >= args.max_steps:
                break  # every rank stops at the same step
        # Every rank has as many batches (even_batches), so the mean of the means is the epoch's mean.
        epoch_loss = accelerator.reduce(np.array([np.mean(losses)], dtype=np.float32), "mean")[0]
        accelerator.print(f"epoch {epoch + 1:2d}/{args.epochs}  loss {epoch_loss:.4f}  "
                          f"lr {scheduler.get_last_lr()[0]:.2e}", flush=True)
        if args.max_steps is not None and steps >= args.max_steps:
            accelerator.print(f"stopped after {steps} optimizer steps (--max-steps)")
            break
    bar.close()  # the bar stays, finished

    model.eval()
    correct = counted = 0
    for batch in test_loader:
        predictions = model.evaluate(batch["x"]).numpy().argmax(axis=1)
        predictions, labels = accelerator.gather_for_metrics((predictions, batch["y"].numpy()))
        correct += int((predictions == labels).sum())
        counted += len(labels)
    save_directory = os.path.join(args.project_dir, "model")
    accelerator.save_model(model, save_directory)
    accelerator.print(f"saved the model to {save_directory}/model.safetensors")
    accelerator.print(f"test: {correct} of {counted} samples classified correctly")
    accelerator.print(f"test accuracy: {correct / counted:.2f}", flush=True)
    if counted != TEST_ROWS:
        raise SystemExit(f"evaluation counted {counted} test samples, not {TEST_ROWS}")
    accelerator.end_training()


if __name__ == "__main__":
    main()
