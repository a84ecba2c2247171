"""A Model Optimizer-style NVFP4 ONNX model built with the onnx package's own FLOAT4E2M1 and
FLOAT8E4M3FN tensors (DequantizeLinear(E4M3 scales, scale_2) -> DequantizeLinear(FP4 weight,
axis 1, block 16) -> Transpose -> MatMul), run through `kiln quantize` (which rewrites it to
kiln.QuantLinear with the stored bytes) and `kiln test-onnx` against onnx's ReferenceEvaluator on
the original model: kiln's reading of the bytes must give ONNX's semantics. Skips without onnx >=
1.18 (FLOAT4E2M1) or a kiln binary. The test model uses opset 21 for kiln's importer (opsets up to
21); the reference runs the same graph at opset 23, where FLOAT4E2M1 dequantization is defined.
Run: python3 -m pytest tests/quant/test_modelopt_onnx.py (KILN_BINARY=build/tools/kiln)."""
import os
import pathlib
import subprocess

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
if not hasattr(onnx.TensorProto, "FLOAT4E2M1"):
    pytest.skip(f"onnx {onnx.__version__} has no FLOAT4E2M1 (needs >= 1.18)", allow_module_level=True)
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[2]
E2M1 = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6, -0.0, -0.5, -1, -1.5, -2, -3, -4, -6], np.float32)


def kiln_binary():
    env = os.environ.get("KILN_BINARY")
    if env:
        return env
    found = [p for p in ROOT.glob("build*/tools/kiln") if p.is_file()]
    return str(max(found, key=lambda p: p.stat().st_mtime)) if found else None


def modelopt_model(n, k, opset, rng):
    w = E2M1[rng.integers(0, 16, (n, k))]
    scales = rng.choice(np.array([0.25, 0.5, 0.75, 1.0, 1.5, 2.0], np.float32), (n, k // 16))
    inits = [helper.make_tensor("w_fp4", TensorProto.FLOAT4E2M1, [n, k], w.flatten().tolist()),
             helper.make_tensor("w_scale", TensorProto.FLOAT8E4M3FN, [n, k // 16], scales.flatten().tolist()),
             numpy_helper.from_array(np.array(0.0125, np.float32), "w_scale_2")]
    nodes = [helper.make_node("DequantizeLinear", ["w_scale", "w_scale_2"], ["s"], name="dq_scale"),
             helper.make_node("DequantizeLinear", ["w_fp4", "s"], ["w_dq"], name="dq_weight", axis=1, block_size=16),
             helper.make_node("Transpose", ["w_dq"], ["w_t"], perm=[1, 0]),
             helper.make_node("MatMul", ["x", "w_t"], ["y"], name="proj")]
    graph = helper.make_graph(nodes, "modelopt_nvfp4", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, n])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def test_kiln_quantize_keeps_modelopt_nvfp4_weights_with_onnx_semantics(tmp_path):
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    rng = np.random.default_rng(0)
    n, k = 48, 128
    ref_model = modelopt_model(n, k, 23, np.random.default_rng(1))
    kiln_model = modelopt_model(n, k, 21, np.random.default_rng(1))
    x = rng.standard_normal((2, k)).astype(np.float32)
    y = ReferenceEvaluator(ref_model).run(None, {"x": x})[0]
    onnx.save(kiln_model, tmp_path / "modelopt.onnx")
    case = tmp_path / "case"
    (case / "test_data_set_0").mkdir(parents=True)
    q = subprocess.run([binary, "quantize", str(tmp_path / "modelopt.onnx"), "-o", str(case / "model.onnx")],
                       capture_output=True, text=True)
    assert q.returncode == 0, q.stdout + q.stderr
    assert "1 layers already in NVFP4" in q.stdout, q.stdout
    rewritten = onnx.load(case / "model.onnx")
    assert [nd.op_type for nd in rewritten.graph.node] == ["QuantLinear"]
    (case / "test_data_set_0" / "input_0.pb").write_bytes(numpy_helper.from_array(x, "x").SerializeToString())
    (case / "test_data_set_0" / "output_0.pb").write_bytes(numpy_helper.from_array(y, "y").SerializeToString())
    t = subprocess.run([binary, "test-onnx", str(case)], capture_output=True, text=True)
    assert t.stdout.strip().splitlines()[-1] == "1 passed, 0 failed, 0 skipped", t.stdout + t.stderr
