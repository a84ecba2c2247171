"""Edge shapes of kiln.QuantLinear through kernels/quant/ in generated code, on the GPU (issue 8,
"correctness before speed"): per format and activation dtype one model of three layers
y_i = tanh(x_i · dequant(W_i)ᵀ + b_i) (the Add and Tanh fold into the kernels' epilogue), built
here, `kiln quantize`d, `kiln compile`d (function mode), each output NaN-poisoned, then checked
against torch computing the same from the quantized model's own bytes (E2M1 x E4M3 x tensor
scale for NVFP4, (q - zero) x scale for INT4, in float32). Shapes: N x K = 256 x 1024 (GEMV variant
8 at M = 1), 128 x 384 (variant 5 at M = 1), 48 x 256 (N off the GEMM's 128 rows: GEMV at every M);
M = 1, 2, 9, 16 (GEMV), 17, 65, 200 (GEMM; split-K where the grid is small).

    python3 bench/quant_route/edge_check.py --kiln PATH/TO/kiln [--work DIR] [--arch sm_90]
"""
import argparse
import importlib.util
import json
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("core_bench", ROOT / "bench" / "core" / "bench.py")
core = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(core)

SHAPES = [(256, 1024), (128, 384), (48, 256)]  # (N, K)
TOKENS = [1, 2, 9, 16, 17, 65, 200]
CASES = [  # (name, format, activation dtype, kiln quantize arguments)
    ("nvfp4_fp16", "nvfp4", torch.float16, []),
    ("nvfp4_bf16", "nvfp4", torch.bfloat16, []),
    ("int4_fp16_g128", "int4", torch.float16, ["--scale-dtype", "fp16", "--group", "128"]),
    ("int4_bf16_g32", "int4", torch.bfloat16, ["--scale-dtype", "bf16", "--group", "32"]),
]
ONNX_TYPE = {torch.float16: TensorProto.FLOAT16, torch.bfloat16: TensorProto.BFLOAT16}
RAW = {TensorProto.UINT8: torch.uint8, TensorProto.FLOAT: torch.float32, TensorProto.FLOAT16: torch.float16,
       TensorProto.BFLOAT16: torch.bfloat16}
E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def float_model(path, dtype):
    nodes, inputs, outputs, inits = [], [], [], []
    rng = np.random.default_rng(1)
    for i, (n, k) in enumerate(SHAPES):
        inputs += [helper.make_tensor_value_info("x%d" % i, ONNX_TYPE[dtype], ["m", k]),
                   helper.make_tensor_value_info("b%d" % i, ONNX_TYPE[dtype], [n])]
        outputs.append(helper.make_tensor_value_info("y%d" % i, ONNX_TYPE[dtype], ["m", n]))
        w = (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)
        if dtype == torch.float16:
            raw = w.astype(np.float16).tobytes()
        else:  # bfloat16 bits, rounded to nearest even
            u = w.view(np.uint32).astype(np.uint64)
            raw = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16).tobytes()
        inits.append(helper.make_tensor("w%d" % i, ONNX_TYPE[dtype], [k, n], raw, raw=True))
        nodes += [helper.make_node("MatMul", ["x%d" % i, "w%d" % i], ["mm%d" % i], name="linear%d" % i),
                  helper.make_node("Add", ["mm%d" % i, "b%d" % i], ["a%d" % i]),
                  helper.make_node("Tanh", ["a%d" % i], ["y%d" % i])]
    graph = helper.make_graph(nodes, "edges", inputs, outputs, inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)


def initializer(t):
    """An initializer as a CUDA tensor of its own dtype (raw bytes, so bfloat16 needs no numpy type)."""
    if t.data_type not in RAW:
        raise ValueError("initializer %s has data type %d" % (t.name, t.data_type))
    if t.raw_data:
        data = torch.frombuffer(bytearray(t.raw_data), dtype=RAW[t.data_type]).clone()
    else:
        data = torch.from_numpy(onnx.numpy_helper.to_array(t).copy())
    return data.reshape(tuple(t.dims)).cuda()


def dequantize(fmt, q4, scales, extra, group):
    lo, hi = (q4 & 0xF).long(), (q4 >> 4).long()
    codes = torch.stack([lo, hi], dim=-1).reshape(q4.shape[0], -1)
    if fmt == "nvfp4":
        s = scales.view(torch.float8_e4m3fn).float().repeat_interleave(16, dim=1)
        return E2M1.to(q4.device)[codes] * s * extra.float().reshape(-1)[0]
    s = scales.float().repeat_interleave(group, dim=1)
    z = extra.float().repeat_interleave(group, dim=1)
    return (codes.float() - z) * s


def workspace_bytes(signature, symbols):
    total = 0
    for b in signature.get("workspace", {}).get("buffers", []):
        expr = b["elements"].replace("select(", "_select(")
        elements = eval(expr, {"_select": lambda c, a, b: a if c else b, "min": min, "max": max}, dict(symbols))  # noqa: S307
        total += (int(elements) * {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1}.get(b["dtype"], 8) + 255) // 256 * 256
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--work", default="/tmp/kiln-quant-edges")
    ap.add_argument("--arch", default="sm_90")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    jobs = {}
    for name, fmt, dtype, qargs in CASES:
        float_model(str(work / (name + ".onnx")), dtype)
        subprocess.run([args.kiln, "quantize", str(work / (name + ".onnx")), "-o", str(work / (name + "_q.onnx")),
                        "--format", fmt] + qargs, check=True, capture_output=True)
        subprocess.run(["rm", "-rf", str(work / name)], check=True)
        log = open(work / (name + ".log"), "w")
        jobs[name] = subprocess.Popen([args.kiln, "compile", str(work / (name + "_q.onnx")), "-o", str(work / name),
                                       "--target", args.arch], stdout=log, stderr=subprocess.STDOUT)
    failures = 0
    for name, fmt, dtype, qargs in CASES:
        if jobs[name].wait() != 0:
            print("%s: kiln compile failed:\n%s" % (name, (work / (name + ".log")).read_text()[-2000:]))
            failures += 1
            continue
        out = work / name
        source = "".join(p.read_text() for p in out.glob("*.cu"))
        routed = source.count("launch_linear_epilogue<")
        sig_path = [p for p in out.glob("*.json")][0]
        signature = json.load(open(sig_path))
        fn = core.KilnFunction(str([p for p in out.glob("lib*.so")][0]), sig_path.stem)
        model = onnx.load(str(work / (name + "_q.onnx")))
        inits = {t.name: t for t in model.graph.initializer}
        layers = [n for n in model.graph.node if n.op_type == "QuantLinear"]
        group = next(a.i for a in layers[0].attribute if a.name == "block_size")
        weights = []
        for i, node in enumerate(layers):
            q4, scales, extra = (initializer(inits[node.input[j]]) for j in (1, 2, 3))
            weights.append(dequantize(fmt, q4, scales, extra, group))
        print("%s: %d of %d layers on the 4-bit kernels" % (name, routed, len(SHAPES)))
        if routed != len(SHAPES):
            failures += 1
        limit = 1e-2 if dtype == torch.float16 else 3e-2
        for m in TOKENS:
            torch.manual_seed(m)
            xs = [torch.randn(m, k, device="cuda", dtype=dtype) for (n, k) in SHAPES]
            bs = [torch.randn(n, device="cuda", dtype=dtype) for (n, k) in SHAPES]
            ys = [torch.full((m, n), float("nan"), device="cuda", dtype=dtype) for (n, k) in SHAPES]
            named = {"x%d" % i: xs[i] for i in range(3)} | {"b%d" % i: bs[i] for i in range(3)}
            tensors, outs = [], list(ys)
            for p in signature["params"]:
                if p["is_output"]:
                    tensors.append(outs.pop(0))
                elif p["name"] in named:
                    tensors.append(named[p["name"]])
                else:
                    tensors.append(initializer(inits[p["name"]]))
            fn.workspace = torch.empty(max(1, workspace_bytes(signature, {"m": m})), dtype=torch.uint8, device="cuda")
            fn.prepare(tensors)
            fn()
            torch.cuda.synchronize()
            row = []
            for i, (n, k) in enumerate(SHAPES):
                # Reference bias in the activation dtype, as the model adds it.
                ref = torch.tanh(xs[i].float() @ weights[i].t() + bs[i].float())
                bad = torch.isnan(ys[i]).any().item()
                err = (torch.linalg.vector_norm(ys[i].double() - ref.double()) / torch.linalg.vector_norm(ref.double())).item()
                ok = not bad and err <= limit
                failures += 0 if ok else 1
                row.append("%dx%d %s %.1e" % (n, k, "ok" if ok else ("FAIL NaN" if bad else "FAIL"), err))
            print("  M=%-4d %s" % (m, " | ".join(row)), flush=True)
    print("edge check: %s" % ("all ok" if failures == 0 else "%d failures" % failures))
    sys.exit(0 if failures == 0 else 1)


if __name__ == "__main__":
    main()
