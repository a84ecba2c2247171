#!/usr/bin/env python3
"""kiln contraction benchmark (issue 8): generated code that calls the contraction templates
(kernels/gemm/), end to end through `kiln compile` and the kernel contract, against the peers a
user would pick, measured in the same run on the same GPU.

  1. ceilings: device copy bandwidth, and a read-only streaming kernel (CuPy) of the same bytes as
     a small-M layer's weight (the floor of a GEMV);
  2. Linear layers (MatMul x[M, K] @ W[K, N], fp16 and bf16, as PyTorch exports nn.Linear):
     N x K in {16384x2048, 2048x16384, 4096x4096}, M in {1, 16, 51, 816, 4096}, vs torch.matmul
     (cuBLAS); MatMul 4096^3 is the M = 4096, 4096x4096 row;
  3. models exported from PyTorch (torch.onnx.export, opset 17, dynamic batch/seq): a Pi0.5-sized
     Gemma MLP block (RMSNorm, gate/up 2048->16384, tanh-GELU(gate)*up, down, residual) at
     M = 1, 16, 816; a ViT block; a small CNN; and the MLP after `kiln quantize --format nvfp4`;
     kiln vs torch eager vs torch.compile.

Every kiln function is checked first (fresh random inputs, outputs poisoned with NaN, relative
error against an fp32 torch reference). Times are per call from CUDA-graph replay of 20
back-to-back calls (so no Python overhead on either side), median of 7 replays, weights larger
than L2 so DRAM is measured.

Usage: bench/contraction/bench.py --kiln PATH/TO/kiln [--out DIR] [--work DIR] [--only linear,mlp,...]
"""
import argparse
import importlib.util
import copy
import datetime
import json
import os
import subprocess
import sys
import time

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The kernel contract through ctypes, shared with the core benchmark.
KilnFunction = _load("kiln_core_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core",
                                                     "bench.py")).KilnFunction

ONNX_TYPE = {torch.float16: TensorProto.FLOAT16, torch.bfloat16: TensorProto.BFLOAT16}


# ---- timing ----------------------------------------------------------------------------------

def graph_time_us(fn, calls=20, replays=7):
    """Per-call time of `fn` from replaying a CUDA graph of `calls` back-to-back calls."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(calls):
            fn()
    graph.replay()
    torch.cuda.synchronize()
    times = []
    for _ in range(replays):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0 / calls)
    times.sort()
    return times[len(times) // 2]


def copy_bandwidth():
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    return 2 * src.numel() / (graph_time_us(lambda: dst.copy_(src), calls=5) * 1e-6) / 1e9


READ_KERNEL = r"""
extern "C" __global__ void stream_read(const uint4* __restrict__ p, long long n, unsigned* out) {
  unsigned acc = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const uint4 v = p[i];
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) out[0] = acc;  // keeps the loads; practically never stores
}
"""


def read_ceiling_us(nbytes):
    """Time of a kernel that only streams `nbytes` (16-byte loads), the floor of a GEMV."""
    import cupy
    kernel = cupy.RawKernel(READ_KERNEL, "stream_read")
    out = torch.zeros(1, dtype=torch.int32, device="cuda")
    n = nbytes // 16
    sms = torch.cuda.get_device_properties(0).multi_processor_count

    # Rotate over copies so L2 (50-60 MB) holds none of it.
    copies = max(1, (256 << 20) // nbytes)
    bufs = [torch.empty(nbytes, dtype=torch.uint8, device="cuda").random_() for _ in range(copies)]
    state = {"i": 0}

    def run_rotating():
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        b = bufs[state["i"] % copies]
        state["i"] += 1
        kernel((sms * 4,), (512,), (b.data_ptr(), np.int64(n), out.data_ptr()), stream=stream)
    return graph_time_us(run_rotating, calls=max(20, copies))


# ---- kiln --------------------------------------------------------------------------------------

def kiln_compile(kiln, model, out_dir, arch, extra=()):
    """$KILN_COMPILE_FLAGS (space-separated) are added to every kiln compile (e.g. --conv-wgmma)."""
    log = out_dir + ".log"
    flags = os.environ.get("KILN_COMPILE_FLAGS", "").split()
    with open(log, "w") as f:
        p = subprocess.Popen([kiln, "compile", model, "-o", out_dir, "--target", arch, *extra, *flags], stdout=f,
                             stderr=subprocess.STDOUT)
    return p, log


def constants_of(model_path):
    """Initializers and Constant-node outputs of a model by name (kiln passes them as arguments)."""
    m = onnx.load(model_path)
    values = {t.name: numpy_helper.to_array(t) for t in m.graph.initializer}
    for node in m.graph.node:
        if node.op_type == "Constant":
            for a in node.attribute:
                if a.name == "value":
                    values[node.output[0]] = numpy_helper.to_array(a.t)
    return values


def np_to_torch(a):
    if a.dtype == np.float16:
        return torch.from_numpy(np.array(a, copy=True)).cuda()
    if a.dtype == np.uint16:  # bfloat16 as onnx's numpy_helper gives it
        return torch.from_numpy(a.astype(np.int16)).cuda().view(torch.bfloat16)
    if a.dtype.name == "bfloat16":  # ml_dtypes' bfloat16 (newer onnx)
        return torch.from_numpy(np.array(a, copy=True).view(np.int16)).cuda().view(torch.bfloat16)
    return torch.from_numpy(np.array(a, copy=True)).cuda()


class KilnModel:
    """A `kiln compile` library of one function called with graph inputs by name; the model's
    initializers and constants are uploaded once and passed in signature order."""

    def __init__(self, out_dir, model_path):
        name = [f for f in os.listdir(out_dir) if f.endswith(".json")][0][:-5]
        lib = [f for f in os.listdir(out_dir) if f.startswith("lib") and f.endswith(".so")][0]
        self.signature = json.load(open(os.path.join(out_dir, name + ".json")))
        self.fn = KilnFunction(os.path.join(out_dir, lib), name)
        consts = constants_of(model_path)
        self.params = self.signature["params"]
        self.constant = {p["name"]: np_to_torch(consts[p["name"]]) for p in self.params
                         if not p["is_output"] and p["name"] in consts}
        self.fn.workspace = None

    def bind(self, inputs, outputs):
        tensors, ins, outs = [], dict(inputs), list(outputs)
        for p in self.params:
            if p["is_output"]:
                tensors.append(outs.pop(0))
            elif p["name"] in self.constant:
                tensors.append(self.constant[p["name"]])
            else:
                tensors.append(ins[p["name"]])
        self.fn.workspace = torch.empty(max(1, self.workspace_bytes(tensors)), dtype=torch.uint8, device="cuda")
        self.fn.prepare(tensors)
        return self.fn

    def workspace_bytes(self, tensors):
        # Evaluate the signature's workspace formula with the symbols bound by the tensors.
        symbols = {}
        for p, t in zip(self.params, tensors):
            for dim, size in zip(p["shape"], t.shape):
                if isinstance(dim, str):
                    symbols[dim] = int(size)
        total = 0
        for b in self.signature.get("workspace", {}).get("buffers", []):
            expr = b["elements"].replace("select(", "_select(")
            elements = eval(expr, {"_select": lambda c, a, b: a if c else b}, dict(symbols))  # noqa: S307
            total += (int(elements) * {"float32": 4, "float16": 2, "bfloat16": 2, "uint8": 1}.get(b["dtype"], 8) + 255) // 256 * 256
        return total


def rel_err(out, ref):
    return (torch.linalg.vector_norm(out.double() - ref.double()) / torch.linalg.vector_norm(ref.double())).item()


def check_and_time(fn, out, ref, limit):
    out.fill_(float("nan"))
    fn()
    torch.cuda.synchronize()
    if torch.isnan(out).any():
        return "FAIL (%d unwritten/NaN)" % int(torch.isnan(out).sum()), None
    err = rel_err(out, ref)
    status = ("ok %.1e" % err) if err <= limit else ("FAIL %.1e" % err)
    return status, (graph_time_us(fn) if err <= limit else None)


# ---- Linear layers ----------------------------------------------------------------------------

LINEAR_SHAPES = [(16384, 2048), (2048, 16384), (4096, 4096)]
LINEAR_M = [1, 16, 51, 816, 4096]


def linear_model(path, dtype):
    t = ONNX_TYPE[dtype]
    nodes, inputs, outputs = [], [helper.make_tensor_value_info("x%d" % i, t, ["m", k]) for i, (n, k) in enumerate(LINEAR_SHAPES)], []
    for i, (n, k) in enumerate(LINEAR_SHAPES):
        inputs.append(helper.make_tensor_value_info("w%d" % i, t, [k, n]))
        outputs.append(helper.make_tensor_value_info("y%d" % i, t, ["m", n]))
        nodes.append(helper.make_node("MatMul", ["x%d" % i, "w%d" % i], ["y%d" % i], name="linear_%dx%d" % (n, k)))
    g = helper.make_graph(nodes, "linear", inputs, outputs)
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def rotated_weight_times(f, x, w, y, yt):
    """kiln's and cuBLAS's per-call times over copies of `w` whose bytes together exceed L2 (at least
    256 MB), one copy per call in turn, as read_ceiling_us streams its buffers."""
    copies = max(2, (256 << 20) // (w.numel() * w.element_size()))
    ws = [w] + [w.clone() for _ in range(copies - 1)]
    bound = []
    for wi in ws:  # each copy's argument array (prepare replaces f.args and f.keep)
        f.prepare([x, wi, y])
        bound.append((f.args, f.keep))
    state = {"i": 0}

    def kiln_call():
        f.args, f.keep = bound[state["i"] % copies]
        state["i"] += 1
        f()

    def cublas_call():
        torch.matmul(x, ws[state["i"] % copies], out=yt)
        state["i"] += 1
    kiln_us = graph_time_us(kiln_call, calls=max(20, copies))
    cublas_us = graph_time_us(cublas_call, calls=max(20, copies))
    return kiln_us, cublas_us


def bench_linear(dtype, out_dir, read_ceiling):
    rows = []
    dname = str(dtype)[6:]
    for i, (n, k) in enumerate(LINEAR_SHAPES):
        fn_name = "linear_%dx%d" % (n, k)
        lib = [f for f in os.listdir(out_dir) if f.startswith("lib") and f.endswith(".so")][0]
        sig = json.load(open(os.path.join(out_dir, fn_name + ".json")))
        f = KilnFunction(os.path.join(out_dir, lib), fn_name)
        w = torch.randn(k, n, device="cuda", dtype=dtype) / k ** 0.5
        for m in LINEAR_M:
            x = torch.randn(m, k, device="cuda", dtype=dtype)
            y = torch.empty(m, n, device="cuda", dtype=dtype)
            ref = x.float() @ w.float()
            ws = 0
            for b in sig.get("workspace", {}).get("buffers", []):
                e = eval(b["elements"].replace("select(", "_s("), {"_s": lambda c, a, bb: a if c else bb}, {"m": m})  # noqa: S307
                ws += (int(e) * 4 + 255) // 256 * 256
            f.workspace = torch.empty(max(ws, 1), dtype=torch.uint8, device="cuda")
            f.prepare([x, w, y])
            status, kus = check_and_time(f, y, ref, 2e-2)
            yt = torch.empty_like(y)
            tus = graph_time_us(lambda: torch.matmul(x, w, out=yt))
            flops = 2.0 * m * n * k
            row = dict(dtype=dname, n=n, k=k, m=m, check=status, kiln_us=kus, cublas_us=tus,
                       tflops=(flops / kus * 1e-6) if kus else None, ratio=(tus / kus) if kus else None)
            if m <= 16 and kus:
                # The weight stream is the whole cost here: both sides timed again over copies of W
                # that together exceed L2, as the read ceiling is (the times above reuse one W, of
                # which L2 may hold much at 4096x4096).
                row["kiln_rot_us"], row["cublas_rot_us"] = rotated_weight_times(f, x, w, y, yt)
                row["read_pct"] = 100.0 * read_ceiling[(n, k)] / row["kiln_rot_us"]
                row["gbs"] = n * k * 2 / (row["kiln_rot_us"] * 1e-6) / 1e9
            rows.append(row)
            print("linear %s %dx%d M=%d: %s kiln %s us, cuBLAS %.1f us" % (dname, n, k, m, status,
                  "%.1f" % kus if kus else "-", tus), flush=True)
    return rows


# ---- models exported from PyTorch ------------------------------------------------------------

class RMSNorm(torch.nn.Module):
    def __init__(self, d, eps=1e-6):
        super().__init__()
        self.eps = eps
        self.weight = torch.nn.Parameter(torch.randn(d) * 0.1)

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * (1.0 + self.weight.float())).type_as(x)


class GemmaMLPBlock(torch.nn.Module):
    def __init__(self, hidden=2048, inter=16384):
        super().__init__()
        self.norm = RMSNorm(hidden)
        self.gate = torch.nn.Linear(hidden, inter, bias=False)
        self.up = torch.nn.Linear(hidden, inter, bias=False)
        self.down = torch.nn.Linear(inter, hidden, bias=False)

    def forward(self, x):
        h = self.norm(x)
        return x + self.down(torch.nn.functional.gelu(self.gate(h), approximate="tanh") * self.up(h))


class ViTBlock(torch.nn.Module):
    def __init__(self, d=768, heads=12):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = torch.nn.LayerNorm(d), torch.nn.LayerNorm(d)
        self.qkv, self.proj = torch.nn.Linear(d, 3 * d), torch.nn.Linear(d, d)
        self.fc1, self.fc2 = torch.nn.Linear(d, 4 * d), torch.nn.Linear(4 * d, d)

    def forward(self, x):
        b, n, c = x.shape
        qkv = self.qkv(self.ln1(x)).reshape(b, n, 3, self.heads, c // self.heads).permute(2, 0, 3, 1, 4)
        q, k, v = qkv[0], qkv[1], qkv[2]
        attn = ((q @ k.transpose(-2, -1)) * (c // self.heads) ** -0.5).softmax(dim=-1)
        x = x + self.proj((attn @ v).transpose(1, 2).reshape(b, n, c))
        return x + self.fc2(torch.nn.functional.gelu(self.fc1(self.ln2(x))))


class SmallCNN(torch.nn.Module):
    def __init__(self, c=64):
        super().__init__()
        layers, cin = [], 3
        for cout in (c, c, 2 * c, 2 * c):
            layers += [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout), torch.nn.ReLU()]
            cin = cout
        self.body = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


# The CNN's convolutions one at a time (Conv3x3 pad 1 + bias, NCHW, 32x56x56): kiln's implicit-GEMM
# template vs torch.nn.functional.conv2d (cuDNN, eager).
CNN_LAYERS = [(3, 64), (64, 64), (64, 128), (128, 128)]


def conv_layer_model(path, cin, cout):
    ins = [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [32, cin, 56, 56]),
           helper.make_tensor_value_info("w", TensorProto.FLOAT16, [cout, cin, 3, 3]),
           helper.make_tensor_value_info("b", TensorProto.FLOAT16, [cout])]
    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[1, 1, 1, 1], name="conv")
    g = helper.make_graph([node], "conv_%d_%d" % (cin, cout), ins,
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [32, cout, 56, 56])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), path)


def bench_conv_layers(work, rows):
    for cin, cout in CNN_LAYERS:
        name = "conv_%d_%d" % (cin, cout)
        torch.manual_seed(cin + cout)
        x = torch.randn(32, cin, 56, 56, device="cuda", dtype=torch.float16)
        w = torch.randn(cout, cin, 3, 3, device="cuda", dtype=torch.float16) / (9 * cin) ** 0.5
        b = torch.randn(cout, device="cuda", dtype=torch.float16)
        ref = torch.nn.functional.conv2d(x.float(), w.float(), b.float(), padding=1)
        out = torch.empty(ref.shape, device="cuda", dtype=torch.float16)
        k = KilnModel(os.path.join(work, name), os.path.join(work, name + ".onnx"))
        fn = k.bind({"x": x, "w": w, "b": b}, [out])
        status, kus = check_and_time(fn, out, ref, 2e-2)
        cudnn = graph_time_us(lambda: torch.nn.functional.conv2d(x, w, b, padding=1))
        flops = 2.0 * 32 * 56 * 56 * cout * cin * 9
        rows.append(dict(layer="%d->%d" % (cin, cout), check=status, kiln_us=kus, cudnn_us=cudnn, flops=flops))
        print("conv layer %d->%d: %s kiln %s us, cuDNN %.1f us" % (cin, cout, status, "%.1f" % kus if kus else "-", cudnn),
              flush=True)


def export(module, example, path, dynamic):
    module.eval()
    kw = dict(opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
    if dynamic:
        kw["dynamic_axes"] = {"x": dynamic, "y": dynamic}
    torch.onnx.export(module, (example,), path, **kw)


def bench_model(name, module, model_path, kiln_dir, shapes, dtype, limit, rows):
    k = KilnModel(kiln_dir, model_path)
    compiled = torch.compile(module)
    reference = copy.deepcopy(module).float()
    for shape in shapes:
        torch.manual_seed(sum(shape))
        x = torch.randn(*shape, device="cuda", dtype=dtype)
        with torch.no_grad():
            ref = reference(x.float())
        out = torch.empty(ref.shape, device="cuda", dtype=dtype)
        fn = k.bind({"x": x}, [out])
        with torch.no_grad():
            status, kus = check_and_time(fn, out, ref, limit)
            eager = graph_time_us(lambda: module(x))
            try:
                comp = graph_time_us(lambda: compiled(x))
            except Exception as e:  # noqa: BLE001
                print("torch.compile failed:", e)
                comp = None
        rows.append(dict(model=name, shape="x".join(map(str, shape)), check=status, kiln_us=kus, eager_us=eager,
                         compile_us=comp))
        if PROFILE and kus:
            profile_kernels("%s %s kiln" % (name, shape), fn)
            if comp:
                profile_kernels("%s %s torch.compile" % (name, shape), lambda: compiled(x))
        print("%s %s: %s kiln %s us, eager %.1f us, torch.compile %s us" % (
            name, shape, status, "%.1f" % kus if kus else "-", eager, "%.1f" % comp if comp else "-"), flush=True)


PROFILE = False  # --profile: per-kernel GPU times of kiln and torch.compile for each model shape


def profile_kernels(label, fn, calls=10, top=12):
    """Prints each kernel's GPU time per call (CUPTI through torch.profiler), largest first."""
    from torch.profiler import ProfilerActivity, profile
    with torch.no_grad():
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(calls):
                fn()
            torch.cuda.synchronize()
    kernels = [e for e in prof.key_averages() if e.device_type.name == "CUDA" and e.self_device_time_total > 0]
    kernels.sort(key=lambda e: -e.self_device_time_total)
    total = sum(e.self_device_time_total for e in kernels) / calls
    print("profile %s: %.1f us of kernels per call" % (label, total))
    for e in kernels[:top]:
        print("  %8.1f us  %4d/call  %s" % (e.self_device_time_total / calls, e.count // calls, e.key[:110]))


# ---- main --------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--out", default="bench/results")
    ap.add_argument("--work", default="/tmp/kiln-contraction")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--only", default="linear,mlp,nvfp4,vit,cnn")
    ap.add_argument("--tag", default="")
    ap.add_argument("--profile", action="store_true", help="per-kernel GPU times of each model (kiln, torch.compile)")
    ap.add_argument("--compile-only", action="store_true", help="export and compile, then stop (a later --reuse-built run times)")
    ap.add_argument("--reuse-built", action="store_true", help="keep a library already compiled into --work (no compile)")
    args = ap.parse_args()
    global PROFILE
    PROFILE = args.profile
    only = set(args.only.split(","))
    os.makedirs(args.work, exist_ok=True)
    w = args.work
    torch.manual_seed(0)
    t0 = time.time()

    # Models first (exports), then every compile in parallel.
    mlp = GemmaMLPBlock().cuda().half().eval()
    vit = ViTBlock().cuda().half().eval()
    cnn = SmallCNN().cuda().half().eval()
    jobs = []
    if "linear" in only:
        for dtype in (torch.float16, torch.bfloat16):
            p = os.path.join(w, "linear_%s.onnx" % str(dtype)[6:])
            linear_model(p, dtype)
            jobs.append(("linear_" + str(dtype)[6:], p, ["--nodes", ",".join("linear_%dx%d" % s for s in LINEAR_SHAPES)]))
    if "mlp" in only or "nvfp4" in only:
        export(mlp, torch.randn(1, 4, 2048, device="cuda", dtype=torch.float16), os.path.join(w, "mlp.onnx"),
               {0: "batch", 1: "seq"})
        jobs.append(("mlp", os.path.join(w, "mlp.onnx"), []))
    if "nvfp4" in only:
        q = subprocess.run([args.kiln, "quantize", os.path.join(w, "mlp.onnx"), "-o", os.path.join(w, "mlp_nvfp4.onnx"),
                            "--format", "nvfp4"], capture_output=True, text=True)
        print(q.stdout[-1500:], q.stderr[-1500:])
        jobs.append(("mlp_nvfp4", os.path.join(w, "mlp_nvfp4.onnx"), []))
    if "vit" in only:
        export(vit, torch.randn(8, 197, 768, device="cuda", dtype=torch.float16), os.path.join(w, "vit.onnx"),
               {0: "batch"})
        jobs.append(("vit", os.path.join(w, "vit.onnx"), []))
    if "cnn" in only:
        export(cnn, torch.randn(32, 3, 56, 56, device="cuda", dtype=torch.float16), os.path.join(w, "cnn.onnx"),
               {0: "batch"})
        jobs.append(("cnn", os.path.join(w, "cnn.onnx"), []))
        for cin, cout in CNN_LAYERS:
            p = os.path.join(w, "conv_%d_%d.onnx" % (cin, cout))
            conv_layer_model(p, cin, cout)
            jobs.append(("conv_%d_%d" % (cin, cout), p, []))
    def built_already(d):
        return os.path.isdir(d) and any(f.startswith("lib") and f.endswith(".so") for f in os.listdir(d))
    reused = {name for name, _, _ in jobs if args.reuse_built and built_already(os.path.join(w, name))}
    procs = {name: kiln_compile(args.kiln, path, os.path.join(w, name), args.arch, extra) + (path,)
             for name, path, extra in jobs if name not in reused}
    built = {name: True for name in reused}
    for name, (p, log, path) in procs.items():
        p.wait()
        built[name] = p.returncode == 0
        if not built[name]:
            print("kiln compile failed for %s:\n%s" % (name, open(log).read()[-3000:]), flush=True)
    print("exports + compiles: %.0f s" % (time.time() - t0), flush=True)
    if args.compile_only:
        return

    device = torch.cuda.get_device_name()
    bandwidth = copy_bandwidth()
    read_ceiling = {s: read_ceiling_us(s[0] * s[1] * 2) for s in LINEAR_SHAPES} if "linear" in only else {}
    linear_rows, model_rows, conv_rows = [], [], []
    for dtype in (torch.float16, torch.bfloat16):
        name = "linear_" + str(dtype)[6:]
        if built.get(name):
            linear_rows += bench_linear(dtype, os.path.join(w, name), read_ceiling)
    with torch.no_grad():
        if built.get("mlp"):
            bench_model("Gemma MLP block fp16", mlp, os.path.join(w, "mlp.onnx"), os.path.join(w, "mlp"),
                        [(1, 1, 2048), (1, 16, 2048), (1, 816, 2048)], torch.float16, 2e-2, model_rows)
        if built.get("mlp_nvfp4"):
            bench_model("Gemma MLP block NVFP4 (kiln quantize)", mlp, os.path.join(w, "mlp_nvfp4.onnx"),
                        os.path.join(w, "mlp_nvfp4"), [(1, 1, 2048), (1, 16, 2048), (1, 816, 2048)], torch.float16,
                        0.25, model_rows)
        if built.get("vit"):
            bench_model("ViT block fp16 (768, 12 heads)", vit, os.path.join(w, "vit.onnx"), os.path.join(w, "vit"),
                        [(8, 197, 768)], torch.float16, 2e-2, model_rows)
        if built.get("cnn"):
            bench_model("CNN 4x(Conv3x3+BN+ReLU) fp16", cnn, os.path.join(w, "cnn.onnx"), os.path.join(w, "cnn"),
                        [(32, 3, 56, 56)], torch.float16, 2e-2, model_rows)
        if all(built.get("conv_%d_%d" % c) for c in CNN_LAYERS):
            bench_conv_layers(w, conv_rows)

    commit = os.environ.get("KILN_COMMIT", "unknown")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
    f = lambda v, fmt="%.1f": (fmt % v) if v is not None else "-"  # noqa: E731
    lines = ["# kiln contraction benchmark: %s, %s" % (device, date), "",
             "- device: %s; commit: %s; command: `%s`%s" % (device, commit, " ".join(sys.argv),
                 ("; every kiln compile with `%s` ($KILN_COMPILE_FLAGS)" % os.environ["KILN_COMPILE_FLAGS"].strip())
                 if os.environ.get("KILN_COMPILE_FLAGS", "").strip() else ""),
             "- torch %s; copy bandwidth (read + write) %.0f GB/s" % (torch.__version__, bandwidth),
             "- times: per call, CUDA-graph replay of 20 back-to-back calls, median of 7; every kiln result checked"
             " first (fresh random inputs, NaN-poisoned outputs, relative error vs fp32 torch)",
             ]
    # A section's run (--only) prints only the tables it filled.
    if linear_rows:
        lines += ["", "## Linear layers (MatMul x[M,K] @ W[K,N]) vs torch.matmul (cuBLAS)", "",
                  "| dtype | N x K | M | check | kiln us | cuBLAS us | kiln / cuBLAS speed | TFLOP/s |"
                  " M<=16, W rotated over >= 256 MB: kiln us | cuBLAS us | % of read ceiling (kiln) |",
                  "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
        for r in linear_rows:
            lines.append("| %s | %dx%d | %d | %s | %s | %.1f | %s | %s | %s | %s | %s |" % (
                r["dtype"], r["n"], r["k"], r["m"], r["check"], f(r["kiln_us"]), r["cublas_us"],
                f(r["ratio"], "%.2fx"), f(r["tflops"]), f(r.get("kiln_rot_us")), f(r.get("cublas_rot_us")),
                f(r.get("read_pct"), "%.0f%%")))
        lines += ["", "Read ceiling (streaming kernel, same bytes, L2 rotated): " +
                  ", ".join("%dx%d %.2f us" % (n, k, read_ceiling[(n, k)]) for n, k in read_ceiling)]
    if model_rows:
        lines += ["", "## Models exported from PyTorch (torch.onnx.export opset 17), kiln compile --target %s"
                  % args.arch, "",
                  "| model | input | check | kiln us | torch eager us | torch.compile us | eager / kiln |"
                  " compile / kiln |",
                  "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
        for r in model_rows:
            k = r["kiln_us"]
            lines.append("| %s | %s | %s | %s | %.1f | %s | %s | %s |" % (
                r["model"], r["shape"], r["check"], f(k), r["eager_us"], f(r["compile_us"]),
                f(r["eager_us"] / k if k else None, "%.2fx"),
                f(r["compile_us"] / k if k and r["compile_us"] else None, "%.2fx")))
    if conv_rows:
        lines += ["", "## The CNN's Conv layers (3x3, pad 1, + bias, fp16 NCHW, 32x56x56) vs torch conv2d (cuDNN, eager)",
                  "", "| layer | check | kiln us | cuDNN us | kiln / cuDNN speed | kiln TFLOP/s |",
                  "| --- | --- | ---: | ---: | ---: | ---: |"]
        for r in conv_rows:
            k = r["kiln_us"]
            lines.append("| %s | %s | %s | %.1f | %s | %s |" % (
                r["layer"], r["check"], f(k), r["cudnn_us"], f(r["cudnn_us"] / k if k else None, "%.2fx"),
                f(r["flops"] / k / 1e6 if k else None)))
    lines.append("")
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    path = os.path.join(args.out, "contraction_%s_%s%s.md" % (device.replace(" ", "_"), date,
                                                              "_" + args.tag if args.tag else ""))
    open(path, "w").write(text)
    print("wrote", path)


if __name__ == "__main__":
    main()
