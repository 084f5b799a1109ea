"""Tensors in and out through DLPack, without copies, and who owns the memory when."""
import sys

import numpy as np
import pytest
import torch
from torch.utils import dlpack as torch_dlpack

import accel
from accel.tensor import lent, returned_like


def test_a_numpy_array_goes_in_without_a_copy():
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    with accel.Tensor.from_dlpack(array) as tensor:
        assert tensor.data_ptr() == array.ctypes.data
        assert (tensor.shape, tensor.dtype, tensor.device, tensor.itemsize) == ((3, 4), "float32", "cpu", 4)


def test_a_numpy_view_keeps_its_strides():
    view = np.arange(20, dtype=np.int64).reshape(4, 5)[:, ::2]
    with accel.Tensor.from_dlpack(view) as tensor:
        back = tensor.numpy()
    assert back.ctypes.data == view.ctypes.data and back.strides == view.strides
    np.testing.assert_array_equal(back, view)


def test_tensors_come_out_as_numpy_and_torch_on_the_same_memory():
    array = np.arange(6, dtype=np.float64)
    with accel.Tensor.from_dlpack(array) as tensor:
        as_numpy, as_torch = tensor.numpy(), tensor.torch()
    assert as_numpy.ctypes.data == array.ctypes.data == as_torch.data_ptr()
    array[0] = 42  # one memory: the exports see the write
    assert as_numpy[0] == 42 and as_torch[0].item() == 42


def test_numpy_reads_a_tensor_as_an_array():
    with accel.Tensor.from_dlpack(np.array([[2.5]], dtype=np.float32)) as tensor:
        assert np.asarray(tensor).tolist() == [[2.5]] and np.asarray(tensor, dtype=np.int64).tolist() == [[2]]
        assert tensor.item() == 2.5 and tensor.numel() == 1 and tensor.ndim == 2


def test_a_torch_tensor_goes_in_without_a_copy_and_its_capsule_is_consumed():
    source = torch.arange(5, dtype=torch.int32, requires_grad=False)
    capsule = torch_dlpack.to_dlpack(source)

    class Producer:
        def __dlpack__(self):
            return capsule

    with accel.Tensor.from_dlpack(Producer()) as tensor:
        assert tensor.data_ptr() == source.data_ptr() and tensor.dtype == "int32"
    assert 'capsule object "used_dltensor"' in repr(capsule)  # the library owns it: torch must not free it


def test_a_tensor_that_requires_grad_is_shared_too():
    weights = torch.ones(3, requires_grad=True)
    with accel.Tensor.from_dlpack(weights) as tensor:
        assert tensor.data_ptr() == weights.data_ptr()


def test_results_come_back_in_the_kind_they_came_in():
    for value, kind in ((np.ones(2), np.ndarray), (torch.ones(2), torch.Tensor)):
        with lent(value) as tensor:
            result = returned_like(accel.Tensor.from_dlpack(tensor), value)
        assert isinstance(result, kind)
    with accel.Tensor.from_dlpack(np.ones(2)) as tensor:
        assert returned_like(tensor, tensor) is tensor


def test_a_lent_numpy_array_is_kept_alive_until_the_library_lets_go():
    array = np.arange(4, dtype=np.float32)
    before = sys.getrefcount(array)
    tensor = accel.Tensor.from_dlpack(array)
    assert sys.getrefcount(array) == before + 1
    capsule = tensor.__dlpack__()
    tensor.close()
    assert sys.getrefcount(array) == before + 1  # the unconsumed export still uses the memory
    del capsule  # its destructor calls the export's deleter, which lets the array go
    assert sys.getrefcount(array) == before


def test_read_only_arrays_such_as_dlpack_imports_can_go_back_in():
    with accel.Tensor.from_dlpack(np.arange(3, dtype=np.float32)) as tensor:
        read_only = tensor.numpy()
    assert not read_only.flags.writeable
    with accel.Tensor.from_dlpack(read_only) as again:
        assert again.data_ptr() == read_only.ctypes.data


@pytest.mark.parametrize("dtype", ["float16", "float32", "float64", "int8", "int16", "int32", "int64", "uint8"])
def test_dtypes_round_trip(dtype):
    array = np.arange(5).astype(dtype)
    with accel.Tensor.from_dlpack(array) as tensor:
        assert tensor.dtype == dtype
        back = tensor.numpy()
    assert back.dtype == array.dtype
    np.testing.assert_array_equal(back, array)


def test_bool_arrays_go_in_but_libtorch_cannot_export_them():
    with accel.Tensor.from_dlpack(np.array([True, False])) as tensor:
        assert tensor.dtype == "bool" and tensor.tobytes() == b"\x01\x00"
        with pytest.raises(accel.DtypeError, match="bool"):
            tensor.numpy()


def test_arrays_accel_cannot_describe_are_refused():
    with pytest.raises(TypeError, match="native-order"):
        accel.Tensor.from_dlpack(np.arange(3, dtype=">f4"))
    with pytest.raises(TypeError, match="numpy arrays, torch tensors"):
        accel.Tensor.from_dlpack([1, 2, 3])


def test_from_buffer_copies():
    data = bytearray(np.arange(6, dtype=np.int16).tobytes())
    with accel.Tensor.from_buffer(data, "int16", (2, 3)) as tensor:
        data[0] = 99  # a copy: the tensor does not see it
        np.testing.assert_array_equal(tensor.numpy(), np.arange(6, dtype=np.int16).reshape(2, 3))
    with pytest.raises(ValueError, match="needs 24"):
        accel.Tensor.from_buffer(data, "float32", (2, 3))


def test_a_closed_tensor_says_so():
    tensor = accel.Tensor.from_dlpack(np.zeros(1))
    tensor.close()
    tensor.close()  # a second close does nothing
    assert repr(tensor) == "accel.Tensor(closed)"
    with pytest.raises(ValueError, match="Tensor is closed"):
        tensor.shape
