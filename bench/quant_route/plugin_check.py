"""A `kiln plugins --op-types QuantLinear` package's kernel on the GPU (issue 8): its kernel library
built alone with nvcc (as bench/plugins/bench_plugins.py does), called through the kernel contract
(bench/core's ctypes KilnFunction) with the quantized model's own weights in the dtype the plugin
passes them (a float16 plugin passes the NVFP4 tensor scale as float16), checked against the layer
dequantized in fp64-exact float32 torch (E2M1 x E4M3 x tensor scale), then timed against the fp16
layer under torch eager (cuBLAS) with CUDA events.

    python3 bench/quant_route/plugin_check.py --kiln PATH/TO/kiln --work DIR [--arch 90]
"""
import argparse
import ctypes
import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

ROOT = pathlib.Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("core_bench", ROOT / "bench" / "core" / "bench.py")
core = importlib.util.module_from_spec(spec)
spec.loader.exec_module(core)

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def dequantize(q4, scales, tensor_scale):
    """NVFP4 [N, K/2] (element 2j in the low nibble) -> float32 [N, K]."""
    lo, hi = (q4 & 0xF).long(), (q4 >> 4).long()
    codes = torch.stack([lo, hi], dim=-1).reshape(q4.shape[0], -1)
    e2m1 = E2M1.to(q4.device)[codes]
    s = scales.view(torch.float8_e4m3fn).float().repeat_interleave(16, dim=1)
    return e2m1 * s * float(tensor_scale)


def time_us(fn, iters=50):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) * 1000.0 / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--work", default="/tmp/kiln-quant-plugin")
    ap.add_argument("--arch", default="90")
    args = ap.parse_args()
    work = pathlib.Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    # 1024 x 2048: `kiln plugins` computes the package's expected outputs on the CPU backend (the
    # interpreter), which for a 16384 x 2048 layer took longer than a device step allows.
    k, n = 2048, 1024
    w = (torch.randn(k, n, dtype=torch.float32) / k ** 0.5).half()
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"], name="fc")], "fc",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", "seq", k])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["batch", "seq", n])],
                              [numpy_helper.from_array(w.numpy(), "w")])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), str(work / "fc.onnx"))
    subprocess.run([args.kiln, "quantize", str(work / "fc.onnx"), "-o", str(work / "fc_q.onnx"), "--format", "nvfp4"],
                   check=True, capture_output=True)
    package = work / "pkg"
    subprocess.run(["rm", "-rf", str(package)], check=True)
    run = subprocess.run([args.kiln, "plugins", str(work / "fc_q.onnx"), "-o", str(package), "--op-types", "QuantLinear",
                          "--dtypes", "fp16", "--target", "sm_" + args.arch, "--no-build"], capture_output=True, text=True)
    if run.returncode != 0:
        sys.exit("kiln plugins failed:\n" + run.stdout + run.stderr)
    report = json.load(open(package / "report.json"))
    plugin = report["plugins"][0] if "plugins" in report else report
    kernels = (package / plugin["kernel_sources"][0]).read_text()
    paths = [line.strip() for line in kernels.splitlines() if "path:" in line or "schedule:" in line]
    print("plugin %s: %s" % (plugin["name"], "; ".join(p[:160] for p in paths[:3])))
    include = package / plugin["name"] / "common" / "include"
    library = work / ("lib%s_kernels.so" % plugin["name"])
    cmd = ["nvcc", "-O3", "-std=c++20", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared", "--expt-relaxed-constexpr",
           "-gencode=arch=compute_%s,code=sm_%s" % (args.arch, args.arch), "-I", str(include), "-o", str(library)]
    cmd += [str(package / s) for s in plugin["kernel_sources"]]
    build = subprocess.run(cmd, capture_output=True, text=True)
    if build.returncode != 0:
        sys.exit("building the kernel library failed:\n" + build.stderr[-3000:])
    fname = plugin["functions"][0]
    lib = ctypes.CDLL(str(library))
    name = fname if hasattr(lib, "kiln_" + fname) else fname[len("kiln_"):]
    fn = core.KilnFunction(str(library), name)

    init = {t.name: numpy_helper.to_array(t) for t in onnx.load(str(work / "fc_q.onnx")).graph.initializer}
    q4 = torch.from_numpy(init[plugin["inputs"][1]].copy()).cuda()
    scales = torch.from_numpy(init[plugin["inputs"][2]].copy()).cuda()
    ts32 = float(init[plugin["inputs"][3]].reshape(-1)[0])
    ts16 = torch.tensor([ts32], dtype=torch.float16, device="cuda")
    weight = dequantize(q4, scales, float(ts16.float()))  # the fp16 tensor scale the plugin passes
    w16 = w.cuda()
    print("| M | check | plugin kernel us | torch eager fp16 us | eager / kernel |")
    print("| ---: | --- | ---: | ---: | ---: |")
    ok = True
    for m in (1, 16, 816):
        x = torch.randn(1, m, k, device="cuda", dtype=torch.float16)
        y = torch.full((1, m, n), float("nan"), device="cuda", dtype=torch.float16)
        fn.prepare([x, q4, scales, ts16, y])
        fn()
        torch.cuda.synchronize()
        ref = x.float().reshape(m, k) @ weight.t()
        err = (torch.linalg.vector_norm(y.reshape(m, n).double() - ref.double()) / torch.linalg.vector_norm(ref.double())).item()
        good = not torch.isnan(y).any().item() and err < 1e-2
        ok = ok and good
        kus = time_us(fn) if good else float("nan")
        yt = torch.empty(m, n, device="cuda", dtype=torch.float16)
        tus = time_us(lambda: torch.matmul(x.reshape(m, k), w16, out=yt))
        print("| %d | %s %.1e | %.1f | %.1f | %.2fx |" % (m, "ok" if good else "FAIL", err, kus, tus, tus / kus))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
