"""accel.utils.memory: Accelerate's find_executable_batch_size and release_memory."""
import functools
import gc
import inspect

from ..errors import OutOfMemoryError

_OUT_OF_MEMORY_MESSAGES = (
    "CUDA out of memory.",
    "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED.",
    "DefaultCPUAllocator: can't allocate memory",
    "XPU out of memory.",
)


def _clear_device_cache():
    gc.collect()
    import torch
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def should_reduce_batch_size(exception):
    """Whether exception says memory ran out (CUDA, CPU or XPU allocation, or cuDNN's unsupported size), as
    Accelerate decides: a torch.cuda.OutOfMemoryError, an accel.OutOfMemoryError, or a RuntimeError with one
    argument naming one of those failures."""
    import torch
    if isinstance(exception, (OutOfMemoryError, getattr(torch.cuda, "OutOfMemoryError", OutOfMemoryError))):
        return True
    return (isinstance(exception, RuntimeError) and len(exception.args) == 1 and isinstance(exception.args[0], str)
            and any(message in exception.args[0] for message in _OUT_OF_MEMORY_MESSAGES))


def find_executable_batch_size(function=None, starting_batch_size=128, reduce_batch_size_fn=None):
    """Decorator: calls function(batch_size, *args, **kwargs) from starting_batch_size, and again with half
    the batch size (or what reduce_batch_size_fn() returns) each time it fails for lack of memory
    (should_reduce_batch_size); other exceptions pass through. RuntimeError once the batch size reaches 0.
    The batch size it found is kept for the next call. The caller must not pass the batch size itself."""
    if function is None:
        return functools.partial(find_executable_batch_size, starting_batch_size=starting_batch_size,
                                 reduce_batch_size_fn=reduce_batch_size_fn)
    batch_size = starting_batch_size

    def halve():
        return batch_size // 2

    reduce = reduce_batch_size_fn if reduce_batch_size_fn is not None else halve

    @functools.wraps(function)
    def decorator(*args, **kwargs):
        nonlocal batch_size
        _clear_device_cache()
        parameters = list(inspect.signature(function).parameters.keys())
        if len(parameters) < len(args) + 1:
            given = ", ".join(f"{name}={value}" for name, value in zip(parameters[1:], args[1:]))
            raise TypeError(f"Batch size was passed into `{function.__name__}` as the first argument when called. "
                            f"Remove this as the decorator already does so: `{function.__name__}({given})`")
        while True:
            if batch_size == 0:
                raise RuntimeError("No executable batch size found, reached zero.")
            try:
                return function(batch_size, *args, **kwargs)
            except Exception as error:  # noqa: BLE001 - only memory failures are retried, the rest re-raised
                if not should_reduce_batch_size(error):
                    raise
                _clear_device_cache()
                batch_size = reduce()

    return decorator


def release_memory(*objects):
    """Drops the references in objects, collects garbage and empties CUDA's cache; returns a list of None
    of the same length, to assign back: a, b = release_memory(a, b)."""
    objects = [None] * len(objects)
    _clear_device_cache()
    return objects
