"""The collectives of accel.utils.operations on every process of a run: gather (contiguous or not),
gather_object, broadcast, pad_across_processes, reduce, copy_tensor_to_devices, and the refusal of calls
whose shapes differ between the processes. Run as a script (`accel launch --num_processes 2 test_ops.py`)
or through main() (debug_launcher(test_ops.main)); any failure raises."""
import torch

from accel import PartialState
from accel.errors import CollectiveShapeMismatchError
from accel.test_utils.testing import assert_exception
from accel.utils.dataclasses import DistributedType
from accel.utils.operations import (broadcast, copy_tensor_to_devices, gather, gather_object, pad_across_processes,
                                    reduce)


def process_values(state):
    """num_processes floats, different on each process: process p holds p * n + 1 ... p * n + n."""
    n = state.num_processes
    return (torch.arange(n) + 1.0 + n * state.process_index).to(state.device)


def check_gather(state):
    assert gather(process_values(state)).tolist() == list(range(1, state.num_processes ** 2 + 1))


def check_gather_object(state):
    gathered = gather_object([state.process_index])
    assert gathered == list(range(state.num_processes)), f"{gathered} != {list(range(state.num_processes))}"


def check_gather_non_contiguous(state):
    tensor = torch.arange(12).view(4, 3).t().to(state.device)
    assert not tensor.is_contiguous()
    assert gather(tensor).tolist() == tensor.tolist() * state.num_processes


def check_broadcast(state):
    broadcasted = broadcast(process_values(state))
    assert broadcasted.tolist() == list(range(1, state.num_processes + 1))


def check_pad_across_processes(state):
    # The main process holds one element more: every other process is padded with a zero.
    length = state.num_processes + (1 if state.is_main_process else 0)
    padded = pad_across_processes(torch.arange(length).to(state.device))
    expected = list(range(state.num_processes + 1)) if state.is_main_process else list(range(state.num_processes)) + [0]
    assert padded.tolist() == expected, f"{padded.tolist()} != {expected}"


def check_reduce(state):
    n = state.num_processes
    total = [sum(p * n + i + 1.0 for p in range(n)) for i in range(n)]
    assert torch.allclose(reduce(process_values(state), "sum").cpu(), torch.tensor(total))
    assert torch.allclose(reduce(process_values(state), "mean").cpu(), torch.tensor(total) / n)


def check_mismatched_shapes_are_refused(state):
    """A collective whose shapes differ between the processes fails on every process with an accel error
    naming them, which is also Accelerate's DistributedOperationException (Accelerate raises that only in its
    debug mode; accel always checks). Nothing to refuse with one process."""
    if state.num_processes == 1:
        return
    row = torch.tensor([[0.0, 1, 2, 3, 4]]).to(state.device)
    other_rank = torch.tensor([[[0.0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]]).to(state.device)
    for collective in (pad_across_processes, reduce, broadcast):
        with assert_exception(CollectiveShapeMismatchError):
            collective({"tensor": row if state.process_index == 0 else other_rank})


def check_copy_tensor_to_devices(state):
    tensor = torch.tensor([1, 2, 3], dtype=torch.int).to(state.device) if state.is_main_process else None
    copied = copy_tensor_to_devices(tensor)
    assert copied.tolist() == [1, 2, 3] and copied.dtype == torch.int


def main():
    state = PartialState()
    state.print(f"State: {state}")
    assert state.distributed_type in (DistributedType.NO, DistributedType.MULTI_CPU, DistributedType.MULTI_GPU)
    for check in (check_gather, check_gather_object, check_gather_non_contiguous, check_broadcast,
                  check_pad_across_processes, check_reduce, check_mismatched_shapes_are_refused,
                  check_copy_tensor_to_devices):
        state.print(f"testing {check.__name__[len('check_'):]}")
        check(state)
    state.destroy_process_group()


if __name__ == "__main__":
    main()
