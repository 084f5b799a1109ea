"""accel.utils.tqdm: Accelerate's tqdm wrapper, a progress bar drawn by the local main process only (needs
the tqdm package; accel.ProgressBar is the library's own bar)."""
import warnings

from ..state import PartialState
from .imports import is_tqdm_available


def tqdm(*args, main_process_only=True, **kwargs):
    """tqdm.auto.tqdm(*args, **kwargs), disabled on every process but the local main one unless
    main_process_only is False. ImportError without the tqdm package. A bool as first argument is
    Accelerate's deprecated spelling of main_process_only (a FutureWarning)."""
    if not is_tqdm_available():
        raise ImportError("Accelerate's `tqdm` module requires `tqdm` to be installed. Please run `pip install tqdm`.")
    if args and isinstance(args[0], bool):
        warnings.warn(f"Passing `{args[0]}` as the first argument to Accelerate's `tqdm` wrapper is deprecated and "
                      "will be removed in v0.33.0. Please use the `main_process_only` keyword argument instead.",
                      FutureWarning)
        main_process_only, args = args[0], args[1:]
    from tqdm.auto import tqdm as progress_bar
    disable = kwargs.pop("disable", False)
    if main_process_only and not disable:
        disable = PartialState().local_process_index != 0
    return progress_bar(*args, **kwargs, disable=disable)
