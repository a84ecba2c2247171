#!/usr/bin/env python3
"""Is kiln's CUDA code for the PyTorch-exported Gemma layer correct? (issue 12's tuning run found
every candidate writing NaN.)  One GPU call:

    python3 check_layer.py --kiln KILN --out DIR [--tokens 16]

exports the layer (gemma_layer.py), builds it with `kiln compile --target sm_90` (one translation
unit) and, at the same time, runs `kiln tune --trials 1` (the default schedule built as a tuning
candidate: template calls in units of their own, checked against the CPU backend); then calls the
compiled library on the GPU (bench/contraction's KilnModel) and compares it with the PyTorch layer
in float32. Prints and writes DIR/check_layer.md.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "contraction", "bench.py"),
                    help="bench/contraction/bench.py (its KilnModel)")
    ap.add_argument("--tokens", type=int, default=16)
    a = ap.parse_args()
    import torch
    gemma = load("gemma_layer", os.path.join(HERE, "gemma_layer.py"))
    bench = load("contraction_bench", a.bench)
    os.makedirs(a.out, exist_ok=True)
    model = "/tmp/check_layer.onnx"
    layer = gemma.build_layer(a.tokens, "float16")
    gemma.export(model, a.tokens, "float16", layer)
    lines = ["# kiln on a PyTorch-exported Gemma layer (%d tokens, fp16), %s" % (a.tokens, torch.cuda.get_device_name()), ""]
    t0 = time.time()
    out_md = os.path.join(a.out, "check_layer.md")

    def note(line):
        lines.append(line)
        print(line, flush=True)
        open(out_md, "w").write("\n".join(lines) + "\n")

    comp = subprocess.Popen([a.kiln, "compile", model, "-o", "/tmp/check_lib", "--target", "sm_90"],
                            stdout=open("/tmp/check_compile.log", "w"), stderr=subprocess.STDOUT)
    tune = subprocess.Popen([a.kiln, "tune", model, "--target", "sm_90", "--trials", "1", "--batch", "1", "-o",
                             "/tmp/check_tune.jsonl", "--work-dir", "/tmp/check_tune", "--worker-timeout", "170"],
                            stdout=open("/tmp/check_tune.log", "w"), stderr=subprocess.STDOUT)
    comp.wait()
    note("- kiln compile: exit %d after %.0f s" % (comp.returncode, time.time() - t0))
    if comp.returncode == 0:
        k = bench.KilnModel("/tmp/check_lib", model)
        torch.manual_seed(1)
        x = torch.randn(1, a.tokens, 2048, device="cuda", dtype=torch.float16)
        with torch.no_grad():
            ref = __import__("copy").deepcopy(layer).float()(x.float())
            eager = layer(x)
        out = torch.empty(ref.shape, device="cuda", dtype=torch.float16)
        out.fill_(float("nan"))
        fn = k.bind({"x": x}, [out])
        fn()
        torch.cuda.synchronize()
        nan = int(torch.isnan(out).sum())
        note("- kiln compile library on the GPU vs PyTorch fp32: %d NaN of %d; relative error %.2e (torch fp16 eager: "
             "%.2e); first outputs kiln %s, torch %s" % (
                 nan, out.numel(), bench.rel_err(out.nan_to_num(), ref), bench.rel_err(eager, ref),
                 [round(v, 4) for v in out.flatten()[:4].tolist()], [round(v, 4) for v in ref.flatten()[:4].tolist()]))
    else:
        note("```\n" + open("/tmp/check_compile.log").read()[-1500:] + "\n```")
    tune.wait()
    records = [json.loads(l) for l in open("/tmp/check_tune.jsonl")] if os.path.exists("/tmp/check_tune.jsonl") else []
    for r in records:
        note("- tune candidate (template units, vs the CPU backend): %s %s %s (%.0f s)" % (
            r.get("status"), r.get("median_us", ""), r.get("error", "")[:300], time.time() - t0))
    if not records:
        note("- tune candidate: no record; tune said: %s" % open("/tmp/check_tune.log").read()[-600:])
    return 0


if __name__ == "__main__":
    sys.exit(main())
