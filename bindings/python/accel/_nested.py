"""Accelerate's recursively_apply: a function applied to every tensor of nested lists, tuples (named
tuples included) and dicts, the structure rebuilt around the results, in traversal order (so every rank,
passing the same structure, runs the same collectives in the same order)."""


def apply(function, data, operation):
    if isinstance(data, (list, tuple)):
        items = [apply(function, item, operation) for item in data]
        return type(data)(*items) if hasattr(data, "_fields") else type(data)(items)
    if isinstance(data, dict):
        return type(data)((key, apply(function, value, operation)) for key, value in data.items())
    if not hasattr(data, "__dlpack__"):  # numpy arrays, torch tensors and accel.Tensor all have it
        raise TypeError(f"{operation} takes tensors (numpy arrays, torch tensors, accel.Tensor) in nested "
                        f"lists, tuples and dicts, not {type(data).__name__}")
    return function(data)


def leaves(data, operation, path=""):
    """[(path, leaf)] in apply's traversal order; a path names the keys and indices down to the leaf,
    separated by dots ("metrics.loss", "outputs.0"); a lone tensor's path is ""."""
    if isinstance(data, (list, tuple)):
        items = enumerate(data)
    elif isinstance(data, dict):
        items = data.items()
    else:
        apply(lambda leaf: leaf, data, operation)  # the same TypeError for what is not a tensor
        return [(path, data)]
    found = []
    for key, value in items:
        found += leaves(value, operation, f"{path}.{key}" if path else str(key))
    return found
