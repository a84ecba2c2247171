"""The TVM-FFI export (include/kiln/runtime/tvm_ffi_export.h): tvm_ffi.load_module loads the fixture
library and calls its functions with NumPy arrays; validation failures arrive as TypeError /
ValueError through TVM-FFI's error API with kiln's message."""
import numpy as np
import pytest

from conftest import ADD_SIG, GEMV_SIG, ROWSUM_SIG

tvm_ffi = pytest.importorskip(
    "tvm_ffi", reason="apache-tvm-ffi is not installed (pip install apache-tvm-ffi); TVM-FFI export untested")


@pytest.fixture(scope="module")
def mod(library_path):
    return tvm_ffi.load_module(library_path)


def f32(*shape):
    return np.zeros(shape, dtype=np.float32)


def rand32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def expect(error, message, fn, *args):
    with pytest.raises(error) as info:
        fn(*args)
    assert str(info.value).splitlines()[0] == message, f"got: {info.value}\nexpected: {message}"


def test_add(mod):
    a, b, c = rand32(100, seed=1), rand32(100, seed=2), np.full(100, np.nan, np.float32)
    mod.add(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_gemv(mod):
    w, x, y = rand32(5, 16, seed=3), rand32(16, seed=4), np.full(5, np.nan, np.float32)
    mod.gemv(w, x, y)
    np.testing.assert_allclose(y, w @ x, rtol=1e-5, atol=1e-5)


def test_cpu_workspace(mod):
    y = np.full(6, -1, np.int64)
    mod.fill(y)
    np.testing.assert_array_equal(y, np.arange(6))


def test_tvm_ffi_tensor_objects(mod):
    a, b, c = rand32(8, seed=5), rand32(8, seed=6), f32(8)
    mod.add(tvm_ffi.from_dlpack(a), tvm_ffi.from_dlpack(b), tvm_ffi.from_dlpack(c))
    np.testing.assert_array_equal(c, a + b)


def test_doc_is_the_signature(mod):
    get_doc = getattr(mod, "get_function_doc", None)
    if get_doc is None:
        pytest.skip("this tvm_ffi has no Module.get_function_doc")
    assert get_doc("rowsum") == ROWSUM_SIG


def test_argument_count(mod):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: takes 3 tensors, got 2", mod.add, a, a)


def test_not_a_tensor(mod):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: c is int, expected a tensor", mod.add, a, a, 3)
    expect(TypeError, f"{ADD_SIG}: b is str, expected a tensor", mod.add, a, "x", a)


def test_dtype(mod):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: b.dtype is float64, expected float32", mod.add, a, np.zeros(4), a)


def test_shape_rules(mod):
    expect(ValueError, f"{ADD_SIG}: c.shape[0] is 5, expected n = 4 (from a.shape[0])",
           mod.add, f32(4), f32(4), f32(5))
    expect(ValueError, f"{ROWSUM_SIG}: x.shape[1] is 7, expected 8", mod.rowsum, f32(3, 7), f32(3))
    expect(ValueError, f"{GEMV_SIG}: k is 6, expected a multiple of 4", mod.gemv, f32(3, 6), f32(6), f32(3))


def test_strides(mod):
    expect(ValueError, f"{ROWSUM_SIG}: x has strides [1, 3], expected compact row-major strides for shape [3, 8]",
           mod.rowsum, f32(8, 3).T, f32(3))


def test_alignment(mod):
    expect(ValueError, f"{GEMV_SIG}: x.data is not 16-byte aligned", mod.gemv, f32(2, 8), f32(40)[1:9], f32(2))
