#!/usr/bin/env python3
"""Writes the small example models in examples/ (committed, so tests need no Python).

  gemma_mlp.onnx  a Gemma-style MLP block with symbolic `batch` and `seq`:
                  LayerNormalization -> MatMul gate/up (64 -> 256) -> tanh-GELU(gate) * up
                  -> MatMul down (256 -> 64) -> residual Add -> y, and Softmax(y) -> probs
  small_cnn.onnx  Conv -> BatchNormalization -> Relu -> MaxPool -> Conv -> Relu
                  -> GlobalAveragePool -> Flatten -> Gemm (10 classes), symbolic `batch`

Run: python3 examples/make_examples.py [OUT_DIR]   (needs the `onnx` and `numpy` packages)
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17  # LayerNormalization needs 17


def weight(rng, name, shape, scale):
    return numpy_helper.from_array((rng.standard_normal(shape) * scale).astype(np.float32), name)


def const(name, value):
    return numpy_helper.from_array(np.array(value, dtype=np.float32), name)


def gemma_mlp(rng, hidden=64, intermediate=256):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", hidden])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", hidden])
    probs = helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["batch", "seq", hidden])
    inits = [
        weight(rng, "ln_scale", [hidden], 0.1),
        weight(rng, "ln_bias", [hidden], 0.1),
        weight(rng, "w_gate", [hidden, intermediate], 1 / math.sqrt(hidden)),
        weight(rng, "w_up", [hidden, intermediate], 1 / math.sqrt(hidden)),
        weight(rng, "w_down", [intermediate, hidden], 1 / math.sqrt(intermediate)),
        const("half", 0.5),
        const("one", 1.0),
        const("three", 3.0),
        const("gelu_c", 0.044715),
        const("sqrt_2_over_pi", math.sqrt(2 / math.pi)),
    ]
    n = helper.make_node
    nodes = [
        n("LayerNormalization", ["x", "ln_scale", "ln_bias"], ["xn"], name="input_layernorm", axis=-1,
          epsilon=1e-6),
        n("MatMul", ["xn", "w_gate"], ["gate"], name="gate_proj"),
        n("MatMul", ["xn", "w_up"], ["up"], name="up_proj"),
        # gelu_tanh(g) = 0.5 * g * (1 + tanh(sqrt(2/pi) * (g + 0.044715 * g^3)))
        n("Pow", ["gate", "three"], ["g3"], name="gelu_cube"),
        n("Mul", ["g3", "gelu_c"], ["g3c"], name="gelu_scale_cube"),
        n("Add", ["gate", "g3c"], ["inner"], name="gelu_inner"),
        n("Mul", ["inner", "sqrt_2_over_pi"], ["inner_s"], name="gelu_scale_inner"),
        n("Tanh", ["inner_s"], ["t"], name="gelu_tanh"),
        n("Add", ["t", "one"], ["t1"], name="gelu_one_plus"),
        n("Mul", ["gate", "t1"], ["gt"], name="gelu_mul"),
        n("Mul", ["gt", "half"], ["gelu"], name="gelu_half"),
        n("Mul", ["gelu", "up"], ["act"], name="gate_times_up"),
        n("MatMul", ["act", "w_down"], ["down"], name="down_proj"),
        n("Add", ["x", "down"], ["y"], name="residual"),
        n("Softmax", ["y"], ["probs"], name="softmax", axis=-1),
    ]
    graph = helper.make_graph(nodes, "gemma_mlp", [x], [y, probs], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="kiln examples/make_examples.py")


def small_cnn(rng, classes=10):
    x = helper.make_tensor_value_info("image", TensorProto.FLOAT, ["batch", 3, 32, 32])
    logits = helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["batch", classes])
    inits = [
        weight(rng, "conv1_w", [16, 3, 3, 3], 0.2),
        weight(rng, "conv1_b", [16], 0.1),
        weight(rng, "bn1_scale", [16], 0.1),
        weight(rng, "bn1_bias", [16], 0.1),
        weight(rng, "bn1_mean", [16], 0.1),
        numpy_helper.from_array((rng.random(16) + 0.5).astype(np.float32), "bn1_var"),
        weight(rng, "conv2_w", [32, 16, 3, 3], 0.1),
        weight(rng, "conv2_b", [32], 0.1),
        weight(rng, "fc_w", [classes, 32], 0.2),
        weight(rng, "fc_b", [classes], 0.1),
    ]
    n = helper.make_node
    nodes = [
        n("Conv", ["image", "conv1_w", "conv1_b"], ["c1"], name="conv1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("BatchNormalization", ["c1", "bn1_scale", "bn1_bias", "bn1_mean", "bn1_var"], ["b1"], name="bn1",
          epsilon=1e-5),
        n("Relu", ["b1"], ["r1"], name="relu1"),
        n("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        n("Conv", ["p1", "conv2_w", "conv2_b"], ["c2"], name="conv2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        n("Relu", ["c2"], ["r2"], name="relu2"),
        n("GlobalAveragePool", ["r2"], ["gap"], name="global_pool"),
        n("Flatten", ["gap"], ["flat"], name="flatten", axis=1),
        n("Gemm", ["flat", "fc_w", "fc_b"], ["logits"], name="classifier", transB=1),
    ]
    graph = helper.make_graph(nodes, "small_cnn", [x], [logits], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                             producer_name="kiln examples/make_examples.py")


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
    os.makedirs(out_dir, exist_ok=True)
    rng = np.random.default_rng(2026)
    for name, model in (("gemma_mlp", gemma_mlp(rng)), ("small_cnn", small_cnn(rng))):
        model.ir_version = 8
        onnx.checker.check_model(model, full_check=True)
        path = os.path.join(out_dir, name + ".onnx")
        onnx.save(model, path)
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")


if __name__ == "__main__":
    main()
