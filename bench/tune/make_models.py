#!/usr/bin/env python3
"""The models of issue 12's goals, written with the onnx package (opset 17):
  layernorm_gelu_<R>x<C>_<dtype>.onnx  LayerNormalization (last axis) then Gelu (tanh-free erf form)
  softmax_<R>x<C>_<dtype>.onnx         Softmax over the last axis
Usage: make_models.py OUT_DIR [--shapes 8192x4096,1024x32000] [--dtypes float16] [--ops layernorm_gelu,softmax]
"""
import argparse
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

DTYPES = {"float16": (TensorProto.FLOAT16, np.float16), "float32": (TensorProto.FLOAT, np.float32),
          "bfloat16": (TensorProto.BFLOAT16, None)}


def layernorm_gelu(rows, cols, dtype):
    elem, np_type = DTYPES[dtype]
    rng = np.random.default_rng(0)
    inits = []
    if np_type is not None:
        inits = [numpy_helper.from_array((1 + 0.1 * rng.standard_normal(cols)).astype(np_type), "gamma"),
                 numpy_helper.from_array((0.1 * rng.standard_normal(cols)).astype(np_type), "beta")]
    else:
        inits = [helper.make_tensor("gamma", elem, [cols], [1.0] * cols), helper.make_tensor("beta", elem, [cols], [0.0] * cols)]
    # Gelu(x) = 0.5 x (1 + erf(x / sqrt 2)), as ONNX ops (Gelu itself is opset 20).
    c = lambda name, v: helper.make_tensor(name, elem, [], [v])
    nodes = [
        helper.make_node("LayerNormalization", ["x", "gamma", "beta"], ["ln"], axis=-1, epsilon=1e-5, name="ln"),
        helper.make_node("Div", ["ln", "sqrt2"], ["d"], name="gelu_div"),
        helper.make_node("Erf", ["d"], ["e"], name="gelu_erf"),
        helper.make_node("Add", ["e", "one"], ["a"], name="gelu_add"),
        helper.make_node("Mul", ["ln", "a"], ["m"], name="gelu_mul"),
        helper.make_node("Mul", ["m", "half"], ["y"], name="gelu_half"),
    ]
    inits += [c("sqrt2", 2 ** 0.5), c("one", 1.0), c("half", 0.5)]
    graph = helper.make_graph(nodes, "layernorm_gelu", [helper.make_tensor_value_info("x", elem, [rows, cols])],
                              [helper.make_tensor_value_info("y", elem, [rows, cols])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def softmax(rows, cols, dtype):
    elem, _ = DTYPES[dtype]
    graph = helper.make_graph([helper.make_node("Softmax", ["x"], ["y"], axis=-1, name="softmax")], "softmax",
                              [helper.make_tensor_value_info("x", elem, [rows, cols])],
                              [helper.make_tensor_value_info("y", elem, [rows, cols])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def main():
    p = argparse.ArgumentParser()
    p.add_argument("out")
    p.add_argument("--shapes", default="8192x4096,1024x32000")
    p.add_argument("--dtypes", default="float16")
    p.add_argument("--ops", default="layernorm_gelu,softmax")
    a = p.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for op in a.ops.split(","):
        for shape in a.shapes.split(","):
            rows, cols = (int(v) for v in shape.split("x"))
            for dtype in a.dtypes.split(","):
                model = {"layernorm_gelu": layernorm_gelu, "softmax": softmax}[op](rows, cols, dtype)
                path = os.path.join(a.out, f"{op}_{rows}x{cols}_{dtype}.onnx")
                onnx.save(model, path)
                print(path)


if __name__ == "__main__":
    main()
