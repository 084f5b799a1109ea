"""Stage 3's prepare a unit at a time on the caller's side too (accel._torch_sharded). The library takes each
unit's values (process 0's) and lets go of its hold on their memory as soon as the unit is taken; the
module's trainable parameters give their memory up before, so that each unit's goes then, rather than
every process keeping its whole model until prepare ends, its shares beside it (one offloaded process: the
model twice in host memory)."""
import contextlib

import torch

from .errors import AccelError


@contextlib.contextmanager
def parameters_lent_to(model, named_parameters):
    """For the block (the library's prepare of model, made over these parameters' tensors by
    Model.from_tensors), the trainable parameters hold no memory of their own: model's tensors are the only
    hold on it. Should prepare fail, or shard nothing, each parameter gets back what the library still holds
    of it (a unit taken before a failure has nothing left to give: its values are in the shares)."""
    lent = [(index, parameter) for index, (_, parameter) in enumerate(named_parameters) if parameter.requires_grad]
    with torch.no_grad():
        for _, parameter in lent:
            # One element expanded to the shape (a tensor without memory cannot have one): what prepare of a
            # process that builds its model on the meta device is given.
            parameter.data = torch.empty((), dtype=parameter.dtype, device=parameter.device).expand(parameter.shape)
    try:
        yield
    except BaseException:
        _give_back(model, lent)
        raise
    if not model.num_units():
        _give_back(model, lent)


def _give_back(model, lent):
    with torch.no_grad():
        for index, parameter in lent:
            try:
                value = model.parameter(index).torch()
            except AccelError:  # sharded already
                return
            if value.numel() == 0 or value.data_ptr() != 0:
                parameter.data = value
