"""A prepared torch optimizer's state in checkpoints, loadable on any number of processes and at any ZeRO
stage: the optimizer's state_dict() as torch makes it, with the layout of what it steps (per state_dict
index: the parameter's name, the first of its flattened elements and how many, the stepped tensor's
shape). At stage 0 every process holds the same whole state, and a loading process reads one saving
process's; under ZeRO each holds its share, and a loading process reads every saving process's, one at a
time, keeping the elements of what it steps itself (accel_state_register_parts_for_checkpointing)."""
import io

import torch

_FORMAT_KEY = "accel_optimizer_state"


def saved_state(optimizer, layout, replicated):
    """What save_state stores for an AcceleratedOptimizer: its state_dict() with layout (as layout() gives,
    or None) and whether every process holds the same (stage 0)."""
    return {_FORMAT_KEY: 1, "replicated": replicated, "layout": layout, "state_dict": optimizer.state_dict()}


def layout(names, stepped):
    """[(name, begin, numel, shape)] per state_dict index, or None when a stepped tensor has no name (it
    belongs to no prepared module): its state then loads only where the layout is the same.
    stepped: [(parameter, begin, numel, tensor stepped)] in the optimizer's order."""
    found = []
    for parameter, begin, numel, tensor in stepped:
        name = names.get(id(parameter))
        if name is None:
            return None
        found.append((name, begin, numel, tuple(tensor.shape)))
    return found


def load_parts(optimizer, parts, rank, world_size, own_layout):
    """Restores optimizer (an AcceleratedOptimizer, whose state_dict indexes own_layout) from every saving
    process's bytes in parts (count(), read(i)). ValueError naming the parameter when the saved pieces do not
    cover what this process steps once, or when the layouts differ and a side has no names."""
    count = parts.count()
    first_part = rank if rank < count else 0
    first = _loaded(parts.read(first_part))
    if not isinstance(first, dict) or _FORMAT_KEY not in first:
        # An older accel's: the state_dict alone, one per process.
        if count != world_size:
            raise ValueError(f"the optimizer state was saved per process by an older accel on {count} processes, "
                             f"so it resumes on {count} processes only, not {world_size}")
        optimizer.load_state_dict(first)
        return
    if first["layout"] == own_layout and (first["replicated"] or count == world_size):
        optimizer.load_state_dict(first["state_dict"])
        return
    if first["layout"] is None or own_layout is None:
        raise ValueError("the optimizer state cannot move to another number of processes or ZeRO stage: some of "
                         "its parameters belong to no prepared module, so their state has no names")
    pieces = _Pieces(own_layout)
    pieces.take(first)
    saved_groups, replicated = first["state_dict"]["param_groups"], first["replicated"]
    del first  # one saved part held at a time
    if not replicated:
        for part in range(count):
            if part != first_part:
                pieces.take(_loaded(parts.read(part)))
    own_groups = optimizer.state_dict()["param_groups"]
    if len(saved_groups) != len(own_groups):
        raise ValueError(f"the optimizer state has {len(saved_groups)} parameter groups, this optimizer has "
                         f"{len(own_groups)}")
    groups = [dict(saved, params=own["params"]) for saved, own in zip(saved_groups, own_groups)]
    optimizer.load_state_dict({"state": pieces.assembled(), "param_groups": groups})


def _loaded(data):
    return torch.load(io.BytesIO(data), map_location="cpu")


class _Pieces:
    """The state of what this process steps (own layout), filled from saved parts' intersecting elements."""

    def __init__(self, own_layout):
        self._own = own_layout
        self._by_name = {}
        for index, (name, *_rest) in enumerate(own_layout):
            self._by_name.setdefault(name, []).append(index)
        self._state = {}    # own index -> {key: tensor (flat, elementwise) or value}
        self._covered = {}  # own index -> [(first, end)] of its elements filled, relative to it

    def take(self, saved):
        state = saved["state_dict"]["state"]
        for saved_index, entry in state.items():
            name, saved_begin, saved_numel, saved_shape = saved["layout"][saved_index]
            for index in self._by_name.get(name, ()):
                _, begin, numel, _ = self._own[index]
                first, end = max(begin, saved_begin), min(begin + numel, saved_begin + saved_numel)
                if first < end:
                    self._copy(index, entry, tuple(saved_shape), first - saved_begin, first - begin, end - first)

    def _copy(self, index, entry, saved_shape, source, target, length):
        numel = self._own[index][2]
        elementwise, other = self._state.setdefault(index, ({}, {}))
        for key, value in entry.items():
            if key != "step" and isinstance(value, torch.Tensor) and tuple(value.shape) == saved_shape:
                flat = elementwise.get(key)
                if flat is None:
                    flat = elementwise[key] = torch.empty(numel, dtype=value.dtype)
                flat[target:target + length] = value.reshape(-1)[source:source + length]
            else:
                other.setdefault(key, value)
        self._covered.setdefault(index, []).append((target, target + length))

    def assembled(self):
        result = {}
        for index, (elementwise, other) in self._state.items():
            name, begin, numel, shape = self._own[index]
            reached = 0
            for first, end in sorted(self._covered[index]):
                if first != reached:
                    reached = -1
                    break
                reached = end
            if reached != numel:
                raise ValueError(f"optimizer state: the saved pieces of '{name}' do not cover the {numel} elements "
                                 f"from {begin} this process steps once each (a process's part is missing or "
                                 "repeated)")
            result[index] = dict(other, **{key: flat.reshape(shape) for key, flat in elementwise.items()})
        return result
