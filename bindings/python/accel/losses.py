"""accel.compute_loss: the library's losses, for models whose forward returns outputs rather than a loss.
The result is an accel.Tensor with the graph, ready for Accelerator.backward; a loss computed with
Python's torch from converted outputs would have no graph back into the model."""
from ._library import ffi, lib
from .errors import check
from .options import Options
from .tensor import Tensor, lent_all


def compute_loss(name, input, target, **options):
    """name: "cross_entropy" (input [N, C] logits, int64 target [N]), "nll", "mse", "l1" or
    "bce_with_logits". options: reduction ("mean", "sum", "none"), label_smoothing, ignore_index."""
    with Options(options) as settings, lent_all([input, target]) as (input_tensor, target_tensor):
        out = ffi.new("accel_tensor_t **")
        check(lib.accel_loss_compute(out, name.encode(), input_tensor.pointer, target_tensor.pointer,
                                     settings.pointer))
    return Tensor(out[0])
