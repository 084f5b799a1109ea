"""Whole values in and out of a module sharded by zero_stage 3 (accel._torch_sharded): its state_dict(),
load_state_dict() and summon_full_params.
Between uses its trainable parameters have no memory, which torch would read, or write, as if they had (a
crash). state_dict() gives their whole values instead, as FSDP's FULL_STATE_DICT does: every unit gathered in
turn (ShardedModule.whole_state_dict), so it is collective, every process calling it alike.
load_state_dict() of whole values writes each process's elements of them into its shares
(accel_model_set_parameter), as every FSDP rank loads a full state dict: not collective, and never more than
the values given held at once. A value of another shape, or not a tensor, is left to torch, which reports it
as it does for any module; nothing is written for it.
summon_full_params (FSDP's, Accelerator.summon_full_params) gathers every unit into the parameters for the
length of a with-block, and writes what the block changed back into each process's shares."""
import contextlib
import functools

import torch

from ._library import lib
from .errors import UnsupportedError


def state_dict_hooks(sharded):
    """The hooks on sharded.module and on its submodules that hold sharded parameters, as (handle, None) pairs
    (ShardedModule._hooks')."""
    module = sharded.module
    hooks = [(module._register_state_dict_hook(functools.partial(_whole_values, sharded)), None)]
    for sub in module.modules():
        if any(parameter is not None and sharded.owns(parameter) for parameter in sub._parameters.values()):
            loaded = set()  # the keys the pre-hook took out of the state dict, which torch then finds missing
            hooks.append((sub._register_load_state_dict_pre_hook(
                functools.partial(_load_into_shares, sharded, sub, loaded)), None))
            hooks.append((sub.register_load_state_dict_post_hook(functools.partial(_not_missing, loaded)), None))
    return hooks


def _whole_values(sharded, _module, state_dict, prefix, _local_metadata):
    if sharded.reading_whole:  # whole_state_dict's own state_dict()
        return None
    for name, value in sharded.whole_state_dict(keep=True).items():
        if prefix + name in state_dict:
            state_dict[prefix + name] = value
    return None


def _load_into_shares(sharded, sub, loaded, state_dict, prefix, *_):
    loaded.clear()
    for name, parameter in sub._parameters.items():
        key = prefix + name
        value = state_dict.get(key)
        if parameter is None or not sharded.owns(parameter) or not isinstance(value, torch.Tensor) \
                or value.shape != parameter.shape:
            continue
        value = value.detach()
        index = sharded._by_parameter[id(parameter)]
        sharded.model.set_parameter(index, value)
        _write_gathered(sharded, index, parameter, value)
        # Taken out so that torch does not copy into the parameter, which has no memory.
        del state_dict[key]
        loaded.add(key)


def _write_gathered(sharded, index, parameter, value):
    """A unit gathered now (the root's after a forward, any with reshard_after_forward False, every one inside
    summon_full_params) holds the values it was gathered with: the new one written there too (the parameter is
    a view of it), so that the module computes with it and summon_full_params' writeback keeps it."""
    unit, _ = sharded.model.parameter_place(index)
    if sharded.summoned or sharded._units[unit].gathered:
        with torch.no_grad():
            parameter.copy_(value)


def _not_missing(loaded, _module, incompatible_keys):
    incompatible_keys.missing_keys[:] = [key for key in incompatible_keys.missing_keys if key not in loaded]
    loaded.clear()


@contextlib.contextmanager
def summon_full_params(sharded, writeback, offload_to_cpu=False, with_grads=False):
    """The module's parameters hold their whole values for the block: every unit gathered, in order
    (collective: every process enters alike), and kept; on leaving, with writeback, each process writes its
    elements of the values the block left into its shares (accel_model_set_parameter: what a process changed
    outside its own elements is lost, as under FSDP), and the units are released. Under a mixed precision
    policy the parameters hold their exact values in their own dtype for the block, as FSDP summons them in
    full precision, and their param_dtype views again after it (Unit.lend_exact); with offload_to_cpu, units
    used on another device are gathered there one at a time and held in host memory for the block (FSDP's);
    with_grads, each parameter's .grad holds its averaged gradient for the block (None where no backward has
    synchronised one since the parameters were prepared; not written back), refused while gradients
    accumulate unsynchronised, which are each process's own. Nested, it does nothing more. A forward inside is
    refused (_torch_sharded's forward pre-hooks)."""
    if sharded.summoned:
        yield
        return
    if with_grads and any(unit.grads is not None for unit in sharded._units):
        raise UnsupportedError(lib.ACCEL_ERR_UNSUPPORTED, (
            "summon_full_params(with_grads=True) while gradients accumulate without synchronising (no_sync, or "
            "accumulate before its synchronising step): they are this process's own until that backward"))
    sharded.summoned = True
    lent = {}  # unit -> its parameters' data of before, while they hold their exact values (or a host copy)
    try:
        with torch.no_grad():
            for unit in sharded._units:
                offloaded = offload_to_cpu and unit.flat.device.type != "cpu"
                if unit.flat.dtype == unit.master_dtype and not offloaded:
                    unit.gather()
                else:
                    lent[unit] = unit.lend_exact(torch.device("cpu") if offloaded else None)
                if with_grads:
                    _lend_gradients(unit)
        yield
    finally:
        sharded.summoned = False
        if with_grads:
            for parameter in sharded.trainable.values():
                parameter.grad = None
        try:
            if writeback:
                for index, parameter in sharded.trainable.items():
                    sharded.model.set_parameter(index, parameter.detach())
        finally:
            for unit, data in lent.items():
                unit.take_back(data, functools.partial(sharded.watch_accumulation, unit.index))
            for unit in sharded._units:
                unit.release()


def _lend_gradients(unit):
    """The unit's parameters' .grad: views of its averaged gradients, gathered whole (collective), where the
    parameters now are; left None where no process holds gradients of the unit."""
    gradients = torch.empty(unit.flat.numel(), dtype=unit.master_dtype, device=unit.flat.device)
    if unit.model.unit_gather_gradients(unit.index, gradients):
        gradients = gradients.to(unit.members[0][0].device)
        for parameter, view in unit.views(gradients):
            parameter.grad = view
