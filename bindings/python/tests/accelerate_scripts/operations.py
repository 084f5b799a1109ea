"""Accelerate's operations (accelerate.utils / test_ops), on torch tensors and nested structures: gather,
gather_object, broadcast, broadcast_object_list, reduce, pad_across_processes, copy_tensor_to_devices,
send_to_device, and PartialState's process facts."""
import torch

from accel import PartialState
from accel.utils import (DistributedType, broadcast, broadcast_object_list, copy_tensor_to_devices, gather,
                         gather_object, pad_across_processes, reduce, send_to_device)

state = PartialState()
processes, rank = state.num_processes, state.process_index
assert state.distributed_type == (DistributedType.MULTI_CPU if processes > 1 else DistributedType.NO)
assert state.is_main_process == (rank == 0) and state.is_last_process == (rank == processes - 1)


def mine():
    return torch.arange(processes) + 1.0 + rank * processes


# gather: every process's rows, in rank order; nested structures keep their shape.
assert gather(mine()).tolist() == [float(i) for i in range(1, processes * processes + 1)]
nested = gather({"a": mine(), "b": [mine() * 2, (torch.tensor([rank]),)]})
assert nested["b"][0].tolist() == [2.0 * i for i in range(1, processes * processes + 1)]
assert nested["b"][1][0].tolist() == list(range(processes))
# gather_object: lists from every process, joined.
assert gather_object([rank, f"rank {rank}"]) == [item for r in range(processes) for item in (r, f"rank {r}")]
# broadcast: in place, from the main process (or another).
assert broadcast(mine()).tolist() == [float(i) for i in range(1, processes + 1)]
last = broadcast({"x": mine()}, from_process=processes - 1)
assert last["x"].tolist() == (torch.arange(processes) + 1.0 + (processes - 1) * processes).tolist()
objects = [rank, {"rank": rank}] if rank == 0 else [None, None]
assert broadcast_object_list(objects) == [0, {"rank": 0}]
# reduce: sum, mean and max, elementwise.
values = torch.tensor([1.0, 2.0]) + 2 * rank
total = sum(torch.tensor([1.0, 2.0]) + 2 * r for r in range(processes))
assert reduce(values, "sum").tolist() == total.tolist()
assert reduce(values).tolist() == (total / processes).tolist()  # mean, accelerate.utils.reduce's default
assert reduce(values, "max").tolist() == (torch.tensor([1.0, 2.0]) + 2 * (processes - 1)).tolist()
# pad_across_processes: the main process has one more row; the others are padded to it.
tensor = torch.arange(processes + 1) if rank == 0 else torch.arange(processes)
padded = pad_across_processes(tensor)
assert padded.shape == (processes + 1,)
if rank > 0:
    assert padded.tolist() == list(range(processes)) + [0]
padded_first = pad_across_processes(tensor, pad_index=-1, pad_first=True)
if rank > 0:
    assert padded_first.tolist() == [-1] + list(range(processes))
# copy_tensor_to_devices: the main process's tensor everywhere.
copied = copy_tensor_to_devices(torch.tensor([1, 2, 3]) if state.is_main_process else None)
assert copied.tolist() == [1, 2, 3]
# send_to_device: every tensor of a structure on the device; other leaves as they are.
moved = send_to_device({"t": torch.ones(2), "n": 3, "l": [torch.zeros(1)]}, state.device)
assert moved["n"] == 3 and moved["t"].device.type == state.device.type
state.wait_for_everyone()
state.print(f"operations: ok on {processes} processes")
