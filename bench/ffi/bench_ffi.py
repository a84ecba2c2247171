"""Host time per call of a kiln function from Python, against its peers, on one GPU.

Rows (each: 3 float32 tensors of 1024 elements on the GPU, one 1-thread kernel launch per call
unless said otherwise):
  kiln.load   launch3 with torch tensors (DLPack C exchange API, torch's current stream)
  kiln.load   validate3 with torch tensors: adapter + validation, no launch
  kiln.load   launch3 with CuPy arrays (__dlpack__ path, CuPy's current stream)
  tvm_ffi     launch3 / validate3 through tvm_ffi.load_module (when apache-tvm-ffi imports)
  CuPy        RawKernel with 3 arguments (the same kernel body)
  torch       torch.add(a, b, out=c)
  ctypes      bench_launch_raw(a, b, c, stream): 3 raw pointers, no checks
Method: every row is checked for its result first; then calls are timed in batches of BATCH
(synchronized between batches, outside the timed region, so the launch queue never fills and the
number is host time), REPEATS batches, reporting the median and the minimum per call.
Usage: python3 bench/ffi/bench_ffi.py --library libkiln_bench.so --out DIR [--commit SHA]
"""
import argparse
import ctypes
import datetime
import os
import platform
import statistics
import sys
import time

import torch

BATCH = 200
REPEATS = 300


def time_per_call(fn, sync):
    for _ in range(BATCH):  # warm-up
        fn()
    sync()
    samples = []
    for _ in range(REPEATS):
        t0 = time.perf_counter_ns()
        for _ in range(BATCH):
            fn()
        t1 = time.perf_counter_ns()
        samples.append((t1 - t0) / BATCH / 1000.0)
        sync()
    return statistics.median(samples), min(samples)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--library", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--commit", default="unknown")
    p.add_argument("--command", default=" ".join(sys.argv))
    args = p.parse_args()

    import kiln

    n = 1024
    dev = torch.device("cuda")
    a = torch.full((n,), 1.0, device=dev)
    b = torch.full((n,), 2.0, device=dev)
    c = torch.zeros(n, device=dev)
    sync = torch.cuda.synchronize
    rows = []  # (what, peer of, median, min, note)

    def check(name, cond):
        if not cond:
            raise SystemExit(f"correctness check failed: {name}")

    lib = kiln.load(args.library)
    c.zero_(); lib.launch3(a, b, c); sync(); check("kiln launch3 torch", c[0].item() == 3.0)
    # Runs on torch's current stream: a side stream's work is ordered before a read on it.
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        c.zero_(); lib.launch3(a, b, c); r = c[0].item()
    check("kiln launch3 on torch's current stream", r == 3.0)
    try:
        lib.launch3(a, b, c.double())
        check("kiln rejects float64", False)
    except TypeError as e:
        check("kiln message", "c.dtype is float64, expected float32" in str(e))
    rows.append(("kiln.load: launch3(torch ×3)", *time_per_call(lambda: lib.launch3(a, b, c), sync),
                 "DLPack C exchange API, torch current stream"))
    rows.append(("kiln.load: validate3(torch ×3), no launch", *time_per_call(lambda: lib.validate3(a, b, c), sync),
                 "validation + dispatch only"))
    f = lib.launch3
    rows.append(("kiln.load: launch3 via local (no attribute lookup)", *time_per_call(lambda: f(a, b, c), sync), ""))

    try:
        import cupy
        ca, cb, cc = cupy.full(n, 1, cupy.float32), cupy.full(n, 2, cupy.float32), cupy.zeros(n, cupy.float32)
        lib.launch3(ca, cb, cc); cupy.cuda.Device().synchronize(); check("kiln launch3 cupy", float(cc[0]) == 3.0)
        rows.append(("kiln.load: launch3(CuPy ×3)", *time_per_call(lambda: lib.launch3(ca, cb, cc), sync),
                     "__dlpack__ path, CuPy current stream"))
        kernel = cupy.RawKernel(r'''extern "C" __global__ void first_sum(const float* a, const float* b, float* c, long long n) {
            if (n > 0) c[0] = a[0] + b[0]; }''', "first_sum")
        nn = cupy.int64(n)
        cc[0] = 0; kernel((1,), (1,), (ca, cb, cc, nn)); cupy.cuda.Device().synchronize(); check("cupy", float(cc[0]) == 3.0)
        rows.append(("CuPy RawKernel (3 arrays + n)", *time_per_call(lambda: kernel((1,), (1,), (ca, cb, cc, nn)), sync), "peer"))
    except ImportError as e:
        rows.append(("CuPy", float("nan"), float("nan"), f"skipped: {e}"))

    try:
        import tvm_ffi
        mod = tvm_ffi.load_module(args.library)
        c.zero_(); mod.launch3(a, b, c); sync(); check("tvm_ffi launch3", c[0].item() == 3.0)
        rows.append(("tvm_ffi.load_module: launch3(torch ×3)", *time_per_call(lambda: mod.launch3(a, b, c), sync),
                     f"apache-tvm-ffi {getattr(tvm_ffi, '__version__', '?')}"))
        rows.append(("tvm_ffi.load_module: validate3(torch ×3), no launch",
                     *time_per_call(lambda: mod.validate3(a, b, c), sync), ""))
    except ImportError as e:
        rows.append(("tvm_ffi.load_module", float("nan"), float("nan"), f"skipped: {e}"))

    c.zero_(); torch.add(a, b, out=c); sync(); check("torch.add", c[0].item() == 3.0)
    rows.append(("torch.add(a, b, out=c)", *time_per_call(lambda: torch.add(a, b, out=c), sync), "peer"))

    raw = ctypes.CDLL(args.library)
    raw.bench_launch_raw.argtypes = [ctypes.c_void_p] * 4
    raw.bench_launch_raw.restype = ctypes.c_int
    pa, pb, pc = a.data_ptr(), b.data_ptr(), c.data_ptr()
    c.zero_(); raw.bench_launch_raw(pa, pb, pc, None); sync(); check("ctypes", c[0].item() == 3.0)
    rows.append(("ctypes: bench_launch_raw(3 pointers, stream)",
                 *time_per_call(lambda: raw.bench_launch_raw(pa, pb, pc, None), sync), "no tensors, no checks"))
    rows.append(("torch: a.__dlpack__() alone", *time_per_call(lambda: a.__dlpack__(), sync), "for reference"))

    by = {r[0]: r for r in rows}
    kiln_full = by["kiln.load: launch3(torch ×3)"][1]
    device = torch.cuda.get_device_name().replace(" ", "_")
    date = datetime.date.today().isoformat()
    lines = [f"# FFI call overhead: kiln vs peers", "",
             f"- device: {torch.cuda.get_device_name()} ({platform.node()})",
             f"- date: {date}", f"- commit: {args.commit}",
             f"- command: `{args.command}`",
             f"- python {platform.python_version()}, torch {torch.__version__}",
             f"- method: host time per call, batches of {BATCH} calls (synchronized between batches, "
             f"untimed), {REPEATS} batches; median and minimum per call", "",
             "| call | median µs/call | min µs/call | ratio to kiln launch3 (median) | note |",
             "| --- | ---: | ---: | ---: | --- |"]
    for what, med, mn, note in rows:
        ratio = med / kiln_full if med == med else float("nan")
        lines.append(f"| {what} | {med:.3f} | {mn:.3f} | {ratio:.2f} | {note} |")
    v = by["kiln.load: validate3(torch ×3), no launch"][1]
    goals = ["", f"Goal 1, validation + dispatch ≤ 0.5 µs for 3 tensors: {v:.3f} µs → {'met' if v <= 0.5 else 'NOT met'}"]
    for peer in ("CuPy RawKernel (3 arrays + n)", "torch.add(a, b, out=c)"):
        if peer in by and by[peer][1] == by[peer][1]:
            goals.append(f"Goal 2, full call faster than {peer}: kiln {kiln_full:.3f} µs vs {by[peer][1]:.3f} µs → "
                         f"{'met' if kiln_full < by[peer][1] else 'NOT met'}")
    lines += goals
    text = "\n".join(lines) + "\n"
    print(text)
    os.makedirs(args.out, exist_ok=True)
    with open(os.path.join(args.out, f"ffi_{device}_{date}.md"), "w") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
