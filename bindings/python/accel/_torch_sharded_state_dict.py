"""module.state_dict() and module.load_state_dict() of a module sharded by zero_stage 3 (accel._torch_sharded).
Between uses its trainable parameters have no memory, which torch would read, or write, as if they had (a
crash). state_dict() gives their whole values instead, as FSDP's FULL_STATE_DICT does: every unit gathered in
turn (ShardedModule.whole_state_dict), so it is collective, every process calling it alike. load_state_dict()
of values for them is refused, naming them: whole weights reach the shares by loading them before prepare, or
through accelerator.load_state."""
import functools


def state_dict_hooks(sharded):
    """The hooks on sharded.module and on its submodules that hold sharded parameters, as (handle, None) pairs
    (ShardedModule._hooks')."""
    module = sharded.module
    hooks = [(module._register_state_dict_hook(functools.partial(_whole_values, sharded)), None)]
    for sub in module.modules():
        if any(parameter is not None and sharded.owns(parameter) for parameter in sub._parameters.values()):
            hooks.append((sub._register_load_state_dict_pre_hook(functools.partial(_refuse_load, sharded, sub)), None))
    return hooks


def _whole_values(sharded, _module, state_dict, prefix, _local_metadata):
    if sharded.reading_whole:  # whole_state_dict's own state_dict()
        return None
    for name, value in sharded.whole_state_dict(keep=True).items():
        if prefix + name in state_dict:
            state_dict[prefix + name] = value
    return None


def _refuse_load(sharded, sub, state_dict, prefix, *_):
    loaded = [prefix + name for name, parameter in sub._parameters.items()
              if parameter is not None and sharded.owns(parameter) and prefix + name in state_dict]
    if loaded:
        raise RuntimeError(f"load_state_dict: {', '.join(loaded)} {'is' if len(loaded) == 1 else 'are'} held in "
                           "shares by zero_stage 3 (FSDP's FULL_SHARD), with no memory between uses to load into; "
                           "load whole weights into the module before accelerator.prepare, or resume with "
                           "accelerator.load_state")
