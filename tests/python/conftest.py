"""Shared fixtures for the adapter tests: the hand-written CPU kiln library (tests/python/fixture,
built by tests/python/run.sh or CMake) and a fake DLPack producer that can describe any tensor,
including ones no framework would produce (bad device, null data, negative sizes)."""
import ctypes
import os
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]

# What each function of the fixture library is, as its signature text.
ADD_SIG = "add(a: Tensor([n], float32), b: Tensor([n], float32), c: Tensor([n], float32))"
GEMV_SIG = ("gemv(w: Tensor([n, k], float32), x: Tensor([k], float32), y: Tensor([n], float32)); "
            "k % 4 == 0")
ROWSUM_SIG = "rowsum(x: Tensor([m, 8], float32), y: Tensor([m], float32))"


def _find_library():
    env = os.environ.get("KILN_TEST_LIBRARY")
    if env:
        return pathlib.Path(env)
    for build in sorted(ROOT.glob("build*/")):
        for candidate in (build / "libkiln_test_library.so", build / "tests/python/libkiln_test_library.so"):
            if candidate.exists():
                return candidate
    return None


@pytest.fixture(scope="session")
def library_path():
    path = _find_library()
    if path is None:
        pytest.skip("the fixture library is not built: run tests/python/run.sh (or set KILN_TEST_LIBRARY)")
    return str(path)


# --- A DLPack producer in ctypes (DLPack 0.6 legacy capsules, "dltensor"). ---
class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class DLManagedTensor(ctypes.Structure):
    pass


_DELETER = ctypes.CFUNCTYPE(None, ctypes.POINTER(DLManagedTensor))
DLManagedTensor._fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p),
                            ("deleter", _DELETER)]
_noop_deleter = _DELETER(lambda _: None)
_PyCapsule_New = ctypes.pythonapi.PyCapsule_New
_PyCapsule_New.restype = ctypes.py_object
_PyCapsule_New.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

FLOAT32 = (2, 32, 1)
CPU = 1


class FakeTensor:
    """Describes whatever it is told through __dlpack__; owns the memory behind `data`."""

    def __init__(self, shape, dtype=FLOAT32, device=(CPU, 0), strides=None, null_data=False,
                 null_shape=False, byte_offset=0):
        count = 1
        for s in shape:
            count *= max(s, 0)
        self.buffer = (ctypes.c_float * max(count + 16, 1))()
        self.shape = (ctypes.c_int64 * max(len(shape), 1))(*shape)
        self.strides = (ctypes.c_int64 * len(strides))(*strides) if strides is not None else None
        self.device = device
        self.managed = DLManagedTensor()
        t = self.managed.dl_tensor
        t.data = None if null_data else ctypes.addressof(self.buffer)
        t.device = DLDevice(*device)
        t.ndim = len(shape)
        t.dtype = DLDataType(*dtype)
        t.shape = None if null_shape else ctypes.cast(self.shape, ctypes.POINTER(ctypes.c_int64))
        t.strides = ctypes.cast(self.strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None
        t.byte_offset = byte_offset
        self.managed.deleter = _noop_deleter

    def __dlpack__(self, stream=None):
        return _PyCapsule_New(ctypes.addressof(self.managed), b"dltensor", None)

    def __dlpack_device__(self):
        return self.device
