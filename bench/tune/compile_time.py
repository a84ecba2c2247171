#!/usr/bin/env python3
"""How long `kiln compile` takes on a PyTorch-exported Gemma-2B decoder layer, per kiln build, and
whether what it builds is right and as fast. One GPU call:

    python3 compile_time.py --kiln old=PATH --kiln new=PATH --tokens 16,816 --out DIR

exports the layer (gemma_layer.py, fp16, fixed shape) for each token count, runs every
`kiln compile --target sm_90` at once (one process each; the wall time of each is its own), then
calls each library on the GPU (bench/contraction's KilnModel) on random input, compares it with the
PyTorch layer in float32 (unwritten outputs are NaN) and times it (CUDA graph of back-to-back calls).
Writes DIR/compile_time.md.
"""
import argparse
import copy
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from check_layer import load  # noqa: E402  (loads a script of this folder or bench/ as a module)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kiln", action="append", required=True, help="NAME=PATH of a kiln binary (repeatable)")
    ap.add_argument("--tokens", default="16,816")
    ap.add_argument("--out", required=True)
    ap.add_argument("--bench", default=os.path.join(HERE, "..", "contraction", "bench.py"),
                    help="bench/contraction/bench.py (its KilnModel)")
    a = ap.parse_args()
    import torch
    gemma = load("gemma_layer", os.path.join(HERE, "gemma_layer.py"))
    bench = load("contraction_bench", a.bench)
    os.makedirs(a.out, exist_ok=True)
    kilns = [k.split("=", 1) for k in a.kiln]
    tokens = [int(t) for t in a.tokens.split(",")]
    layers = {}
    for t in tokens:
        layers[t] = gemma.build_layer(t, "float16")
        gemma.export("/tmp/ct_%d.onnx" % t, t, "float16", layers[t])
    jobs = {}
    for name, path in kilns:
        for t in tokens:
            out_dir = "/tmp/ct_%s_%d" % (name, t)
            log = open(out_dir + ".log", "w")
            jobs[(name, t)] = (time.time(), subprocess.Popen([path, "compile", "/tmp/ct_%d.onnx" % t, "-o", out_dir,
                                                              "--target", "sm_90"], stdout=log, stderr=subprocess.STDOUT))
    wall = {}
    while len(wall) < len(jobs):
        for key, (t0, p) in jobs.items():
            if key not in wall and p.poll() is not None:
                wall[key] = (time.time() - t0, p.returncode)
                print("kiln compile %s, %d tokens: exit %d after %.1f s" % (key[0], key[1], p.returncode, wall[key][0]), flush=True)
        time.sleep(0.2)
    lines = ["# kiln compile of a PyTorch-exported Gemma-2B layer (fp16), %s, %d cores" % (
        torch.cuda.get_device_name(), os.cpu_count()), "",
        "All compiles ran at once, one process each. Check: the library on random input vs the PyTorch layer in float32 "
        "(relative L2 error); time: CUDA graph of 20 back-to-back calls, median of 7.", "",
        "| kiln | tokens | compile wall (s) | exit | check | time (us) |", "|---|---:|---:|---:|---|---:|"]
    for name, _ in kilns:
        for t in tokens:
            seconds, rc = wall[(name, t)]
            check, us = "-", None
            if rc == 0:
                k = bench.KilnModel("/tmp/ct_%s_%d" % (name, t), "/tmp/ct_%d.onnx" % t)
                torch.manual_seed(t)
                x = torch.randn(1, t, 2048, device="cuda", dtype=torch.float16)
                with torch.no_grad():
                    ref = copy.deepcopy(layers[t]).float()(x.float())
                out = torch.empty(ref.shape, device="cuda", dtype=torch.float16)
                check, us = bench.check_and_time(k.bind({"x": x}, [out]), out, ref, 2e-2)
            else:
                check = "compile failed: " + open("/tmp/ct_%s_%d.log" % (name, t)).read()[-300:].replace("\n", " ")
            lines.append("| %s | %d | %.1f | %d | %s | %s |" % (name, t, seconds, rc, check, "%.1f" % us if us else "-"))
            print(lines[-1], flush=True)
    open(os.path.join(a.out, "compile_time.md"), "w").write("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
