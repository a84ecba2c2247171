#!/usr/bin/env python3
"""Writes ONNX backend-test folders (model.onnx, test_data_set_0/) whose packed 4- and 2-bit tensors
are large enough for many blocks of GPU threads to write neighbouring elements of the same bytes
and 32-bit words at once: the race check of generated CUDA's packed stores (kiln_packed.h). The
tensors have odd element counts (the last byte half used, rows straddling bytes); Transpose writes
them in a scattered order. Expected outputs come from onnx.reference.

Usage: write_large_cases.py DIR   then   kiln test-onnx DIR/* [--backend cuda]
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator


def write_case(root, name, nodes, inputs, outputs, feeds, opset=25):
    graph = helper.make_graph(nodes, name, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 11
    onnx.checker.check_model(model)
    results = ReferenceEvaluator(model).run(None, feeds)
    case = os.path.join(root, name)
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(case, "model.onnx"))
    for k, (value, array) in enumerate(zip(inputs, feeds.values())):
        tensor = numpy_helper.from_array(array, value.name)
        tensor.data_type = value.type.tensor_type.elem_type
        with open(os.path.join(data, f"input_{k}.pb"), "wb") as f:
            f.write(tensor.SerializeToString())
    for k, (value, array) in enumerate(zip(outputs, results)):
        tensor = numpy_helper.from_array(np.asarray(array), value.name)
        with open(os.path.join(data, f"output_{k}.pb"), "wb") as f:
            f.write(tensor.SerializeToString())


def main():
    root = sys.argv[1]
    rng = np.random.default_rng(9)
    rows, cols = 511, 257  # 131327 elements: odd, rows straddle bytes
    x = (rng.standard_normal((rows, cols)) * 6).astype(np.float32)
    info = helper.make_tensor_value_info
    for to, label in [(TensorProto.INT4, "int4"), (TensorProto.UINT4, "uint4"), (TensorProto.INT2, "int2"),
                      (TensorProto.UINT2, "uint2"), (TensorProto.FLOAT4E2M1, "float4e2m1")]:
        write_case(root, f"test_large_cast_FLOAT_to_{label.upper()}",
                   [helper.make_node("Cast", ["x"], ["y"], to=to)],
                   [info("x", TensorProto.FLOAT, [rows, cols])], [info("y", to, [rows, cols])], {"x": x})
        # QuantizeLinear then a Transpose of the packed result (packed to packed, scattered writes)
        # then DequantizeLinear: every packed path in one model.
        zero = np.array(1 if label.startswith("u") else 0).astype(
            onnx.helper.tensor_dtype_to_np_dtype(to)) if to != TensorProto.FLOAT4E2M1 else None
        nodes = [helper.make_node("QuantizeLinear", ["x", "s"] + (["z"] if zero is not None else []), ["q"],
                                  **({} if zero is not None else {"output_dtype": to})),
                 helper.make_node("Transpose", ["q"], ["qt"], perm=[1, 0]),
                 helper.make_node("DequantizeLinear", ["qt", "s"] + (["z"] if zero is not None else []), ["y"])]
        inputs = [info("x", TensorProto.FLOAT, [rows, cols]), info("s", TensorProto.FLOAT, [])]
        feeds = {"x": x, "s": np.array(0.75, dtype=np.float32)}
        if zero is not None:
            inputs.append(info("z", to, []))
            feeds["z"] = zero
        write_case(root, f"test_large_quantize_transpose_dequantize_{label}", nodes, inputs,
                   [info("qt", to, [cols, rows]), info("y", TensorProto.FLOAT, [cols, rows])], feeds)


if __name__ == "__main__":
    main()
