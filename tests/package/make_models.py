"""Small models for the kiln plugins tests: a Gemma-style MLP and a small CNN, with symbolic batch
(and sequence) dims. Usage: python3 make_models.py OUT_DIR"""
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp(hidden=64, inter=256):
    rng = np.random.default_rng(0)
    w = lambda *s: numpy_helper.from_array((rng.standard_normal(s) / np.sqrt(s[0])).astype(np.float32))
    inits = [w(hidden, inter), w(hidden, inter), w(inter, hidden)]
    for t, n in zip(inits, ["w_gate", "w_up", "w_down"]):
        t.name = n
    nodes = [
        helper.make_node("MatMul", ["x", "w_gate"], ["gate"], name="gate_proj"),
        helper.make_node("Gelu", ["gate"], ["gate_act"], name="act", approximate="tanh", domain=""),
        helper.make_node("MatMul", ["x", "w_up"], ["up"], name="up_proj"),
        helper.make_node("Mul", ["gate_act", "up"], ["h"], name="mul"),
        helper.make_node("MatMul", ["h", "w_down"], ["y"], name="down_proj"),
    ]
    g = helper.make_graph(nodes, "gemma_mlp",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)], ir_version=9)


def cnn():
    rng = np.random.default_rng(1)
    w1 = numpy_helper.from_array((rng.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w1")
    b1 = numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "b1")
    w2 = numpy_helper.from_array((rng.standard_normal((16, 8, 3, 3)) * 0.2).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Conv", ["img", "w1", "b1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["p1", "w2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"], name="relu2"),
        helper.make_node("GlobalAveragePool", ["r2"], ["gap"], name="gap"),
        helper.make_node("Flatten", ["gap"], ["feat"], name="flatten"),
        helper.make_node("Softmax", ["feat"], ["prob"], name="softmax", axis=-1),
    ]
    g = helper.make_graph(nodes, "small_cnn",
                          [helper.make_tensor_value_info("img", TensorProto.FLOAT, ["batch", 3, 16, 16])],
                          [helper.make_tensor_value_info("prob", TensorProto.FLOAT, ["batch", 16])], [w1, b1, w2])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "."
    for name, m in [("gemma_mlp", mlp()), ("small_cnn", cnn())]:
        onnx.checker.check_model(m, full_check=True)
        onnx.save(m, f"{out}/{name}.onnx")
