"""Accelerate's trigger_sync_in_backward: two forwards under no_sync, the first backward stays local, the
second, under trigger_sync_in_backward, averages over the processes the sum of both (on several processes
the gradients differ between the ranks before it and agree after). Then test_utils' collectives script,
test_ops.main(), which ends the run."""
import torch

from accel import Accelerator
from accel.test_utils import RegressionModel, test_ops
from accel.utils import gather


def grads(model):
    return torch.stack([parameter.grad.detach().clone() for parameter in model.parameters()])


accelerator = Accelerator()
reference = RegressionModel(a=1.0, b=-1.0)
model = accelerator.prepare(RegressionModel(a=1.0, b=-1.0))
rank = accelerator.process_index
x_a, x_b = torch.tensor([1.0 + rank, 2.0]), torch.tensor([3.0 * (rank + 1)])

with accelerator.no_sync(model):
    loss_a = model(x_a).pow(2).sum()
    loss_b = model(x_b).pow(2).sum()
accelerator.backward(loss_a)
after_a = gather(grads(model)[None])
reference(x_a).pow(2).sum().backward()
assert torch.allclose(grads(model), grads(reference)), "the backward of a forward under no_sync stayed local"
if accelerator.num_processes > 1:
    assert not torch.allclose(after_a[0], after_a[1]), "the ranks' gradients differ before the triggered sync"

with accelerator.trigger_sync_in_backward(model):
    accelerator.backward(loss_b)
reference(x_b).pow(2).sum().backward()
expected = gather(grads(reference)[None]).mean(dim=0)
assert torch.allclose(grads(model), expected), (grads(model), expected)

test_ops.main()
print(f"trigger_sync_and_test_ops: ok on {accelerator.num_processes} processes")
