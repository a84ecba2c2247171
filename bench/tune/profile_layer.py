#!/usr/bin/env python3
"""Where the PyTorch-exported Gemma layer's time goes, kiln against torch.compile (one GPU call):

    python3 profile_layer.py --kiln KILN --out DIR [--tokens 16,816] [--records R] [--reuse-built] [--kiln-only]

For each token count: exports the layer (gemma_layer.py), builds it with `kiln compile --target
sm_90` (all token counts at once), checks the library against the PyTorch layer in float32 (NaN-
poisoned output), times kiln, eager and torch.compile by CUDA-graph replay of back-to-back calls,
then prints each one's kernels per call, largest first (CUPTI through torch.profiler). Writes
DIR/profile_layer.md.
"""
import argparse
import copy
import importlib.util
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
                    help="bench/contraction/bench.py (KilnModel, graph_time_us, profile_kernels)")
    ap.add_argument("--tokens", default="16")
    ap.add_argument("--records", help="kiln compile --records (default: the default schedules)")
    ap.add_argument("--work", default="/tmp/profile_layer")
    ap.add_argument("--reuse-built", action="store_true", help="time the libraries an earlier run left in --work (no compile)")
    ap.add_argument("--kiln-only", action="store_true", help="time kiln only: no eager, torch.compile or profiles (an A/B of kiln)")
    ap.add_argument("--tag", default="", help="suffix of the results file: profile_layer<tag>.md")
    a = ap.parse_args()
    import torch
    gemma = load("gemma_layer", os.path.join(HERE, "gemma_layer.py"))
    bench = load("contraction_bench", a.bench)
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    out_md = os.path.join(a.out, "profile_layer%s.md" % a.tag)
    lines = ["# Gemma layer (fp16), kiln vs torch.compile, %s" % torch.cuda.get_device_name(), ""]

    def note(line):
        lines.append(line)
        print(line, flush=True)
        open(out_md, "w").write("\n".join(lines) + "\n")

    t0 = time.time()
    layers, procs = {}, {}
    for t in [int(v) for v in a.tokens.split(",")]:
        model = os.path.join(a.work, "layer_%d.onnx" % t)
        layers[t] = gemma.build_layer(t, "float16")
        if a.reuse_built:
            procs[t] = (None, model)  # the library an earlier run built
            continue
        gemma.export(model, t, "float16", layers[t])
        cmd = [a.kiln, "compile", model, "-o", os.path.join(a.work, "lib_%d" % t), "--target", "sm_90"]
        if a.records:
            cmd += ["--records", a.records]
        procs[t] = (subprocess.Popen(cmd, stdout=open(os.path.join(a.work, "compile_%d.log" % t), "w"),
                                     stderr=subprocess.STDOUT), model)
    for t, (p, model) in procs.items():
        if p:
            p.wait()
            note("- %d tokens: kiln compile exit %d after %.0f s" % (t, p.returncode, time.time() - t0))
    for t, (p, model) in procs.items():
        if p and p.returncode != 0:
            note("```\n" + open(os.path.join(a.work, "compile_%d.log" % t)).read()[-1500:] + "\n```")
            continue
        layer = layers[t]
        k = bench.KilnModel(os.path.join(a.work, "lib_%d" % t), model)
        torch.manual_seed(1)
        x = torch.randn(1, t, 2048, device="cuda", dtype=torch.float16)
        with torch.no_grad():
            ref = copy.deepcopy(layer).float()(x.float())
            out = torch.full(ref.shape, float("nan"), device="cuda", dtype=torch.float16)
            fn = k.bind({"x": x}, [out])
            fn()
            torch.cuda.synchronize()
            err = bench.rel_err(out, ref)
            kus = bench.graph_time_us(fn)
            if a.kiln_only:
                switches = " ".join("%s=%s" % kv for kv in sorted(os.environ.items())
                                    if kv[0].startswith("KILN_") and kv[0] != "KILN_COMMIT")
                note("- %d tokens: relative error %.2e vs PyTorch fp32 (%d NaN); kiln %.1f us (%s)" % (
                    t, err, int(torch.isnan(out).sum()), kus, switches or "no KILN_ switches set"))
                continue
            eager = bench.graph_time_us(lambda: layer(x))
            compiled = torch.compile(layer)
            comp = bench.graph_time_us(lambda: compiled(x))
        note("- %d tokens: relative error %.2e vs PyTorch fp32 (%d NaN); kiln %.1f us, eager %.1f us, "
             "torch.compile %.1f us (kiln / torch.compile %.2fx)" % (
                 t, err, int(torch.isnan(out).sum()), kus, eager, comp, comp / kus))
        import io
        from contextlib import redirect_stdout
        for label, f in (("kiln", fn), ("torch.compile", lambda: compiled(x))):
            buf = io.StringIO()
            with redirect_stdout(buf), torch.no_grad():
                bench.profile_kernels("%d tokens %s" % (t, label), f, top=40)
            note("```\n" + buf.getvalue().rstrip() + "\n```")
    return 0


if __name__ == "__main__":
    sys.exit(main())
