"""accel.ProgressBar: the library's progress bar (tqdm's, drawn by libaccel so C and Python programs look
alike): on the main process of each machine, redrawn in place on a terminal, a plain line per tenth of
the run (or per 30 s) in logs; other processes draw nothing."""
import math

from ._handle import Handle
from ._library import ffi, lib
from .errors import check


class ProgressBar(Handle):
    _free = lib.accel_progress_free

    def __init__(self, accelerator, total, description=""):
        """total: the number of steps (0 or less: unknown)."""
        out = ffi.new("accel_progress_t **")
        check(lib.accel_progress_new(out, accelerator.pointer, int(total), description.encode()))
        super().__init__(out[0])

    def update(self, steps=1, loss=None):
        """Advances by steps; loss (a number) is shown as the last loss."""
        check(lib.accel_progress_update(self.pointer, int(steps), math.nan if loss is None else float(loss)))
