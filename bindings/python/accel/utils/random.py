"""accel.utils.random: Accelerate's set_seed and synchronize_rng_states."""
import random as python_random

import numpy as np

from ..state import PartialState


def set_seed(seed, device_specific=False, deterministic=False):
    """Seeds Python's random, numpy and torch's CPU and CUDA generators with seed (plus the process index
    when device_specific); deterministic also turns on torch.use_deterministic_algorithms."""
    import torch
    if device_specific:
        seed += PartialState().process_index
    python_random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)
    if deterministic:
        torch.use_deterministic_algorithms(True)


def synchronize_rng_state(rng_type=None, generator=None):
    """One generator's state taken from the main process: "torch" (torch's default CPU generator), "cuda"
    (the current CUDA device's), "generator" (the given torch.Generator)."""
    import torch
    state = PartialState()
    if state.num_processes == 1:
        return
    rng_type = getattr(rng_type, "value", rng_type)
    if rng_type == "torch":
        rng_state = torch.get_rng_state()
    elif rng_type == "cuda":
        rng_state = torch.cuda.get_rng_state()
    elif rng_type == "generator":
        rng_state = generator.get_state()
    else:
        raise ValueError(f"rng_type {rng_type!r}: accel syncs 'torch', 'cuda' or 'generator'")
    rng_state = rng_state.clone()
    state._accelerator.broadcast(rng_state, from_process=0)
    if rng_type == "torch":
        torch.set_rng_state(rng_state)
    elif rng_type == "cuda":
        torch.cuda.set_rng_state(rng_state)
    else:
        generator.set_state(rng_state)


def synchronize_rng_states(rng_types, generator=None):
    for rng_type in rng_types:
        synchronize_rng_state(rng_type, generator=generator)
