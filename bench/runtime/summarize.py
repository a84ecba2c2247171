"""Writes runtime_<device>_<date>.md from device_run.sh's outputs (bench_runtime.txt, ncu.csv,
torch.json). Usage: summarize.py OUT DEVICE COMMIT [DTYPE]"""
import csv
import datetime
import json
import pathlib
import sys

out, device, commit = pathlib.Path(sys.argv[1]), sys.argv[2], sys.argv[3]
dtype = sys.argv[4] if len(sys.argv) > 4 else "float32"
short = {"float32": "fp32", "float16": "fp16"}.get(dtype, dtype)
date = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d")
bench = (out / "bench_runtime.txt").read_text() if (out / "bench_runtime.txt").exists() else ""
result = {}
for line in bench.splitlines():
    if line.startswith("RESULT "):
        result = json.loads(line[7:])
kernels = []
ncu = out / "ncu.csv"
if ncu.exists():
    rows = [r for r in csv.reader(l for l in ncu.read_text().splitlines() if l.startswith('"'))]
    if rows:
        head = rows[0]
        for r in rows[1:]:
            d = dict(zip(head, r))
            if d.get("Metric Name") == "gpu__time_duration.sum":
                v = float(d["Metric Value"].replace(",", ""))
                unit = d.get("Metric Unit", "ns")
                kernels.append((d.get("Kernel Name", "?")[:60], v / 1000 if unit == "nsecond" or unit == "ns" else
                                v if unit in ("usecond", "us") else v * 1000))
torch_r = json.loads((out / "torch.json").read_text()) if (out / "torch.json").exists() else {}
ksum = sum(k[1] for k in kernels)
lines = [f"# kiln model runtime on the GPU: Gemma MLP block (2048 -> 16384 -> 2048, {short}, M=1)", "",
         f"- device: {device}", f"- date: {date}", f"- commit: {commit}",
         f"- command: `DTYPE={dtype} bash .carry/runtime/bench/device_run.sh` (bench/runtime/device_run.sh: torch.onnx.export opset 17, "
         "`kiln compile --model --target sm_90`, bench_runtime, ncu --clock-control none, torch.compile)", ""]
lines += ["## Checks", "", "```", *[l for l in bench.splitlines() if l.startswith(("check", "thread", "model", "load"))], "```", ""]
if result:
    lines += ["## kiln: run overhead", "", "| measure | us |", "| --- | ---: |",
              f"| kernels' own time, sum over {len(kernels)} kernels (ncu gpu__time_duration) | {ksum:.2f} |",
              f"| Session::run, plain (validation + one launch per kernel), per run | {result['plain_run_us']:.2f} |",
              f"| Session::run with CUDA-graph replay, per run (back to back) | {result['graph_replay_us']:.2f} |",
              f"| **graph replay - kernel sum (overhead; goal <= 5)** | **{result['graph_replay_us'] - ksum:.2f}** |",
              f"| host time to enqueue one replay | {result['replay_host_enqueue_us']:.2f} |", ""]
    lines += [f"Threads: {result['threads']} threads, each its own Session and stream, {result['runs_per_thread']} "
              f"graph replays each, results checked: {'ok' if result['threads_ok'] else 'FAILED'} "
              f"({result['threads_wall_ms']:.1f} ms wall).", "",
              f"Memory (runtime's report): weights {result['weights_bytes']} B, arena {result['arena_bytes']} B "
              f"(largest live set {result['live_bytes']} B), inputs+outputs {result['io_bytes']} B.", ""]
if torch_r:
    tk = torch_r["compiled_kernel_sum_us"]
    lines += ["## Peer: torch.compile(mode=\"reduce-overhead\") of the same block, same run", "",
              "| measure | us |", "| --- | ---: |",
              f"| eager, per call | {torch_r['eager_us']:.2f} |",
              f"| reduce-overhead, per call | {torch_r['compiled_reduce_overhead_us']:.2f} |",
              f"| its kernels' sum (torch.profiler) | {tk:.2f} |",
              f"| per call - kernel sum | {torch_r['compiled_reduce_overhead_us'] - tk:.2f} |", ""]
    if result:
        lines += [f"Ratio kiln graph replay / torch reduce-overhead per call: "
                  f"{result['graph_replay_us'] / torch_r['compiled_reduce_overhead_us']:.2f} "
                  f"(this ratio also holds the kernels' quality; the overhead rows are the comparison this issue "
                  f"asks for). torch {torch_r['torch']}.", ""]
if kernels:
    lines += ["## Kernels (ncu)", "", "| kernel | us |", "| --- | ---: |", *[f"| `{k}` | {t:.2f} |" for k, t in kernels], ""]
path = out / f"runtime_{device.replace(' ', '_')}_{date}_{short}.md"
path.write_text("\n".join(lines))
print(path.read_text())
