"""ZeRO stage 3 for an eager torch.nn.Module on several processes, or offloaded on one (FSDP's FULL_SHARD,
DeepSpeedPlugin(zero_stage=3)): each process holds its share of every trainable parameter in the library
(capi/accel/model.h, accel_model_set_units), and a parameter's values exist in torch only while its unit is
in use.

The module is cut into units (wrap policies below); each unit gets one flat buffer in the library's layout,
and its parameters become views of it (the same Parameter objects: optimizers, hooks and the caller's
references keep working). Between uses the buffer's storage is resized to nothing, as FSDP frees its flat
parameters; autograd's saved tensors share that storage, so gathering it again before backward gives them
their values back. Per step:
- a unit's forward pre-hook gathers it (accel_model_unit_gather); its forward hook releases it (but for the
  root unit, which backward needs next) and hooks the outputs' gradients;
- the first of those hooks in backward gathers the unit again and installs views of a gradient buffer as its
  parameters' .grad, so that autograd accumulates there in place;
- once every parameter of the unit has accumulated, the buffer goes to the library (accel_model_unit_reduce):
  on a synchronising backward it is averaged into this process's share and released, on an accumulating one
  it is kept for the next backward; the parameters are released;
- when the backward ends, units it did not reach are reduced with zeros (every process reduces every unit),
  then accel_model_end_backward;
- with forward_prefetch and backward_prefetch, the gather of the unit expected next is started ahead
  (accel_model_unit_prefetch) as a unit's forward begins, and as its backward begins or ends; a guess the
  forward did not take is released at the root's forward end.
The optimizer steps the shares: accel's optimizers in the library, torch's through accel._torch_zero.

Mixed precision (FSDP's MixedPrecision, the plugin's mixed_precision_policy): the units' buffers are in
param_dtype (the library casts each share before the all-gather, and averages the gradients in
reduce_dtype), so the module computes in it; floating inputs of the root's forward are cast to it, as FSDP's
cast_root_forward_inputs. The shares stay the master weights in the parameters' dtype, and what leaves the
module whole (get_state_dict, free_memory) is gathered in that dtype. buffer_dtype casts the floating buffers
for good (but BatchNorm's, as FSDP), so the library holds and checkpoints them in it; get_state_dict gives
them back in their former dtype, as FSDP's full state dict does.

A parameter is used only inside the forward of its unit's modules (FSDP's rule): a module that reads another
unit's parameter directly (x @ other.weight) must share a unit with it (a parameter that several modules
register, as tied weights, puts them in one unit by itself).
"""
import functools
import types

import torch
import torch.utils.checkpoint

from .model import Model
from ._torch_mixed_precision import TORCH_DTYPES, cast_floating, cast_buffers
from ._torch_sharded_prepare import parameters_lent_to
from ._torch_sharded_state_dict import state_dict_hooks
from ._torch_sharded_unit import Unit
from .torch_model import _ENGINE, PreparedModule, _post_accumulate_grad_hook


def _tensors_in(value):
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _tensors_in(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors_in(item)


# --- units -------------------------------------------------------------------------------------------------

def wrap_policy(fsdp_plugin=None, deepspeed=False):
    """wrap(module, nonwrapped_numel, depth) -> whether a submodule is a unit of its own, as the plugin says:
    FSDP's TRANSFORMER_BASED_WRAP (transformer_cls_names_to_wrap), SIZE_BASED_WRAP (min_num_params, counted
    as FSDP counts: the parameters of the subtree not in units below), a callable auto_wrap_policy (torch's
    signature: module, recurse, nonwrapped_numel), NO_WRAP (the whole module one unit); DeepSpeed's stage 3
    (deepspeed True, no FSDP plugin): each child of the root."""
    if fsdp_plugin is None:
        return lambda module, numel, depth: deepspeed and depth == 1
    policy = fsdp_plugin.auto_wrap_policy
    if callable(policy):
        return lambda module, numel, depth: bool(policy(module=module, recurse=False, nonwrapped_numel=numel))
    if policy == "TRANSFORMER_BASED_WRAP":
        names = set(fsdp_plugin.transformer_cls_names_to_wrap or ())
        return lambda module, numel, depth: type(module).__name__ in names
    if policy == "SIZE_BASED_WRAP":
        minimum = fsdp_plugin.min_num_params or 100_000_000  # torch's default
        return lambda module, numel, depth: numel >= minimum
    return lambda module, numel, depth: False


def wrapped_modules(root, wrap):
    """The submodules of root (never root itself) the policy wraps, innermost first."""
    wrapped = []

    def count(module, depth):
        numel = sum(p.numel() for p in module._parameters.values() if p is not None)
        for child in module.children():
            numel += count(child, depth + 1)
        if module is not root and wrap(module, numel, depth):
            wrapped.append(module)
            return 0
        return numel

    count(root, 0)
    return wrapped


def checkpoint_activations(root, wrap):
    """FSDP's activation_checkpointing as Accelerate applies it: each module the policy wraps runs its forward
    under torch.utils.checkpoint (non-reentrant), its activations recomputed in backward rather than kept.
    The module's own hooks run around the checkpointed forward, once; its submodules' run again in the
    recomputation. Returns how many modules were wrapped."""
    modules = wrapped_modules(root, wrap)
    for module in modules:
        # A forward set on the instance already is kept; otherwise the class's, looked up at each call.
        module._accel_inner_forward = module.__dict__.get("forward")
        # A method bound to the module, not a closure over it: copy.deepcopy(module) (an EMA copy made after
        # prepare) binds the copy's to the copy, where a closure would run the original's forward.
        module.forward = types.MethodType(_checkpointed_forward, module)
    return len(modules)


def _checkpointed_forward(module, *args, **kwargs):
    forward = module._accel_inner_forward or type(module).forward.__get__(module)
    if not torch.is_grad_enabled():
        return forward(*args, **kwargs)
    return torch.utils.checkpoint.checkpoint(forward, *args, use_reentrant=False, **kwargs)


def unit_groups(root, wrap):
    """({id(trainable parameter): unit key}, {id(module whose forward uses a unit): unit key}): each parameter
    is in the unit of the innermost module the policy wraps (the root's otherwise), and units that register
    one parameter between them (tied weights) are one."""
    wrapped = {id(module) for module in wrapped_modules(root, wrap)}
    unit_module = {}  # id(module) -> id(the module whose unit holds its parameters)

    def assign(module, unit):
        here = unit_module.setdefault(id(module), id(module) if id(module) in wrapped else unit)
        for child in module.children():
            assign(child, here)

    assign(root, id(root))
    parent = {}

    def find(key):
        while parent.get(key, key) != key:
            key = parent[key]
        return key

    first_unit = {}
    for module in root.modules():
        for parameter in module._parameters.values():
            if parameter is not None and parameter.requires_grad:
                earlier = find(first_unit.setdefault(id(parameter), unit_module[id(module)]))
                here = find(unit_module[id(module)])
                if earlier != here:
                    parent[here] = earlier
    return ({key: find(unit) for key, unit in first_unit.items()},
            {key: find(key) for key in set(unit_module.values())})


class ShardedModule(PreparedModule):
    """One nn.Module prepared under ZeRO stage 3 (Accelerator._shards_parameters): the accel model over its
    tensors, its units and the hooks."""

    def __init__(self, module, prepare_model, wrap, device, reshard_after_forward=True, precision=(None, None, None),
                 forward_prefetch=False, backward_prefetch=None):
        """wrap: wrap_policy's; device: where the units are used (the trainable parameters may lie anywhere
        before: prepare_model takes the main process's values a unit at a time, and never reads the others');
        reshard_after_forward False keeps each unit gathered from its forward to its
        backward (one gather a step instead of two; the whole model gathered at the end of forward);
        precision: the mixed precision policy's (param, reduce, buffer) dtype names, which prepare_model's
        options carry to the library (FullyShardedDataParallelPlugin.precision); forward_prefetch: a unit's
        forward starts the gather of the unit that came next in the previous forward; backward_prefetch
        "BACKWARD_PRE" (as a unit's backward begins) or "BACKWARD_POST" (as it ends, before its gradients are
        reduced) starts the gather of the unit whose backward comes next (the one before it in this step's
        forward), None for neither (FSDP's)."""
        param_dtype, _, buffer_dtype = precision
        compute = TORCH_DTYPES.get(param_dtype)
        self._former_buffer_dtypes = cast_buffers(module, buffer_dtype)
        named_parameters = list(module.named_parameters())
        self.module = module
        group_of, unit_of_module = unit_groups(module, wrap)
        # A group whose parameters have several dtypes is one unit per dtype (the library gathers a unit as
        # one buffer), gathered and released together: FSDP's "uniform dtype" requirement, met for the caller.
        number = {}  # (group, dtype) -> unit
        units_of_group = {}
        unit_of = []
        for _, parameter in named_parameters:
            group = group_of.get(id(parameter))
            if group is None:
                unit_of.append(0)  # frozen: not read
                continue
            if (group, parameter.dtype) not in number:
                number[group, parameter.dtype] = len(number)
                units_of_group.setdefault(group, []).append(number[group, parameter.dtype])
            unit_of.append(number[group, parameter.dtype])
        self.model = Model.from_tensors([(name, parameter.detach()) for name, parameter in named_parameters],
                                        [(name, buffer.detach()) for name, buffer in module.named_buffers()],
                                        [parameter.requires_grad for _, parameter in named_parameters])
        self.model.set_units(unit_of)
        with parameters_lent_to(self.model, named_parameters):
            prepare_model(self.model)
        self.trainable = {index: parameter for index, (_, parameter) in enumerate(named_parameters)
                          if parameter.requires_grad}
        self.grads = {}  # no gradient storage of the caller's: what clip_grad_norm_ reads its dtype from
        self._by_parameter = {id(parameter): index for index, parameter in self.trainable.items()}
        members = [[] for _ in range(self.model.num_units())]
        for index, parameter in self.trainable.items():
            unit, offset = self.model.parameter_place(index)
            members[unit].append((parameter, offset))
        # A unit at a time, its buffer released before the next one's is made: the parameters become views of
        # it (storage-less views cannot be made), on the device, and the memory they held goes.
        self._units, self._hooks = [], []
        self._accumulation_hook_at = {}  # id(parameter) -> the place of its accumulation hook in self._hooks
        for unit, held in enumerate(members):
            first = held[0][0]
            made = Unit(self.model, unit, self.model.unit_numel(unit), compute or first.dtype, first.dtype, device)
            made.members = held
            with torch.no_grad():
                for parameter, view in made.views(made.flat):
                    parameter.data = view
            for parameter, _ in held:
                # On the device (moving a parameter's data to another device drops its gradient accumulator, and
                # a hook on it), before it is released (the hook is made from a view of it on torch < 2.1).
                self.watch_accumulation(unit, parameter)
            made.gathered = True
            made.release()
            self._units.append(made)
        self._roots = set(units_of_group.get(unit_of_module[id(module)], ()))
        self._reshard_after_forward = reshard_after_forward
        self._forward_prefetch = forward_prefetch
        self._backward_prefetch = backward_prefetch
        # The units in the order the forward first used them: this forward's, and the last one's (by which
        # both prefetches guess; every process guesses alike, as every process runs the same forward).
        self._order_now, self._last_order, self._last_place = [], [], {}
        self._end_queued = False
        self._hooks.append((module.register_forward_pre_hook(self._begin_forward), None))
        if compute is not None:
            self._hooks.append((self._cast_root_inputs(module, compute), None))
        for sub in module.modules():
            for unit in units_of_group.get(unit_of_module.get(id(sub)), ()):
                self._hooks.append((sub.register_forward_pre_hook(functools.partial(self._before_forward, unit)),
                                    None))
                self._hooks.append((sub.register_forward_hook(functools.partial(self._after_forward, unit)), None))
        self._hooks.append((module.register_forward_hook(self._end_forward), None))
        self.reading_whole = False  # inside whole_state_dict's module.state_dict()
        self.summoned = False  # inside summon_full_params
        self._hooks.extend(state_dict_hooks(self))

    # --- what the Accelerator asks of a prepared module ---------------------------------------------------

    def zero_grad(self, parameters, set_to_none=False):
        """The shares' gradients are the optimizer's to clear; gradients still accumulating go too."""
        for unit in self._units:
            if unit.grads is not None:
                unit.grads.zero_()

    def whole_state_dict(self, keep):
        """The module's state_dict with copies of its values, its units gathered in turn in the parameters'
        own dtype (collective, _exact_units), on the process that keeps it; an empty one elsewhere."""
        self.reading_whole = True
        try:
            entries = self.module.state_dict(keep_vars=True)
        finally:
            self.reading_whole = False
        names = {}
        for name, value in entries.items():
            names.setdefault(id(value), []).append(name)
        copies = {}
        for unit, full in self._exact_units():
            for parameter, view in unit.views(full):
                for name in names.get(id(parameter), ()) if keep else ():
                    copies[name] = view
        if not keep:
            return type(entries)()
        return type(entries)((name, copies[name] if name in copies
                              else value.detach().to(self._former_buffer_dtypes.get(id(value), value.dtype), copy=True))
                             for name, value in entries.items())

    def release_gathered(self):
        """Every unit released: after an optimizer step, whose shares a unit still gathered (the root's
        after a forward no backward followed) would hold the values of before."""
        for unit in self._units:
            unit.release()

    def gather_for_good(self):
        """Every unit gathered, in order, into a buffer of the parameters' own dtype that they then keep
        (collective, whatever this process holds: the same collectives on every process even after a step
        that failed part-way on some): the module's parameters hold their values again once the library's
        shares are gone (free_memory)."""
        with torch.no_grad():
            for unit, full in self._exact_units():
                for parameter, view in unit.views(full):
                    parameter.data = view
        self._units = []

    def _exact_units(self):
        """Each unit with a new buffer of its layout holding its parameters' exact values, in turn
        (collective; iterate to the end): the next unit's gather in flight while the caller reads one."""
        for unit in self._units:
            if unit.prefetched:  # a compute-dtype prefetch of a forward under way
                unit.release()
        def exact_buffer(unit):
            return torch.empty(unit.flat.numel(), dtype=unit.master_dtype, device=unit.flat.device)

        prefetched = None
        for place, unit in enumerate(self._units):
            full = prefetched if prefetched is not None else exact_buffer(unit)
            self.model.unit_gather(unit.index, full)
            prefetched = None
            if place + 1 < len(self._units):
                prefetched = exact_buffer(self._units[place + 1])
                self.model.unit_prefetch(self._units[place + 1].index, prefetched)
            yield unit, full

    # --- the hooks ----------------------------------------------------------------------------------------

    def watch_accumulation(self, unit, parameter):
        """The hook telling unit's backward that parameter's gradient is accumulated, made anew (a change of the
        parameter's device or dtype drops the one made before on torch < 2.1: Unit.take_back)."""
        place = self._accumulation_hook_at.setdefault(id(parameter), len(self._hooks))
        if place < len(self._hooks):
            self._hooks[place][0].remove()
        else:
            self._hooks.append(None)
        self._hooks[place] = _post_accumulate_grad_hook(parameter, functools.partial(self._accumulated, unit,
                                                                                     parameter))

    @staticmethod
    def _cast_root_inputs(module, dtype):
        """A forward pre-hook casting the root's floating inputs to the compute dtype (keyword arguments too
        where torch's hooks see them, from 2.0)."""
        try:
            return module.register_forward_pre_hook(
                lambda _module, args, kwargs: (cast_floating(args, dtype), cast_floating(kwargs, dtype)),
                with_kwargs=True)
        except TypeError:
            return module.register_forward_pre_hook(lambda _module, args: cast_floating(args, dtype))

    def begin_forward(self):
        """The root's forward pre-hook tells the library (_begin_forward), with or without a wrapper around it
        (there is none on one process)."""

    def _refuse_inside_summon(self):
        if self.summoned:  # its end would release units the block holds gathered
            raise RuntimeError("a forward inside summon_full_params: leave the block first (as under FSDP)")

    def _begin_forward(self, _module, _inputs):
        self._refuse_inside_summon()
        if not self._end_queued:
            self._order_now = []
            PreparedModule.begin_forward(self)

    def _before_forward(self, unit, _module, _inputs):
        self._refuse_inside_summon()
        self._units[unit].gather()
        if self._end_queued:  # a recomputation in backward (activation checkpointing)
            return
        if unit not in self._order_now:
            self._order_now.append(unit)
        if self._forward_prefetch and len(self._order_now) < len(self._last_order):
            self._units[self._last_order[len(self._order_now)]].prefetch()

    def _end_forward(self, _module, _inputs, _output):
        if self._end_queued:
            return
        self._last_order, self._order_now = self._order_now, []
        self._last_place = {unit: place for place, unit in enumerate(self._last_order)}
        # A guess the forward did not take: released before anything (a step) changes the shares it carries.
        for unit in self._units:
            if unit.prefetched:
                unit.release()

    def _prefetch_backward(self, unit):
        """The gather of the unit whose backward comes next started: the one before unit in the forward."""
        place = self._last_place.get(unit.index, 0)
        if place > 0:
            previous = self._units[self._last_order[place - 1]]
            if not previous.done:
                previous.prefetch()

    def _after_forward(self, unit, _module, _inputs, output):
        if self._end_queued:
            # A forward inside backward: activation checkpointing's recomputation, whose saved tensors need
            # the unit until its own backward has run (its reduction releases it).
            return
        if torch.is_grad_enabled():
            for tensor in _tensors_in(output):
                if tensor.requires_grad:
                    tensor.register_hook(functools.partial(self._before_backward, unit))
            if unit in self._roots or not self._reshard_after_forward:
                return
        self._units[unit].release()

    def _begin_backward(self):
        if self._end_queued:
            return
        self._end_queued = True
        _ENGINE.queue_callback(self._end_backward)
        for unit in self._units:
            unit.done = False
            unit.waiting = {id(parameter) for parameter, _ in unit.members}

    def _grad_buffer(self, unit):
        """The unit's gradient buffer, made (zeros) with its views installed as the parameters' .grad."""
        if unit.grads is None:
            unit.grads = torch.zeros_like(unit.flat)
            unit.grad_views = {}
            for parameter, view in unit.views(unit.grads):
                unit.grad_views[id(parameter)] = view
                self._install(parameter, view)
        return unit.grads

    @staticmethod
    def _install(parameter, view):
        """view as parameter.grad, keeping what autograd put elsewhere (after a grad of None)."""
        current = parameter.grad
        if current is None or current.data_ptr() != view.data_ptr():
            if current is not None:
                view.add_(current)
            parameter.grad = view

    def _before_backward(self, unit, _grad):
        self._begin_backward()
        unit = self._units[unit]
        if not unit.done:
            unit.gather()
            if self._backward_prefetch == "BACKWARD_PRE":
                self._prefetch_backward(unit)
            with torch.no_grad():
                self._grad_buffer(unit)

    def _accumulated(self, unit, parameter):
        self._begin_backward()
        unit = self._units[unit]
        with torch.no_grad():
            self._grad_buffer(unit)
            self._install(parameter, unit.grad_views[id(parameter)])
        unit.waiting.discard(id(parameter))
        if not unit.waiting and not unit.done:
            if self._backward_prefetch == "BACKWARD_POST":
                self._prefetch_backward(unit)
            self._reduce(unit)

    def _reduce(self, unit):
        unit.done = True
        if self.model.unit_reduce(unit.index, unit.grads):
            unit.drop_grads()
        unit.release()

    def _end_backward(self):
        self._end_queued = False
        for unit in self._units:
            if not unit.done:
                kept = unit.grads is not None
                with torch.no_grad():
                    self._grad_buffer(unit)
                self._reduce(unit)
                if not kept and unit.grads is not None:  # an accumulating backward that did not reach it
                    unit.drop_grads()
            # Also one a recomputation gathered after its reduction: the step changes the shares.
            unit.release()
        self.model.end_backward()
