#!/usr/bin/env python3
"""Issue 10's model check on the GPU machine: models as users export them from PyTorch, compiled to
model libraries and run with only their graph inputs.

For each model (a Gemma-style decoder layer: RMSNorm, GQA attention with RoPE and a causal mask,
gated MLP; a ViT block; a small CNN) x exporter (torch.onnx.export opset 17 TorchScript-based, and
the dynamo exporter at opset 18) x dtype (float32, float16):
  1. export (dynamic batch);
  2. `kiln compile --model --reference` for sm_90 and for the CPU (the reference folder holds random
     inputs and the CPU backend's outputs for them);
  3. Python: `kiln.load(lib).main(x)` on the GPU with the reference inputs, outputs allocated by
     kiln; compared with the CPU backend's outputs and with torch eager (float64 copy of the module);
  4. C++: the example application (examples/cpp/run_model, built against the installed CMake
     package) runs the CPU library from 4 threads and checks it against the same reference.
Prints one table row per variant and writes it as Markdown.

Usage: models_check.py --kiln KILN --run-model RUN_MODEL --out RESULTS.md [--work DIR] [--jobs N]
"""
import argparse
import concurrent.futures
import datetime
import importlib.util
import os
import subprocess
import sys
import time

import numpy as np
import torch

import kiln


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The contraction benchmark's modules (the same RMSNorm and ViT block, here at ViT-Tiny size).
_contraction = _load("kiln_contraction_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..",
                                                            "contraction", "bench.py"))
RMSNorm = _contraction.RMSNorm


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class GemmaDecoderLayer(torch.nn.Module):
    """Gemma's layer at small size: 4 query heads sharing 1 key/value head (GQA), head dim 64."""

    def __init__(self, d=256, heads=4, kv_heads=1, head_dim=64, inter=1024):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = heads, kv_heads, head_dim
        self.in_norm, self.post_norm = RMSNorm(d), RMSNorm(d)
        self.q = torch.nn.Linear(d, heads * head_dim, bias=False)
        self.k = torch.nn.Linear(d, kv_heads * head_dim, bias=False)
        self.v = torch.nn.Linear(d, kv_heads * head_dim, bias=False)
        self.o = torch.nn.Linear(heads * head_dim, d, bias=False)
        self.gate = torch.nn.Linear(d, inter, bias=False)
        self.up = torch.nn.Linear(d, inter, bias=False)
        self.down = torch.nn.Linear(inter, d, bias=False)

    def forward(self, x):
        b, s, _ = x.shape
        h = self.in_norm(x)
        q = self.q(h).view(b, s, self.heads, self.head_dim).transpose(1, 2)
        k = self.k(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        v = self.v(h).view(b, s, self.kv_heads, self.head_dim).transpose(1, 2)
        inv = 1.0 / (10000 ** (torch.arange(0, self.head_dim, 2, device=x.device, dtype=torch.float32) / self.head_dim))
        angle = torch.arange(s, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
        angle = torch.cat((angle, angle), dim=-1)
        cos, sin = angle.cos().to(x.dtype), angle.sin().to(x.dtype)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(self.heads // self.kv_heads, dim=1)
        v = v.repeat_interleave(self.heads // self.kv_heads, dim=1)
        scores = (q @ k.transpose(-2, -1)) * self.head_dim ** -0.5
        mask = torch.triu(torch.full((s, s), float("-inf"), device=x.device), diagonal=1)
        p = (scores.float() + mask).softmax(dim=-1).to(x.dtype)
        o = (p @ v).transpose(1, 2).reshape(b, s, self.heads * self.head_dim)
        x = x + self.o(o)
        h = self.post_norm(x)
        return x + self.down(torch.nn.functional.gelu(self.gate(h), approximate="tanh") * self.up(h))


def ViTBlock():
    return _contraction.ViTBlock(d=192, heads=3)


class SmallCNN(torch.nn.Module):
    def __init__(self, c=16):
        super().__init__()
        layers, cin = [], 3
        for cout in (c, c, 2 * c):
            layers += [torch.nn.Conv2d(cin, cout, 3, padding=1, bias=False), torch.nn.BatchNorm2d(cout),
                       torch.nn.ReLU()]
            cin = cout
        layers += [torch.nn.MaxPool2d(2), torch.nn.Flatten(), torch.nn.Linear(2 * c * 8 * 8, 10)]
        self.body = torch.nn.Sequential(*layers)

    def forward(self, x):
        return self.body(x)


MODELS = {
    "gemma_decoder": (GemmaDecoderLayer, (2, 16, 256)),
    "vit_block": (ViTBlock, (2, 197, 192)),
    "cnn": (SmallCNN, (2, 3, 16, 16)),
}
EXPORTERS = {"opset17": dict(opset_version=17, dynamo=False), "dynamo_opset18": dict(opset_version=18, dynamo=True)}
DTYPES = {"float32": torch.float32, "float16": torch.float16}


def export(module, example, path, exporter):
    kw = dict(EXPORTERS[exporter], input_names=["x"], output_names=["y"])
    if kw["dynamo"]:
        kw["dynamic_shapes"] = ({0: torch.export.Dim("batch", min=1, max=64)},)
    else:
        kw["dynamic_axes"] = {"x": {0: "batch"}, "y": {0: "batch"}}
    torch.onnx.export(module, (example,), path, **kw)


def run(cmd, log):
    with open(log, "w") as f:
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT).returncode


def last_lines(path, n=6):
    try:
        return " / ".join(line.strip() for line in open(path).read().strip().splitlines()[-n:])
    except OSError:
        return ""


def read_reference(folder):
    tensors = []
    for line in open(os.path.join(folder, "manifest.txt")):
        if line.startswith("#") or not line.strip():
            continue
        parts = line.split()
        kind, name, dtype, ndim = parts[0], parts[1], parts[2], int(parts[3])
        shape = [int(d) for d in parts[4:4 + ndim]]
        data = np.fromfile(os.path.join(folder, parts[4 + ndim]), dtype=np.dtype(dtype)).reshape(shape)
        tensors.append((kind, name, data))
    return tensors


def rel(a, b):
    a, b = a.astype(np.float64), b.astype(np.float64)
    return float(np.abs(a - b).max() / max(np.abs(b).max(), 1e-30))


def compile_variant(kiln_bin, onnx_path, folder, target):
    os.makedirs(folder, exist_ok=True)
    start = time.time()
    rc = run([kiln_bin, "compile", onnx_path, "-o", folder, "--model", "--reference", "--target", target],
             folder + ".log")
    return rc, time.time() - start


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--run-model", required=True, help="examples/cpp's run_model, built against the installed package")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kiln_models")
    ap.add_argument("--jobs", type=int, default=8)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    torch.manual_seed(0)

    variants = []
    for model_name, (cls, shape) in MODELS.items():
        for dtype_name, dtype in DTYPES.items():
            module = cls().eval().to(dtype)
            for exporter in EXPORTERS:
                name = "%s_%s_%s" % (model_name, exporter, dtype_name)
                path = os.path.join(args.work, name + ".onnx")
                try:
                    with torch.no_grad():
                        export(module.cuda(), torch.randn(*shape, device="cuda", dtype=dtype), path, exporter)
                    variants.append(dict(name=name, model=model_name, exporter=exporter, dtype=dtype_name,
                                         module=module, path=path, export="ok"))
                except Exception as e:  # noqa: BLE001
                    variants.append(dict(name=name, model=model_name, exporter=exporter, dtype=dtype_name,
                                         module=module, path=path, export="export failed: %s" % str(e)[:160]))
                print("exported", name, variants[-1]["export"], flush=True)

    with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
        futures = {}
        for v in variants:
            if v["export"] != "ok":
                continue
            for target in ("sm_90", "cpu"):
                folder = os.path.join(args.work, v["name"] + "_" + target)
                futures[pool.submit(compile_variant, args.kiln, v["path"], folder, target)] = (v, target, folder)
        for f in concurrent.futures.as_completed(futures):
            v, target, folder = futures[f]
            rc, seconds = f.result()
            v[target] = folder if rc == 0 else None
            v[target + "_log"] = folder + ".log"
            print("compiled %s %s: %s (%.0f s)" % (v["name"], target, "ok" if rc == 0 else "FAILED", seconds), flush=True)

    rows = []
    for v in variants:
        row = dict(name=v["name"], gpu="-", cpu="-", torch="-")
        if v["export"] != "ok":
            row["gpu"] = row["cpu"] = v["export"]
            rows.append(row)
            continue
        tolerance = 1e-3 if v["dtype"] == "float32" else 2e-2
        if v.get("sm_90"):
            try:
                ref = read_reference(os.path.join(v["sm_90"], "reference"))
                inputs = [torch.from_numpy(d).cuda() for kind, _, d in ref if kind == "input"]
                expected = [d for kind, _, d in ref if kind == "output"]
                lib = kiln.load([os.path.join(v["sm_90"], f) for f in os.listdir(v["sm_90"])
                                 if f.startswith("lib") and f.endswith(".so")][0])
                got = lib.main(*inputs)
                got = got if isinstance(got, tuple) else (got,)
                torch.cuda.synchronize()
                err = max(rel(g.cpu().numpy(), e) for g, e in zip(got, expected))
                row["gpu"] = ("ok %.1e" if err <= tolerance else "FAIL %.1e") % err
                with torch.no_grad():
                    eager = v["module"].double().cpu()(torch.from_numpy(ref[0][2]).double())
                    v["module"].to(DTYPES[v["dtype"]])
                terr = rel(got[0].cpu().numpy(), eager.numpy())
                row["torch"] = ("ok %.1e" if terr <= 5 * tolerance else "FAIL %.1e") % terr
            except Exception as e:  # noqa: BLE001
                row["gpu"] = "FAIL: %s" % str(e)[:200]
        else:
            row["gpu"] = "compile failed: " + last_lines(v["sm_90_log"], 3)[:300]
        if v.get("cpu"):
            lib = [os.path.join(v["cpu"], f) for f in os.listdir(v["cpu"]) if f.startswith("lib") and f.endswith(".so")][0]
            rc = run([args.run_model, lib, "--threads", "4"], v["cpu"] + ".run.log")
            row["cpu"] = "ok (4 threads)" if rc == 0 else "FAIL: " + last_lines(v["cpu"] + ".run.log", 3)[:300]
        else:
            row["cpu"] = "compile failed: " + last_lines(v["cpu_log"], 3)[:300]
        print(row, flush=True)
        rows.append(row)

    device = torch.cuda.get_device_name()
    lines = ["# Model libraries from PyTorch-exported models (issue 10)", "",
             "- device: %s; date: %s; commit: %s" % (device, datetime.datetime.now(datetime.timezone.utc)
                                                     .strftime("%Y-%m-%d %H:%M UTC"), os.environ.get("KILN_COMMIT", "?")),
             "- command: `bench/runtime/models_run.sh` (`%s`)" % " ".join(sys.argv),
             "- torch %s; each variant: export (dynamic batch), `kiln compile --model --reference` for sm_90 and cpu;"
             " GPU: `kiln.load(lib).main(x)` (outputs allocated by kiln) vs the CPU backend's reference outputs"
             " (max abs error / max |ref|; tolerance 1e-3 fp32, 2e-2 fp16) and vs torch eager in float64;"
             " CPU: examples/cpp/run_model (installed CMake package), 4 threads, against the same reference" % torch.__version__,
             "", "| variant | GPU library via kiln.load vs CPU backend | vs torch eager (fp64) | CPU library via the C++ example |",
             "| --- | --- | --- | --- |"]
    for r in rows:
        lines.append("| %s | %s | %s | %s |" % (r["name"], r["gpu"], r["torch"], r["cpu"]))
    text = "\n".join(lines) + "\n"
    print(text)
    with open(args.out, "w") as f:
        f.write(text)
    failed = sum(1 for r in rows if not (r["gpu"].startswith("ok") and r["cpu"].startswith("ok")))
    print("%d of %d variants pass on both" % (len(rows) - failed, len(rows)))


if __name__ == "__main__":
    main()
