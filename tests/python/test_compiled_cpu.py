"""A library that `kiln compile --target cpu` builds (examples/gemma_mlp.onnx, one compile per test
session) called through both kiln.load and tvm_ffi.load_module with NumPy arrays: results against
a NumPy reference of the model (weights read from the .onnx), and the error messages for wrong
inputs. Needs the kiln binary: $KILN_BINARY, else the newest build*/tools/kiln (tests/python/run.sh
sets KILN_BINARY from $KILN_BUILD_DIR; when it is set the binary must exist)."""
import numpy as np
import pytest

import kiln
from gemma_model import HIDDEN, SIG, WEIGHTS, compile_gemma, reference, weights


@pytest.fixture(scope="session")
def compiled(tmp_path_factory):
    return compile_gemma(tmp_path_factory.mktemp("gemma_cpu"), "cpu")


def rand32(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def nan32(*shape):
    return np.full(shape, np.nan, np.float32)


@pytest.fixture(scope="module")
def kiln_fn(compiled):
    lib = kiln.load(compiled)
    assert list(lib.functions) == ["gemma_mlp"], lib
    return lib.gemma_mlp


@pytest.fixture(scope="module")
def tvm_fn(compiled):
    tvm_ffi = pytest.importorskip(
        "tvm_ffi", reason="apache-tvm-ffi is not installed (pip install apache-tvm-ffi); TVM-FFI export untested")
    return tvm_ffi.load_module(compiled).gemma_mlp


W = weights()


@pytest.fixture(params=["kiln.load", "tvm_ffi"])
def fn(request):
    """The function of one adapter, called as fn(x, y, probs): the weights go in between."""
    f = request.getfixturevalue("kiln_fn" if request.param == "kiln.load" else "tvm_fn")
    return lambda x, *outputs: f(x, *[W[n] for n in WEIGHTS], *outputs)


@pytest.fixture(params=["kiln.load", "tvm_ffi"])
def raw_fn(request):
    """The function of one adapter, called with exactly the arguments given."""
    return request.getfixturevalue("kiln_fn" if request.param == "kiln.load" else "tvm_fn")


def test_signature(kiln_fn):
    assert kiln_fn.signature == SIG
    assert kiln_fn.device == "cpu"


@pytest.mark.parametrize("batch,seq", [(2, 5), (1, 1), (3, 17)])
def test_matches_numpy(fn, batch, seq):
    x = rand32(batch, seq, HIDDEN, seed=batch * 100 + seq)
    y, probs = nan32(batch, seq, HIDDEN), nan32(batch, seq, HIDDEN)
    fn(x, y, probs)
    want_y, want_probs = reference(x)
    np.testing.assert_allclose(y, want_y, rtol=1e-4, atol=1e-4, err_msg=f"y for x of shape {x.shape}")
    np.testing.assert_allclose(probs, want_probs, rtol=1e-4, atol=1e-6, err_msg=f"probs for x of shape {x.shape}")


def expect(error, message, fn, *args):
    with pytest.raises(error) as info:
        fn(*args)
    assert str(info.value).splitlines()[0] == message, f"got: {info.value}\nexpected: {message}"


def test_wrong_dtype(fn):
    x = rand32(2, 3, HIDDEN).astype(np.float64)
    expect(TypeError, f"{SIG}: x.dtype is float64, expected float32", fn, x, nan32(2, 3, HIDDEN), nan32(2, 3, HIDDEN))


def test_wrong_hidden_size(fn):
    expect(ValueError, f"{SIG}: x.shape[2] is 32, expected 64", fn, rand32(2, 3, 32), nan32(2, 3, 64), nan32(2, 3, 64))


def test_symbol_disagrees(fn):
    expect(ValueError, f"{SIG}: y.shape[1] is 4, expected seq = 3 (from x.shape[1])", fn,
           rand32(2, 3, HIDDEN), nan32(2, 4, HIDDEN), nan32(2, 3, HIDDEN))


def test_wrong_rank(fn):
    expect(ValueError, f"{SIG}: probs.ndim is 2, expected 3", fn,
           rand32(2, 3, HIDDEN), nan32(2, 3, HIDDEN), nan32(6, HIDDEN))


def test_wrong_count(raw_fn):
    expect(TypeError, f"{SIG}: takes 8 tensors, got 2", raw_fn, rand32(2, 3, HIDDEN), nan32(2, 3, HIDDEN))


def test_wrong_weight_shape(raw_fn):
    args = [rand32(2, 3, HIDDEN)] + [W[n] for n in WEIGHTS] + [nan32(2, 3, HIDDEN), nan32(2, 3, HIDDEN)]
    args[3] = W["w_gate"].T.copy()  # [256, 64] instead of [64, 256]
    expect(ValueError, f"{SIG}: w_gate.shape[0] is 256, expected 64", raw_fn, *args)


def test_not_a_tensor(fn):
    with pytest.raises(TypeError) as info:
        fn(rand32(2, 3, HIDDEN), nan32(2, 3, HIDDEN), 7)
    assert str(info.value).startswith(f"{SIG}: probs is "), str(info.value)


def test_non_contiguous(fn):
    x = rand32(2, 3, 2 * HIDDEN)[:, :, ::2]
    with pytest.raises(ValueError) as info:
        fn(x, nan32(2, 3, HIDDEN), nan32(2, 3, HIDDEN))
    assert str(info.value).startswith(f"{SIG}: x "), str(info.value)
