"""DLPack without copies, both ways, at the level of DLManagedTensor pointers and PyCapsules.

In: a producer's "dltensor" capsule is handed to accel_tensor_from_dlpack and, once the library owns it,
renamed "used_dltensor" as the protocol says, so the capsule's destructor leaves it alone. NumPy arrays do
not go through numpy's own __dlpack__, which refuses read-only arrays (every array np.from_dlpack returns
is one, so results could not be fed back): the binding describes the array in a DLManagedTensor of its own
whose deleter drops the reference that kept the array alive.

Out: a DLManagedTensor from accel_tensor_to_dlpack is wrapped in a "dltensor" capsule whose destructor
calls the deleter unless a consumer renamed it (took ownership).

The Python C API (capsules) is called through ctypes.pythonapi, which holds the GIL; cffi calls release it.
"""
import ctypes

from ._library import ffi, lib

_DLTENSOR = b"dltensor"
_USED_DLTENSOR = b"used_dltensor"

_capsule_get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
_capsule_get_pointer.restype = ctypes.c_void_p
_capsule_get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_set_name = ctypes.pythonapi.PyCapsule_SetName
_capsule_set_name.restype = ctypes.c_int
_capsule_set_name.argtypes = [ctypes.py_object, ctypes.c_char_p]
_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
# The destructor receives the dying capsule: it is read through a raw address, never as a Python object.
_capsule_is_valid_address = ctypes.pythonapi.PyCapsule_IsValid
_capsule_is_valid_address.restype = ctypes.c_int
_capsule_is_valid_address.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
_capsule_pointer_at_address = ctypes.PYFUNCTYPE(ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p)(
    ("PyCapsule_GetPointer", ctypes.pythonapi))


def import_capsule(capsule, consume):
    """Calls consume(DLManagedTensor *) with the capsule's tensor; when it returns without raising, the
    consumer owns the tensor and the capsule is marked used."""
    managed = ffi.cast("DLManagedTensor *", _capsule_get_pointer(capsule, _DLTENSOR))
    result = consume(managed)
    _capsule_set_name(capsule, _USED_DLTENSOR)
    return result


@ctypes.PYFUNCTYPE(None, ctypes.c_void_p)
def _delete_unconsumed(capsule_address):
    if _capsule_is_valid_address(capsule_address, _DLTENSOR):
        managed = ffi.cast("DLManagedTensor *", _capsule_pointer_at_address(capsule_address, _DLTENSOR))
        managed.deleter(managed)


def export_capsule(managed):
    """A "dltensor" capsule owning managed (a DLManagedTensor * cdata)."""
    return _capsule_new(int(ffi.cast("uintptr_t", managed)), _DLTENSOR,
                        ctypes.cast(_delete_unconsumed, ctypes.c_void_p).value)


# DLPack type codes (DLDataTypeCode); 6 is kDLBool since DLPack 0.8, which accel reads as bool.
_DL_INT, _DL_UINT, _DL_FLOAT, _DL_BOOL = 0, 1, 2, 6
_NUMPY_KINDS = {"i": _DL_INT, "u": _DL_UINT, "f": _DL_FLOAT, "b": _DL_BOOL}

# Arrays described to the library, by the address of their DLManagedTensor, until its deleter runs.
_lent_arrays = {}


@ffi.callback("void(DLManagedTensor *)")
def _return_array(managed):
    _lent_arrays.pop(int(ffi.cast("uintptr_t", managed)), None)


def describe_numpy(array):
    """A DLManagedTensor (cdata) describing a CPU numpy array in place; the array stays alive until the
    deleter runs. release_description undoes it when the library did not take it."""
    kind = _NUMPY_KINDS.get(array.dtype.kind)
    if kind is None or not array.dtype.isnative:
        raise TypeError(f"numpy dtype {array.dtype} cannot be passed to accel (native-order integers, floats "
                        "and bools only)")
    itemsize = array.dtype.itemsize
    if any(stride % itemsize for stride in array.strides):
        raise TypeError("numpy array strides are not a multiple of its item size; pass np.ascontiguousarray(a)")
    managed = ffi.new("DLManagedTensor *")
    shape = ffi.new("int64_t[]", array.shape)
    strides = ffi.new("int64_t[]", [stride // itemsize for stride in array.strides])
    tensor = managed.dl_tensor
    tensor.data = ffi.cast("void *", array.__array_interface__["data"][0])
    tensor.device.device_type = lib.kDLCPU
    tensor.device.device_id = 0
    tensor.ndim = array.ndim
    tensor.dtype.code = kind
    tensor.dtype.bits = itemsize * 8
    tensor.dtype.lanes = 1
    tensor.shape = shape
    tensor.strides = strides
    tensor.byte_offset = 0
    managed.deleter = _return_array
    _lent_arrays[int(ffi.cast("uintptr_t", managed))] = (array, managed, shape, strides)
    return managed


def release_description(managed):
    _return_array(managed)
