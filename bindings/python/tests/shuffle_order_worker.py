"""One rank of test_shuffle_order.py, started by `accel launch`: the global order (gathered batches) of a
shuffled loader's epochs 0..2 without any seed, and of epoch 2 read by fresh loaders restored from a state
saved between epochs 1 and 2 and from one saved after the first step of epoch 2. Writes OUT_DIR/rank<r>.json.

usage: shuffle_order_worker.py SAMPLES BATCH_SIZE OUT_DIR
"""
import json
import os
import sys

import numpy as np

import accel


def global_order(accelerator, batches):
    return [int(i) for batch in batches for i in accelerator.gather(batch["y"].numpy())]


def main(samples, batch_size, out_dir):
    accelerator = accel.Accelerator(cpu=True)
    dataset = accel.Dataset.from_tensors({"y": np.arange(samples)})

    def loader():
        return accelerator.prepare(accel.DataLoaderSpec(dataset, batch_size=batch_size, shuffle=True))

    original = loader()
    seen = {"epochs": [global_order(accelerator, original) for _ in range(2)]}
    between_epochs = original.state_dict()
    epoch_2 = iter(original)
    first_step = next(epoch_2)
    mid_epoch = original.state_dict()
    seen["epochs"].append(global_order(accelerator, [first_step, *epoch_2]))
    for name, state in (("resumed_between_epochs", between_epochs), ("resumed_mid_epoch", mid_epoch)):
        restored = loader()
        restored.load_state_dict(state)
        seen[name] = global_order(accelerator, restored)
    with open(os.path.join(out_dir, f"rank{accelerator.process_index}.json"), "w") as out:
        json.dump(seen, out)
    accelerator.end_training()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
