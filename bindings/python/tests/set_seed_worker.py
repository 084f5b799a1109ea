"""One rank of test_set_seed.py, started by `accel launch`: what torch draws after set_seed(SEED) and
after set_seed(SEED, device_specific=True). Python's torch shares LibTorch with libaccel here, so its
default generator is the one set_seed seeds. Writes OUT_DIR/rank<r>.json.

usage: set_seed_worker.py SEED OUT_DIR
"""
import json
import os
import sys

import torch

import accel


def draws_after(accelerator, seed, device_specific):
    accelerator.set_seed(seed, device_specific=device_specific)
    return {"initial_seed": torch.initial_seed(), "randn": torch.randn(4).tolist()}


def main(seed, out_dir):
    accelerator = accel.Accelerator(cpu=True)
    seen = {"shared": draws_after(accelerator, seed, False), "device_specific": draws_after(accelerator, seed, True)}
    with open(os.path.join(out_dir, f"rank{accelerator.process_index}.json"), "w") as out:
        json.dump(seen, out)
    accelerator.end_training()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
