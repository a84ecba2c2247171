"""`kiln compile --float-intermediates` (src/lower/FloatIntermediates.h): a float16 chain fused into
one kernel (LayerNorm then erf-GELU, as an exported model writes them) keeps its intermediates in
float32, so the generated CUDA has no rounding to float16 that is widened again at once; without the
flag every op rounds. The erf of that chain takes a shorter formula (no erff call). Sources only (`--no-build`). Needs the kiln binary and the onnx package."""
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
    ]
    inits = [
        helper.make_tensor("gamma", h, [256], [1.0] * 256),
        helper.make_tensor("beta", h, [256], [0.0] * 256),
        helper.make_tensor("sqrt2", h, [], [1.4142]),
        helper.make_tensor("one", h, [], [1.0]),
        helper.make_tensor("half", h, [], [0.5]),
    ]
    graph = helper.make_graph(nodes, "layernorm_gelu", [helper.make_tensor_value_info("x", h, [64, 256])],
                              [helper.make_tensor_value_info("y", h, [64, 256])], inits)
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
