"""kiln.load: calls the fixture library's CPU functions with NumPy arrays, checks results, and
checks every argument rule (validate.h) with a wrong input: the exception type and its message,
which names the function, the argument, what was found and what was expected, and the signature."""
import re

import numpy as np
import pytest

from conftest import ADD_SIG, GEMV_SIG, ROWSUM_SIG, FakeTensor

kiln = pytest.importorskip("kiln", reason="the kiln package is not installed (pip install .)")


@pytest.fixture(scope="module")
def lib(library_path):
    return kiln.load(library_path)


def f32(*shape, fill=0.0):
    return np.full(shape, fill, dtype=np.float32)


def rand32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def expect(error, message, fn, *args, **kwargs):
    with pytest.raises(error) as info:
        fn(*args, **kwargs)
    assert str(info.value) == message, f"got: {info.value}\nexpected: {message}"


# --- Loading and describing ---------------------------------------------------------------------
def test_load_lists_the_functions(lib):
    assert sorted(lib.functions) == ["add", "fill", "gemv", "rowsum"]
    assert lib["add"] is lib.add
    assert lib.add.__name__ == "add"
    assert lib.add.signature == ADD_SIG
    assert lib.add.device == "cpu"


def test_docstring_has_the_signature(lib):
    assert lib.gemv.__doc__.startswith(GEMV_SIG)
    assert "w : float32 tensor, shape [n, k], input" in lib.gemv.__doc__
    assert "y : float32 tensor, shape [n], output" in lib.gemv.__doc__


def test_missing_function_names_the_library(lib, library_path):
    with pytest.raises(AttributeError, match="has no function 'nope'"):
        lib.nope
    with pytest.raises(KeyError, match="has no function 'nope'"):
        lib["nope"]


def test_load_errors(tmp_path):
    with pytest.raises(OSError, match="cannot load"):
        kiln.load(tmp_path / "missing.so")
    import ctypes.util
    libm = ctypes.util.find_library("m")
    if libm:
        with pytest.raises(ValueError, match="is not a kiln library"):
            kiln.load("libm.so.6")


# --- Results --------------------------------------------------------------------------------------
def test_add_writes_the_output_in_place(lib):
    a, b, c = rand32(1000, seed=1), rand32(1000, seed=2), f32(1000, fill=np.nan)
    assert lib.add(a, b, c) is None
    np.testing.assert_array_equal(c, a + b)


def test_gemv_matches_numpy(lib):
    w, x, y = rand32(37, 64, seed=3), rand32(64, seed=4), f32(37, fill=np.nan)
    lib.gemv(w, x, y)
    np.testing.assert_allclose(y, w @ x, rtol=1e-5, atol=1e-5)


def test_symbols_take_any_value_each_call(lib):
    for n in (0, 1, 17):
        a, b, c = rand32(n), rand32(n, seed=5), f32(n, fill=np.nan)
        lib.add(a, b, c)
        np.testing.assert_array_equal(c, a + b)


def test_views_with_offsets_are_zero_copy(lib):
    base = rand32(3, 8, seed=6)
    y = f32(2, fill=np.nan)
    lib.rowsum(base[1:], y)  # a row offset: byte_offset or a moved data pointer
    np.testing.assert_allclose(y, base[1:].sum(axis=1), rtol=1e-6)


def test_cpu_workspace_is_provided(lib):
    y = np.full(9, -7, dtype=np.int64)
    lib.fill(y)
    np.testing.assert_array_equal(y, np.arange(9))


def test_broadcast_strides_of_size_one_dims_are_accepted(lib):
    x = rand32(1, 8, seed=7)
    y = f32(1)
    lib.rowsum(x, y)
    np.testing.assert_allclose(y, x.sum(axis=1), rtol=1e-6)


# --- Every rule, with a wrong input -------------------------------------------------------------
def test_argument_count(lib):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: takes 3 tensors, got 2", lib.add, a, a)
    expect(TypeError, f"{ADD_SIG}: takes 3 tensors, got 4", lib.add, a, a, a, a)
    expect(TypeError, f"{ADD_SIG}: takes 3 tensors, got 0", lib.add)


def test_unexpected_keyword(lib):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: unexpected keyword argument 'c', expected only stream=",
           lib.add, a, a, c=a)


def test_stream_must_be_an_int(lib):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: stream is str, expected an int (a cudaStream_t address)",
           lib.add, a, a, a, stream="s")


@pytest.mark.parametrize("value, name", [(1, "int"), (None, "NoneType"), ([1.0] * 4, "list"),
                                         ("abc", "str")])
def test_not_a_tensor(lib, value, name):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: b is {name}, expected a tensor (an object with __dlpack__)",
           lib.add, a, value, a)


def test_dtype(lib):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: b.dtype is float64, expected float32",
           lib.add, a, np.zeros(4), a)
    expect(TypeError, f"{ADD_SIG}: a.dtype is int32, expected float32",
           lib.add, np.zeros(4, np.int32), a, a)


def test_ndim(lib):
    a = f32(4)
    expect(ValueError, f"{ADD_SIG}: c.ndim is 2, expected 1", lib.add, a, a, f32(2, 2))
    expect(ValueError, f"{ADD_SIG}: a.ndim is 0, expected 1", lib.add, np.zeros((), np.float32), a, a)


def test_constant_dim(lib):
    expect(ValueError, f"{ROWSUM_SIG}: x.shape[1] is 7, expected 8", lib.rowsum, f32(3, 7), f32(3))


def test_symbol_binds_on_first_use_and_must_agree(lib):
    expect(ValueError, f"{ADD_SIG}: c.shape[0] is 5, expected n = 4 (from a.shape[0])",
           lib.add, f32(4), f32(4), f32(5))
    expect(ValueError, f"{GEMV_SIG}: x.shape[0] is 12, expected k = 8 (from w.shape[1])",
           lib.gemv, f32(3, 8), f32(12), f32(3))
    expect(ValueError, f"{GEMV_SIG}: y.shape[0] is 4, expected n = 3 (from w.shape[0])",
           lib.gemv, f32(3, 8), f32(8), f32(4))


def test_divisibility(lib):
    expect(ValueError, f"{GEMV_SIG}: k is 6, expected a multiple of 4", lib.gemv, f32(3, 6), f32(6), f32(3))


def test_minimum(lib):
    expect(ValueError, f"{GEMV_SIG}: k is 0, expected at least 4", lib.gemv, f32(3, 0), f32(0), f32(3))
    expect(ValueError, f"{ROWSUM_SIG}: m is 0, expected at least 1", lib.rowsum, f32(0, 8), f32(0))


def test_strides(lib):
    a = f32(4)
    expect(ValueError, f"{ADD_SIG}: c has strides [2], expected compact row-major strides for shape [4]",
           lib.add, a, a, f32(8)[::2])
    expect(ValueError, f"{ROWSUM_SIG}: x has strides [1, 3], expected compact row-major strides for shape [3, 8]",
           lib.rowsum, f32(8, 3).T, f32(3))


def test_alignment(lib):
    base = f32(40)
    assert base.ctypes.data % 16 == 0
    misaligned = base[1:9]  # 4 bytes past a 16-byte boundary
    expect(ValueError, f"{GEMV_SIG}: x.data is not 16-byte aligned", lib.gemv, f32(2, 8), misaligned, f32(2))


def test_read_only_output(lib):
    a = f32(4)
    ro = f32(4)
    ro.setflags(write=False)
    lib.add(ro, ro, a)  # read-only inputs are fine
    expect(TypeError, f"{ADD_SIG}: c is read-only, expected a writable tensor (it is an output)",
           lib.add, a, a, ro)


def test_export_failure_names_the_argument(lib):
    a = f32(4)
    with pytest.raises(ValueError) as info:
        lib.add(a, np.array([None] * 4, dtype=object), a)
    message = str(info.value)
    assert message.startswith(f"{ADD_SIG}: b could not be taken through DLPack ("), message
    assert info.value.__cause__ is not None


def test_device_type(lib):
    a = f32(4)
    expect(TypeError, f"{ADD_SIG}: b is on cuda, expected cpu", lib.add, a, FakeTensor([4], device=(2, 0)), a)


def test_same_device(lib):
    a = FakeTensor([4], device=(1, 0))
    b = FakeTensor([4], device=(1, 1))
    expect(TypeError, f"{ADD_SIG}: b is on device 1 but a is on device 0", lib.add, a, b, FakeTensor([4]))


def test_null_data(lib):
    a = f32(4)
    expect(ValueError, f"{ADD_SIG}: c.data is null", lib.add, a, a, FakeTensor([4], null_data=True))
    lib.add(f32(0), f32(0), FakeTensor([0], null_data=True))  # an empty tensor may have no data


def test_null_shape(lib):
    a = f32(4)
    expect(ValueError, f"{ADD_SIG}: c.shape is null", lib.add, a, a, FakeTensor([4], null_shape=True))


def test_negative_size(lib):
    a = f32(4)
    expect(ValueError, f"{ADD_SIG}: a.shape[0] is -4, expected a size >= 0", lib.add, FakeTensor([-4]), a, a)


def test_fake_tensor_with_bad_strides(lib):
    a = f32(4)
    expect(ValueError, f"{ADD_SIG}: c has strides [-1], expected compact row-major strides for shape [4]",
           lib.add, a, a, FakeTensor([4], strides=[-1]))


def test_failures_leave_the_module_usable(lib):
    a, b, c = rand32(8), rand32(8, seed=9), f32(8)
    for _ in range(3):
        with pytest.raises(ValueError):
            lib.add(a, b, f32(9))
        lib.add(a, b, c)
        np.testing.assert_array_equal(c, a + b)
