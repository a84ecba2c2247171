"""The CUDA library of examples/gemma_mlp.onnx (`kiln compile --target sm_90`: one function whose
stages pass temporaries through the device workspace) called from PyTorch through kiln.load and
tvm_ffi.load_module: the adapters allocate the workspace (torch's allocator on its current stream;
cudaMallocAsync on an explicit stream= or for frameworks without an allocator in the DLPack C
exchange API) and the results match the NumPy reference. GPU only: skipped without a CUDA torch.
The library: $KILN_CUDA_GEMMA_LIBRARY, else compiled here with the kiln binary and nvcc."""
import json
import os

import numpy as np
import pytest

import kiln
from gemma_model import HIDDEN, WEIGHTS, compile_gemma, reference, weights

torch = pytest.importorskip("torch", reason="the GPU tests use PyTorch")
if not torch.cuda.is_available():
    pytest.skip("no CUDA device", allow_module_level=True)


@pytest.fixture(scope="session")
def library(tmp_path_factory):
    path = os.environ.get("KILN_CUDA_GEMMA_LIBRARY")
    if path:
        return path
    major, minor = torch.cuda.get_device_capability()
    return compile_gemma(tmp_path_factory.mktemp("gemma_cuda"), f"sm_{major}{minor}")


def check(x, y, probs):
    want_y, want_probs = reference(x.cpu().numpy())
    np.testing.assert_allclose(y.cpu().numpy(), want_y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(probs.cpu().numpy(), want_probs, rtol=1e-4, atol=1e-6)


W = {name: torch.from_numpy(a).cuda() for name, a in weights().items()}


def tensors(batch, seq, seed):
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(batch, seq, HIDDEN, device="cuda", generator=g)
    nan = lambda: torch.full((batch, seq, HIDDEN), float("nan"), device="cuda")  # noqa: E731
    return x, nan(), nan()


def with_weights(f, framework=lambda t: t):
    """f called as (x, y, probs, **kw): the model's weights go in between."""
    return lambda x, *outputs, **kw: f(x, *[framework(W[n]) for n in WEIGHTS], *outputs, **kw)


@pytest.fixture(scope="module")
def raw_fn(library):
    f = kiln.load(library).gemma_mlp
    assert json.loads(f.signature_json)["workspace"]["buffers"], "gemma_mlp has no workspace: nothing tested"
    return f


@pytest.fixture(scope="module")
def fn(raw_fn):
    return with_weights(raw_fn)


@pytest.mark.parametrize("batch,seq", [(2, 5), (4, 333)])
def test_kiln_load_current_stream(fn, batch, seq):
    x, y, probs = tensors(batch, seq, seed=batch + seq)
    fn(x, y, probs)
    check(x, y, probs)


def test_kiln_load_side_stream(fn):
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        x, y, probs = tensors(3, 64, seed=7)
        for _ in range(3):  # workspace reused while earlier calls may still run
            fn(x, y, probs)
    s.synchronize()
    check(x, y, probs)


def test_kiln_load_explicit_stream(fn):
    s = torch.cuda.Stream()
    x, y, probs = tensors(2, 40, seed=8)
    torch.cuda.synchronize()
    fn(x, y, probs, stream=s.cuda_stream)  # workspace from cudaMallocAsync on s
    s.synchronize()
    check(x, y, probs)


def test_kiln_load_cupy(raw_fn):
    cupy = pytest.importorskip("cupy")
    fn = with_weights(raw_fn, cupy.from_dlpack)
    x, y, probs = tensors(2, 9, seed=9)
    cx, cy, cp = (cupy.from_dlpack(t) for t in (x, y, probs))
    torch.cuda.synchronize()
    fn(cx, cy, cp)  # CuPy: cudaMallocAsync on its current stream (no allocator in its DLPack)
    cupy.cuda.get_current_stream().synchronize()
    check(x, y, probs)


def test_tvm_ffi(library):
    tvm_ffi = pytest.importorskip("tvm_ffi", reason="apache-tvm-ffi is not installed")
    f = with_weights(tvm_ffi.load_module(library).gemma_mlp)
    x, y, probs = tensors(5, 77, seed=10)
    f(x, y, probs)  # workspace from the environment allocator tvm_ffi sets for torch
    check(x, y, probs)


def test_wrong_device_message(fn):
    x, y, probs = tensors(1, 2, seed=11)
    with pytest.raises(TypeError) as info:
        fn(x.cpu(), y, probs)
    assert "x is on cpu, expected cuda" in str(info.value), str(info.value)
