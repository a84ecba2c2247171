"""`kiln inspect --kernels`: the kernels of the whole graph under the default GPU schedule, each
with the path chosen for it and why (issue 8: a contraction template, small-M or tensor-core).
Needs the kiln binary (see gemma_model.kiln_binary)."""
import subprocess

import onnx
import pytest
from onnx import TensorProto, helper

from gemma_model import kiln_binary


def gated_mlp(path, dtype=TensorProto.FLOAT16, unsupported=False):
    x = helper.make_tensor_value_info("x", dtype, ["tokens", 64])
    ins = [x] + [helper.make_tensor_value_info(n, dtype, s) for n, s in (("wg", [64, 256]), ("wu", [64, 256]), ("wd", [256, 64]))]
    nodes = [helper.make_node("MatMul", ["x", "wg"], ["g"], name="gate"),
             helper.make_node("MatMul", ["x", "wu"], ["u"], name="up"),
             helper.make_node("Tanh", ["g"], ["a"], name="act"), helper.make_node("Mul", ["a", "u"], ["p"], name="prod"),
             helper.make_node("MatMul", ["p", "wd"], ["y"], name="down")]
    if unsupported:
        nodes[2] = helper.make_node("CustomAct", ["g"], ["a"], name="act", domain="example.custom")
    g = helper.make_graph(nodes, "mlp", ins, [helper.make_tensor_value_info("y", dtype, ["tokens", 64])])
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("example.custom", 1)] if unsupported else [])
    onnx.save(helper.make_model(g, opset_imports=opsets), str(path))


def inspect(path):
    binary = kiln_binary()
    if binary is None:
        pytest.skip("no kiln binary (build kiln, or set KILN_BINARY)")
    return subprocess.run([str(binary), "inspect", str(path), "--kernels"], capture_output=True, text=True, check=True).stdout


def test_kernels_name_the_template_path_and_why(tmp_path):
    gated_mlp(tmp_path / "mlp.onnx")
    out = inspect(tmp_path / "mlp.onnx")
    kernels = out[out.index("kernels (default GPU schedule, whole graph):"):].splitlines()[1:]
    assert len(kernels) == 2, out
    assert "dual contraction" in kernels[0] and "epilogue:" in kernels[0], out
    assert "M <= 16: the small-M kernel" in kernels[0], out
    assert "16 warps per block" in kernels[0], out  # N = 256: more warps split the long K
    assert "M <= 256: tensor-core GEMM (mma.sync), 64x128x32 tiles" in kernels[0], out
    # above M = 256: the Hopper kernel on sm_90 (dual products 128x128), the mma.sync tile elsewhere
    assert "(dual products 64x128x64 tiles (5 TMA stages, ping-pong" in kernels[0], out
    assert "when K >= 2048 and their waves are no more work than the narrow tile's, else 128x128x64 tiles (6 TMA stages, cooperative" in kernels[1], out
    assert "above: on sm_90 Hopper GEMM (wgmma + TMA), 128x256x64 tiles" in kernels[1], out
    assert "tensor-core GEMM (mma.sync), 256x128x64 tiles" in kernels[1], out


def test_float32_contractions_say_they_are_tiled(tmp_path):
    gated_mlp(tmp_path / "mlp32.onnx", TensorProto.FLOAT)
    out = inspect(tmp_path / "mlp32.onnx")
    assert "contraction tiled through shared memory" in out, out
    assert "contraction template" not in out, out


def test_unsupported_nodes_leave_no_kernel_list(tmp_path):
    # The custom op and the two nodes after it (their inputs have no type) are not supported.
    gated_mlp(tmp_path / "bad.onnx", unsupported=True)
    out = inspect(tmp_path / "bad.onnx")
    assert "kernels: not shown, 3 node(s) are not supported" in out, out
