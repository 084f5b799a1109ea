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
