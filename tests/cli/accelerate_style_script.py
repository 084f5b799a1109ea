"""A training script as Accelerate users write it: nothing about processes or precision in the code, all of it
from the launcher (its flags or config file). Prints, in one line per rank, what the Accelerator was given and
the script's own arguments, then checks a collective across the ranks."""
import sys

import torch

from accel import Accelerator

accelerator = Accelerator()
total = accelerator.reduce(torch.tensor([float(accelerator.process_index + 1)]), reduction="sum")
words = [accelerator.process_index, accelerator.num_processes, accelerator.mixed_precision,
         accelerator.gradient_accumulation_steps, int(total.item()), *sys.argv[1:]]
sys.stdout.write(" ".join(str(word) for word in words) + "\n")
accelerator.end_training()
