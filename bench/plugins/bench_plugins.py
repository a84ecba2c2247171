"""Times each plugin of `kiln plugins` packages on the GPU against PyTorch eager for the same op
(issue 3, "--bench"), and writes the times into each package's report.md / report.json.

    python3 bench/plugins/bench_plugins.py DIR [DIR ...] --sizes batch=64,seq=512 [--arch sm_90]

For every plugin in DIR/report.json:
  1. builds its kernels alone into a kiln library (report.json "kernel_sources": the generated
     kernels and their function table) with nvcc, all plugins in parallel;
  2. for each dtype variant (report.json "functions"), makes inputs: the model's own constants
     for inputs that are initializers of the model (from DIR/<plugin>/subgraph.onnx's source model,
     --model), fresh random normals otherwise; symbols from --sizes;
  3. runs the kernel through the kernel contract (kiln.load, torch tensors, torch's current
     stream, device workspace from torch's allocator) and the plugin's ONNX subgraph
     (DIR/<plugin>/subgraph.onnx) in PyTorch eager through TORCH_OPS below, and checks the kernel
     against PyTorch computed in float32 from the same inputs before timing anything;
  4. times both with CUDA events, one call per sample after an L2 flush, and reports medians.
A plugin with an op missing from TORCH_OPS is reported as such, its kernel untimed.
"""
import argparse
import concurrent.futures
import json
import math
import os
import pathlib
import shutil
import subprocess
import sys

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

import kiln

ROOT = pathlib.Path(__file__).resolve().parents[2]
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
# Check tolerance per dtype, relative to the reference's largest magnitude.
TOLERANCE = {torch.float32: 1e-4, torch.float16: 1e-2, torch.bfloat16: 4e-2}


# ---- ONNX op -> PyTorch eager (node, list of input tensors) -> list of outputs ----------------
def _attr(node, name, default=None):
    for a in node.attribute:
        if a.name == name:
            return onnx.helper.get_attribute_value(a)
    return default


def _gemm(node, x):
    a, b = x[0], x[1]
    if _attr(node, "transA", 0):
        a = a.t()
    if _attr(node, "transB", 0):
        b = b.t()
    y = _attr(node, "alpha", 1.0) * (a @ b)
    if len(x) > 2:
        y = y + _attr(node, "beta", 1.0) * x[2]
    return [y]


def _conv(node, x):
    pads = _attr(node, "pads", [0, 0, 0, 0])
    if any(pads[i] != pads[i + len(pads) // 2] for i in range(len(pads) // 2)):
        raise NotImplementedError("Conv with asymmetric pads")
    conv = {3: F.conv1d, 4: F.conv2d, 5: F.conv3d}[x[0].dim()]
    return [conv(x[0], x[1], x[2] if len(x) > 2 else None, stride=_attr(node, "strides", 1),
                 padding=pads[: len(pads) // 2], dilation=_attr(node, "dilations", 1), groups=_attr(node, "group", 1))]


def _max_pool(node, x):
    pads = _attr(node, "pads", [0, 0, 0, 0])
    return [F.max_pool2d(x[0], _attr(node, "kernel_shape"), stride=_attr(node, "strides", 1), padding=pads[:2])]


def _layer_norm(node, x):
    axis = _attr(node, "axis", -1) % x[0].dim()
    shape = x[0].shape[axis:]
    return [F.layer_norm(x[0], shape, x[1], x[2] if len(x) > 2 else None, eps=_attr(node, "epsilon", 1e-5))]


def _batch_norm(node, x):
    return [F.batch_norm(x[0], x[3], x[4], x[1], x[2], training=False, eps=_attr(node, "epsilon", 1e-5))]


TORCH_OPS = {
    "MatMul": lambda n, x: [torch.matmul(x[0], x[1])],
    "Gemm": _gemm,
    "Softmax": lambda n, x: [torch.softmax(x[0], dim=_attr(n, "axis", -1))],
    "LayerNormalization": _layer_norm,
    "Conv": _conv,
    "MaxPool": _max_pool,
    "BatchNormalization": _batch_norm,
    "GlobalAveragePool": lambda n, x: [x[0].mean(dim=tuple(range(2, x[0].dim())), keepdim=True)],
    "Flatten": lambda n, x: [torch.flatten(x[0], _attr(n, "axis", 1))],
    "Relu": lambda n, x: [torch.relu(x[0])],
    "Sigmoid": lambda n, x: [torch.sigmoid(x[0])],
    "Tanh": lambda n, x: [torch.tanh(x[0])],
    "Erf": lambda n, x: [torch.erf(x[0])],
    "Exp": lambda n, x: [torch.exp(x[0])],
    "Sqrt": lambda n, x: [torch.sqrt(x[0])],
    "Add": lambda n, x: [x[0] + x[1]],
    "Sub": lambda n, x: [x[0] - x[1]],
    "Mul": lambda n, x: [x[0] * x[1]],
    "Div": lambda n, x: [x[0] / x[1]],
    "Pow": lambda n, x: [torch.pow(x[0], x[1])],
}


def run_subgraph(graph, inputs):
    """Runs an ONNX graph in PyTorch eager; `inputs` maps graph input names to tensors."""
    values = dict(inputs)
    for init in graph.initializer:
        values[init.name] = torch.from_numpy(numpy_helper.to_array(init).copy()).to(next(iter(inputs.values())))
    for node in graph.node:
        outs = TORCH_OPS[node.op_type](node, [values[i] for i in node.input if i])
        for name, t in zip(node.output, outs):
            values[name] = t
    return [values[o.name] for o in graph.output]


# ---- building the kernels --------------------------------------------------------------------
def build_kernels(package, plugin, arch, work):
    sources = [package / s for s in plugin["kernel_sources"]]
    include = package / plugin["name"] / "common" / "include"
    library = work / f"lib{plugin['name']}_kernels.so"
    cmd = ["nvcc", "-O3", "-std=c++20", "-shared", "-Xcompiler", "-fPIC", "-cudart", "shared",
           "--expt-relaxed-constexpr", f"-gencode=arch=compute_{arch},code=sm_{arch}", "-I", str(include),
           "-o", str(library)] + [str(s) for s in sources]
    run = subprocess.run(cmd, capture_output=True, text=True)
    if run.returncode != 0:
        raise RuntimeError(f"building {library} failed:\n{' '.join(cmd)}\n{run.stderr[-3000:]}")
    return library


# ---- timing ----------------------------------------------------------------------------------
class Timer:
    """CUDA-event time of one call, after an L2 flush (a write of 2x the L2), median of samples."""

    def __init__(self, samples):
        self.samples = samples
        l2 = torch.cuda.get_device_properties(0).L2_cache_size
        self.flush = torch.empty(2 * l2, dtype=torch.uint8, device="cuda")

    def __call__(self, fn):
        fn()  # warm-up (module load, allocator)
        torch.cuda.synchronize()
        times = []
        for _ in range(self.samples):
            self.flush.zero_()
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1000.0)
        return float(np.median(times))


# ---- one plugin -----------------------------------------------------------------------------
def make_inputs(fn_sig, sizes, constants, dtype, seed):
    gen = torch.Generator(device="cuda").manual_seed(seed)
    inputs, outputs = {}, []
    for p in fn_sig["params"]:
        shape = []
        for d in p["shape"]:
            if isinstance(d, int):
                shape.append(d)
            elif d in sizes:
                shape.append(sizes[d])
            else:
                raise KeyError(f"no size for symbol {d!r} (pass --sizes {d}=N)")
        if p["is_output"]:
            outputs.append(torch.full(shape, float("nan"), dtype=dtype, device="cuda"))
        elif p["name"] in constants:
            c = torch.from_numpy(constants[p["name"]].copy()).to("cuda", dtype)
            inputs[p["name"]] = c.reshape(shape)
        else:
            inputs[p["name"]] = torch.randn(shape, generator=gen, device="cuda", dtype=torch.float32).to(dtype)
    return inputs, outputs


def bench_plugin(package, plugin, library, sizes, constants, timer):
    graph = onnx.load(str(package / plugin["name"] / "subgraph.onnx")).graph
    missing = sorted({n.op_type for n in graph.node} - set(TORCH_OPS))
    lib = kiln.load(library)
    rows = []
    for name in plugin["functions"]:
        try:
            rows.append(bench_function(lib[name], name, graph, missing, sizes, constants, timer, seed=len(rows) + 1))
        except Exception as e:  # reported in the table, and the run fails
            rows.append({"function": name, "dtype": "-", "sizes": sizes, "status": f"FAILED: {type(e).__name__}: {e}"})
            print(f"  {name}: {rows[-1]['status']}", flush=True)
    return {"plugin": plugin["name"], "ops": sorted({n.op_type for n in graph.node}), "rows": rows}


def bench_function(fn, name, graph, missing, sizes, constants, timer, seed):
    """Checks and times one dtype variant of a plugin's kernel; returns its table row."""
    sig = json.loads(fn.signature_json)
    dtype = DTYPES[next(p["dtype"] for p in sig["params"] if p["dtype"] in DTYPES)]
    row = {"function": name, "dtype": str(dtype).replace("torch.", ""), "sizes": sizes}
    inputs, outputs = make_inputs(sig, sizes, constants, dtype, seed=seed)
    args = [inputs[p["name"]] for p in sig["params"] if not p["is_output"]] + outputs
    if missing:
        row["status"] = "no PyTorch mapping for " + ", ".join(missing)
        return row
    fn(*args)
    want = run_subgraph(graph, {k: v.float() for k, v in inputs.items()})
    worst = 0.0
    for got, ref in zip(outputs, want):
        scale = max(ref.abs().max().item(), 1e-6)
        err = (got.float() - ref).abs().max().item() / scale
        worst = max(worst, err if not math.isnan(err) else math.inf)
    row["max_error_rel_to_max"] = worst
    if worst > TOLERANCE[dtype]:
        row["status"] = f"FAILED check: max error {worst:.3g} x max|ref| > {TOLERANCE[dtype]:g}"
        return row
    row["kiln_us"] = timer(lambda: fn(*args))
    eager_inputs = dict(inputs)
    row["torch_us"] = timer(lambda: run_subgraph(graph, eager_inputs))
    row["torch_over_kiln"] = row["torch_us"] / row["kiln_us"]
    row["status"] = "checked"
    print(f"  {name}: kiln {row['kiln_us']:.2f} us, torch eager {row['torch_us']:.2f} us "
          f"(x{row['torch_over_kiln']:.2f}), max err {worst:.2g}", flush=True)
    return row


def model_constants(model_path):
    if model_path is None or not model_path.is_file():
        return {}
    g = onnx.load(str(model_path)).graph
    out = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    for n in g.node:
        if n.op_type == "Constant":
            out[n.output[0]] = numpy_helper.to_array(_attr(n, "value"))
    return out


def markdown(results, device, command):
    s = (f"\n## Kernel timings against PyTorch eager\n\n- device: {device}\n- command: `{command}`\n"
         "- method: CUDA events around one call after an L2 flush, median of the samples; the kernel "
         "through the kernel contract (kiln.load, torch's current stream), PyTorch eager running the "
         "plugin's ONNX subgraph op by op in the same dtype; each kernel checked first against PyTorch "
         "in float32 on the same fresh random inputs (model constants where the input is one)\n\n"
         "| plugin | ops | function | dtype | sizes | kiln µs | PyTorch eager µs | eager / kiln | max err | status |\n"
         "| --- | --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |\n")
    for r in results:
        for row in r["rows"]:
            sizes = ", ".join(f"{k}={v}" for k, v in row["sizes"].items())
            def num(key, fmt):
                return format(row[key], fmt) if key in row else "-"
            s += (f"| `{r['plugin']}` | {', '.join(r['ops'])} | `{row['function']}` | {row['dtype']} | {sizes} | "
                  f"{num('kiln_us', '.2f')} | {num('torch_us', '.2f')} | {num('torch_over_kiln', '.2f')} | "
                  f"{num('max_error_rel_to_max', '.1e')} | {row['status']} |\n")
    return s


def update_report(package, results, device, command):
    report = json.loads((package / "report.json").read_text())
    by_name = {r["plugin"]: r for r in results}
    for p in report["plugins"]:
        if p["name"] in by_name:
            p["bench"] = {"device": device, "command": command, "rows": by_name[p["name"]]["rows"]}
    (package / "report.json").write_text(json.dumps(report, indent=2) + "\n")
    md = (package / "report.md").read_text()
    cut = md.find("\nKernel timings against PyTorch eager")
    cut2 = md.find("\n## Kernel timings against PyTorch eager")
    md = md[: min(c for c in (cut, cut2, len(md)) if c >= 0)].rstrip("\n") + "\n"
    (package / "report.md").write_text(md + markdown(results, device, command))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("packages", nargs="+", type=pathlib.Path, help="kiln plugins output folders")
    ap.add_argument("--sizes", default="", help="symbol sizes, e.g. batch=64,seq=512")
    ap.add_argument("--arch", default="90")
    ap.add_argument("--samples", type=int, default=50)
    ap.add_argument("--work", type=pathlib.Path, default=pathlib.Path("/tmp/kiln_bench_plugins"))
    ap.add_argument("--command", default=" ".join(sys.argv))
    a = ap.parse_args()
    sizes = {k: int(v) for k, v in (kv.split("=") for kv in a.sizes.split(",") if kv)}
    device = torch.cuda.get_device_name(0)
    shutil.rmtree(a.work, ignore_errors=True)
    jobs = []
    for package in a.packages:
        report = json.loads((package / "report.json").read_text())
        for plugin in report["plugins"]:
            work = a.work / package.name
            work.mkdir(parents=True, exist_ok=True)
            jobs.append((package, report, plugin, work))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count()) as pool:
        libraries = list(pool.map(lambda j: build_kernels(j[0], j[2], a.arch.removeprefix("sm_"), j[3]), jobs))
    timer = Timer(a.samples)
    results = {}
    for (package, report, plugin, _), library in zip(jobs, libraries):
        print(f"{package.name}/{plugin['name']}", flush=True)
        model = ROOT / "examples" / report["model"]
        results.setdefault(package, []).append(
            bench_plugin(package, plugin, str(library), sizes, model_constants(model), timer))
    for package, res in results.items():
        update_report(package, res, device, a.command)
    failed = [row for res in results.values() for r in res for row in r["rows"] if row["status"].startswith("FAILED")]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
