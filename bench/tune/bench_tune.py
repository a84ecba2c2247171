#!/usr/bin/env python3
"""After `kiln tune` (issue 12): the tuned kernels against their default schedules, torch.compile
of the same op and the device's copy bandwidth, all measured in this run on this GPU.

For each model: `kiln compile` twice (default schedules; tuned, --records), each library called
through the kernel contract (kiln_<name> over DLTensors, ctypes). Inputs are fresh random data,
the outputs are poisoned with NaN and checked against PyTorch in float32 before anything is timed.
Timing: CUDA events around each call, the L2 flushed before it (a write of 4x the L2's size),
median of 30 after 5 warm-ups; the same for torch.compile (default mode) and eager.
Ceiling: a device-to-device copy of the kernel's bytes (input read + output written), timed the
same way, and the copy bandwidth of a 1 GiB copy.

Usage: bench_tune.py --kiln KILN [--records RECORDS] --out DIR [--tuned-args "ARGS"] MODEL.onnx...
--tuned-args: more `kiln compile` arguments for the "tuned" build (e.g. --float-intermediates; without
--records, "tuned" is the default schedules plus those arguments).
"""
import argparse
import importlib.util
import datetime
import json
import os
import subprocess
import sys

import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# The kernel contract through ctypes (kiln_<name> over DLTensors), shared with the core benchmark.
_core = _load("kiln_core_bench", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "core", "bench.py"))


TORCH_DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def KilnFunction(library, name, tensors):
    fn = _core.KilnFunction(library, name)
    fn.prepare(tensors)  # binds the tensors; 64 MB of workspace
    return fn


FLUSH = None


def time_us(fn, repeats=30, warmup=5):
    global FLUSH
    if FLUSH is None:
        l2 = getattr(torch.cuda.get_device_properties(0), "L2_cache_size", 64 << 20)
        FLUSH = torch.empty(max(4 * l2, 256 << 20), dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        FLUSH.fill_(1)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1000.0)
    times.sort()
    return times[len(times) // 2], times[0], times[int(0.9 * (len(times) - 1))]


def torch_op(graph_name, inits, cols):
    if graph_name == "softmax":
        return lambda x: torch.softmax(x, dim=-1)
    g, b = inits["gamma"], inits["beta"]
    return lambda x: F.gelu(F.layer_norm(x, (cols,), g, b, 1e-5))


def compile_kiln(kiln, model, out_dir, records, extra=()):
    env = dict(os.environ)
    cmd = [kiln, "compile", model, "-o", out_dir, "--target", "sm_90"] + list(extra)
    if records:
        cmd += ["--records", records]
    else:
        env["KILN_RECORDS"] = "/nonexistent-kiln-records"  # the default schedules
    return subprocess.Popen(cmd, stdout=open(out_dir + ".log", "w"), stderr=subprocess.STDOUT, env=env)


def tuner_numbers(records, kernel, shape_text):
    """The tuner's own default and best medians for a kernel of this shape (from the records)."""
    default = best = None
    trials = 0
    if not os.path.exists(records):
        return default, best, trials
    defaults = {"vector_bytes": 16, "row_threads": 0, "row_cache_bytes": 256, "threads_per_block": 256,
                "column_threads": 32, "column_row_threads": 0}
    for line in open(records):
        r = json.loads(line)
        if r["target"] != "cuda" or r["kernel"] != kernel or not r["shape"].startswith(shape_text + "-") and not r["shape"].startswith(shape_text + ","):
            continue
        trials += 1
        if r["status"] != "ok":
            continue
        if all(defaults.get(k) == v for k, v in r["knobs"].items()):
            default = r["median_us"] if default is None else min(default, r["median_us"])
        best = r["median_us"] if best is None else min(best, r["median_us"])
    return default, best, trials


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--records", default="")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/kiln-tune-bench")
    ap.add_argument("--tuned-args", default="", help="more kiln compile arguments for the tuned build")
    ap.add_argument("models", nargs="+")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    jobs = []
    for m in a.models:
        stem = os.path.basename(m)[:-5]
        for kind in ("default", "tuned"):
            d = os.path.join(a.work, stem + "_" + kind)
            jobs.append((m, kind, d, compile_kiln(a.kiln, m, d, a.records if kind == "tuned" else None,
                                                  a.tuned_args.split() if kind == "tuned" else ())))
    for _, _, _, p in jobs:
        p.wait()

    device = torch.cuda.get_device_name()
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    copy_us = time_us(lambda: dst.copy_(src))[0]
    bandwidth = 2 * src.numel() / (copy_us * 1e-6) / 1e9
    del src, dst
    rows = []
    for m in a.models:
        stem = os.path.basename(m)[:-5]
        model = onnx.load(m)
        graph_name = model.graph.name
        inits = {i.name: torch.from_numpy(numpy_helper.to_array(i).copy()).cuda() for i in model.graph.initializer}
        shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        dtype_name = onnx.helper.tensor_dtype_to_np_dtype(model.graph.input[0].type.tensor_type.elem_type).name
        dtype = TORCH_DTYPES[dtype_name]
        torch.manual_seed(1)
        x = torch.randn(*shape, device="cuda", dtype=dtype) * 2
        op = torch_op(graph_name, inits, shape[-1])
        ref = op(x.float()) if graph_name == "softmax" else F.gelu(F.layer_norm(
            x.float(), (shape[-1],), inits["gamma"].float(), inits["beta"].float(), 1e-5))
        bytes_moved = 2 * x.numel() * x.element_size()
        results = {}
        for kind in ("default", "tuned"):
            d = os.path.join(a.work, stem + "_" + kind)
            lib = os.path.join(d, "lib%s.so" % stem)
            if not os.path.exists(lib):
                results[kind] = ("compile failed: " + open(d + ".log").read()[-300:].replace("\n", " "), None)
                continue
            sig = json.load(open(os.path.join(d, graph_name + ".json")))
            out = torch.empty(*shape, device="cuda", dtype=dtype)
            tensors = []
            for p in sig["params"]:
                if p["is_output"]:
                    tensors.append(out)
                elif p["name"] in inits:
                    tensors.append(inits[p["name"]])
                else:
                    tensors.append(x)
            fn = KilnFunction(lib, graph_name, tensors)
            out.fill_(float("nan"))
            fn()
            torch.cuda.synchronize()
            err = (out.float() - ref).abs().max().item()
            ok = not torch.isnan(out).any().item() and err <= 2e-2
            check = ("ok (max err %.1e)" % err) if ok else ("FAIL (max err %.2e, NaN %d)" % (err, int(torch.isnan(out).sum())))
            results[kind] = (check, time_us(fn) if ok else None)
            sched = open(os.path.join(d, "schedules.md")).read().strip().splitlines()[-1]
            results[kind + "_schedule"] = sched
        compiled = torch.compile(op)
        compiled(x)
        torch.cuda.synchronize()
        tc = time_us(lambda: compiled(x))
        eager = time_us(lambda: op(x))
        xs, ys = x.clone(), torch.empty_like(x)
        copy_same = time_us(lambda: ys.copy_(xs))
        tuner_default, tuner_best, trials = tuner_numbers(a.records, graph_name, "x".join(str(s) for s in shape))
        rows.append(dict(model=stem, bytes=bytes_moved, results=results, tc=tc, eager=eager, copy=copy_same,
                         tuner_default=tuner_default, tuner_best=tuner_best, trials=trials))

    commit = os.environ.get("KILN_COMMIT", "unknown")
    date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    lines = ["# kiln tune on %s, %s" % (device, date), "",
             "- device: %s; kiln commit: %s; torch %s" % (device, commit, torch.__version__),
             "- command: `%s`" % " ".join(sys.argv),
             "- copy bandwidth (1 GiB device-to-device, read + write): **%.0f GB/s**" % bandwidth,
             "- times: median of 30 CUDA-event timings after 5 warm-ups, L2 flushed before each; (min / p90) in brackets",
             "- kiln default / tuned: `kiln compile` without / with `--records`, called through kiln_<name>; outputs"
             " checked against PyTorch float32 before timing",
             "", "| model | check default / tuned | kiln default us | kiln tuned us | tuned / default | tuned GB/s | % of copy bw"
             " | copy of same bytes us | torch.compile us | tuned vs torch.compile | eager us | tuner: default / best us (trials) |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    fmt = lambda t: "%.1f (%.1f / %.1f)" % t if t else "-"
    for r in rows:
        dflt, tuned = r["results"].get("default", ("-", None)), r["results"].get("tuned", ("-", None))
        tu = tuned[1][0] if tuned[1] else None
        du = dflt[1][0] if dflt[1] else None
        gbs = r["bytes"] / (tu * 1e-6) / 1e9 if tu else 0
        lines.append("| %s | %s / %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s / %s (%d) |" % (
            r["model"], dflt[0], tuned[0], fmt(dflt[1]), fmt(tuned[1]),
            "%.2fx" % (du / tu) if du and tu else "-", "%.0f" % gbs if tu else "-",
            "%.0f%%" % (100 * gbs / bandwidth) if tu else "-", fmt(r["copy"]), fmt(r["tc"]),
            "%.2fx" % (r["tc"][0] / tu) if tu else "-", fmt(r["eager"]),
            "%.1f" % r["tuner_default"] if r["tuner_default"] else "-",
            "%.1f" % r["tuner_best"] if r["tuner_best"] else "-", r["trials"]))
    lines += ["", "Schedules used by the tuned build (from its schedules.md):", ""]
    for r in rows:
        lines.append("- %s: %s" % (r["model"], r["results"].get("tuned_schedule", "-")))
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "bench_tune.md"), "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
