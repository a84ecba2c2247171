"""`kiln compile --float-intermediates` (src/lower/FloatIntermediates.h): a float16 chain fused into
one kernel (LayerNorm then erf-GELU, as an exported model writes them) keeps its intermediates in
float32, so the generated CUDA has no rounding to float16 that is widened again at once; without the
flag every op rounds. The erf of that chain takes a shorter formula (no erff call), its Sigmoid and 1 + tanh
the exp2 and reciprocal units. Sources (`--no-build`), and one nvcc build of them where nvcc is. Needs the kiln
binary and the onnx package."""
import os
import shutil
import subprocess

import pytest

from gemma_model import kiln_binary

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402


def layernorm_gelu(path):
    h = TensorProto.FLOAT16
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5),
        helper.make_node("Div", ["ln", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["a"]),
        helper.make_node("Mul", ["ln", "a"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["y"]),
        # SiLU and tanh-GELU of the same values: a Sigmoid and a 1 + tanh under the option.
        helper.make_node("Sigmoid", ["ln"], ["s"]),
        helper.make_node("Mul", ["ln", "s"], ["silu"]),
        helper.make_node("Mul", ["ln", "sqrt2"], ["k"]),
        helper.make_node("Tanh", ["k"], ["t"]),
        helper.make_node("Add", ["t", "one"], ["ta"]),
        helper.make_node("Mul", ["ln", "ta"], ["tgelu"]),
    ]
    inits = [
        helper.make_tensor("gamma", h, [256], [1.0] * 256),
        helper.make_tensor("beta", h, [256], [0.0] * 256),
        helper.make_tensor("sqrt2", h, [], [1.4142]),
        helper.make_tensor("one", h, [], [1.0]),
        helper.make_tensor("half", h, [], [0.5]),
    ]
    graph = helper.make_graph(nodes, "layernorm_gelu", [helper.make_tensor_value_info("x", h, [64, 256])],
                              [helper.make_tensor_value_info(n, h, [64, 256]) for n in ("y", "silu", "tgelu")], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(path))


def round_trips(source):
    return source.count("kiln::cast<float, __half>(kiln::cast<__half, float>(")


def test_float_intermediates_drop_the_float16_round_trips(tmp_path):
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    model = tmp_path / "layernorm_gelu.onnx"
    layernorm_gelu(model)
    sources = {}
    for name, flags in (("per_op", []), ("float", ["--float-intermediates"])):
        out = tmp_path / name
        run = subprocess.run([str(binary), "compile", str(model), "-o", str(out), "--target", "sm_90", "--no-build", *flags],
                             capture_output=True, text=True)
        assert run.returncode == 0, run.stderr[-2000:]
        sources[name] = (out / "layernorm_gelu.cu").read_text()
        assert ("--float-intermediates" in (out / "schedules.md").read_text()) == bool(flags)
    assert round_trips(sources["per_op"]) > 0
    assert round_trips(sources["float"]) == 0
    assert "erff(" in sources["per_op"]
    assert "erff(" not in sources["float"] and "erf_u0" in sources["float"]  # the short erf, its argument computed once
    # Sigmoid and 1 + tanh as the exp2 and reciprocal units; tanhf and the division only without.
    assert "tanhf(" in sources["per_op"] and "tanhf(" not in sources["float"]
    assert "kiln::exp2_unit(" in sources["float"] and "kiln::rcp_unit(" in sources["float"]
    assert "kiln::rcp_unit(" not in sources["per_op"]


def test_float_intermediates_source_compiles(tmp_path):
    """The CUDA source of the option (kiln::exp2_unit, kiln::rcp_unit) compiles with nvcc for sm_90a."""
    binary = kiln_binary()
    nvcc = shutil.which("nvcc") or ("/usr/local/cuda/bin/nvcc" if os.path.exists("/usr/local/cuda/bin/nvcc") else None)
    if binary is None or nvcc is None:
        pytest.skip("needs the kiln binary and nvcc")
    model = tmp_path / "layernorm_gelu.onnx"
    layernorm_gelu(model)
    out = tmp_path / "float"
    run = subprocess.run([str(binary), "compile", str(model), "-o", str(out), "--target", "sm_90", "--no-build",
                          "--float-intermediates"], capture_output=True, text=True)
    assert run.returncode == 0, run.stderr[-2000:]
    build = subprocess.run([nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-arch=sm_90a", "-I", str(out / "include"),
                            "-c", str(out / "layernorm_gelu.cu"), "-o", str(tmp_path / "layernorm_gelu.o")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-4000:]
