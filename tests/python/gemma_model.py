"""examples/gemma_mlp.onnx for the compiled-library tests: `kiln compile` of it, and the model in
NumPy (weights read from the .onnx) as the reference."""
import math
import os
import pathlib
import subprocess

import numpy as np
import pytest

from conftest import ROOT

MODEL = ROOT / "examples" / "gemma_mlp.onnx"
HIDDEN = 64
# The compiled function takes the model's tensor initializers as inputs after x, in this order; the
# five scalar initializers (half, one, three, gelu_c, sqrt_2_over_pi) are literals in its code, so
# they are no parameters (a constant the kernel never reads is not passed).
WEIGHTS = ["ln_scale", "ln_bias", "w_gate", "w_up", "w_down"]
SIG = ("gemma_mlp(x: Tensor([batch, seq, 64], float32), ln_scale: Tensor([64], float32), "
       "ln_bias: Tensor([64], float32), w_gate: Tensor([64, 256], float32), w_up: Tensor([64, 256], float32), "
       "w_down: Tensor([256, 64], float32)) -> "
       "(y: Tensor([batch, seq, 64], float32), probs: Tensor([batch, seq, 64], float32))")


def kiln_binary():
    """$KILN_BINARY (must exist when set), else the newest build*/tools/kiln, else None."""
    env = os.environ.get("KILN_BINARY")
    if env:
        assert pathlib.Path(env).is_file(), f"KILN_BINARY={env} does not exist"
        return env
    found = [p for p in ROOT.glob("build*/tools/kiln") if p.is_file()]
    return str(max(found, key=lambda p: p.stat().st_mtime)) if found else None


def compile_gemma(out, target):
    """`kiln compile examples/gemma_mlp.onnx -o out --target target`; the library's path."""
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    run = subprocess.run([binary, "compile", str(MODEL), "-o", str(out), "--target", target],
                         capture_output=True, text=True)
    assert run.returncode == 0, f"kiln compile failed:\n{run.stdout}\n{run.stderr}"
    library = pathlib.Path(out) / "libgemma_mlp.so"
    assert library.is_file(), f"no {library}; kiln compile printed:\n{run.stdout}"
    return str(library)


def weights():
    """The model's initializers, name -> float32 array."""
    onnx = pytest.importorskip("onnx", reason="the onnx package reads the example model's weights")
    from onnx import numpy_helper

    return {t.name: numpy_helper.to_array(t).astype(np.float32) for t in onnx.load(str(MODEL)).graph.initializer}


def reference(x):
    """The model in float64 NumPy: LayerNorm -> gate/up -> tanh-GELU(gate) * up -> down -> + x;
    softmax. Returns (y, probs)."""
    w = {name: a.astype(np.float64) for name, a in weights().items()}
    x = np.asarray(x, dtype=np.float64)
    mean = x.mean(-1, keepdims=True)
    var = ((x - mean) ** 2).mean(-1, keepdims=True)
    xn = (x - mean) / np.sqrt(var + 1e-6) * w["ln_scale"] + w["ln_bias"]
    gate, up = xn @ w["w_gate"], xn @ w["w_up"]
    gelu = 0.5 * gate * (1 + np.tanh(math.sqrt(2 / math.pi) * (gate + 0.044715 * gate**3)))
    y = x + (gelu * up) @ w["w_down"]
    e = np.exp(y - y.max(-1, keepdims=True))
    return y, e / e.sum(-1, keepdims=True)
