#!/usr/bin/env python3
"""Writes the installed onnx wheel's node test cases as backend test folders.

    python3 tests/conformance/onnx_wheel_cases.py OUT_DIR

Each case becomes OUT_DIR/<name>/model.onnx and OUT_DIR/<name>/test_data_set_<k>/input_<j>.pb,
output_<j>.pb: the layout of Debian's libonnx-testdata, so `kiln test-onnx OUT_DIR` runs them.
The cases come from onnx.backend.test.case.node.collect_testcases() (the same generator ONNX's
own `backend-test-tools generate-data` uses); nothing is fetched. Prints the wheel's version and
the number of cases written.
"""
import os
import sys
import warnings


def serialize(value, value_info):
    from onnx import TensorProto, numpy_helper

    t = value_info.type
    if t.HasField("map_type"):
        return numpy_helper.from_dict(value, value_info.name)
    if t.HasField("sequence_type"):
        return numpy_helper.from_list(value, value_info.name)
    if t.HasField("optional_type"):
        return numpy_helper.from_optional(value, value_info.name)
    if isinstance(value, TensorProto):
        return value
    return numpy_helper.from_array(value, value_info.name)


def write_case(case, out_dir):
    case_dir = os.path.join(out_dir, case.name)
    os.makedirs(case_dir, exist_ok=True)
    with open(os.path.join(case_dir, "model.onnx"), "wb") as f:
        f.write(case.model.SerializeToString())
    graph = case.model.graph
    for k, (inputs, outputs) in enumerate(case.data_sets):
        data_dir = os.path.join(case_dir, f"test_data_set_{k}")
        os.makedirs(data_dir, exist_ok=True)
        for kind, values, infos in (("input", inputs, graph.input), ("output", outputs, graph.output)):
            for j, value in enumerate(values):
                with open(os.path.join(data_dir, f"{kind}_{j}.pb"), "wb") as f:
                    f.write(serialize(value, infos[j]).SerializeToString())


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    warnings.simplefilter("ignore")  # the generators' own numpy overflow warnings
    import onnx
    from onnx.backend.test.case import node

    cases = [c for c in node.collect_testcases() if c.kind == "node"]
    for case in cases:
        write_case(case, out_dir)
    print(f"onnx {onnx.__version__}: {len(cases)} node cases written to {out_dir}")


if __name__ == "__main__":
    main()
