"""ncu target for the quant benchmark (run.sh): one call of each GEMV variant and M in RUNS (nvfp4,
bf16) on the two Gemma shapes, each checked against the fp64 reference first, so that ncu's
instruction counts and stall reasons describe correct kernels. Prints instructions per weight
from ncu's CSV when given --report (run.sh calls it twice: under ncu, then to summarise)."""
import argparse
import csv
import ctypes as C
import io
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))

SHAPES = [(16384, 2048), (2048, 16384)]
RUNS = [("8", 1), ("9", 1), ("9", 4), ("9", 16), ("5", 4)]  # (variant, M)
if os.environ.get("KILN_PROFILE_RUNS"):  # e.g. "8:1,10:1": other variants and M; "g4:51": GEMM variant 4
    RUNS = [(r.split(":")[0], int(r.split(":")[1])) for r in os.environ["KILN_PROFILE_RUNS"].split(",")]


def run(lib_path):
    import torch
    import kiln_quant as kq
    dev = torch.device("cuda")
    lib = C.CDLL(lib_path)
    ws = torch.empty(1 << 20, dtype=torch.uint8, device=dev)
    for (n, k) in SHAPES:
        w = torch.randn(n, k, device=dev) * 0.02
        q = kq.quantize(w, "nvfp4")
        kw = kq.KernelWeight(q)
        for v, m in RUNS:
            os.environ["KILN_QUANT_GEMM_VARIANT" if v.startswith("g") else "KILN_QUANT_GEMV_VARIANT"] = v.lstrip("g")
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            y = torch.full((m, n), float("nan"), device=dev, dtype=torch.bfloat16)
            kq.Call(lib, "w4_linear_nvfp4_bf16", [x] + kw.args() + [y], ws)()
            torch.cuda.synchronize()
            ref = x.double() @ q.dequant().double().T
            err = ((y.double() - ref).norm() / ref.norm()).item()
            print(f"profile: {n}x{k} variant {v} M={m}: rel err {err:.2e}{'' if err < 8e-3 else '  FAIL'}", flush=True)


def report(csv_path, out):
    """Rows of `ncu --csv --page raw`: one per kernel launch, in launch order."""
    text = open(csv_path).read()
    start = text.find('"ID"')
    rows = list(csv.DictReader(io.StringIO(text[start:])))
    rows = [r for r in rows if r.get("Kernel Name", "").startswith(("w4_gemv", "void kiln", "void w4")) or "w4_gemv" in r.get("Kernel Name", "")
            or "w4_wgmma" in r.get("Kernel Name", "")]
    lines = ["| shape | variant, M | kernel | µs (ncu) | DRAM read MB | warp inst / weight | thread inst / weight | issue active % | tensor pipe % | top stalls (warp cycles per issued inst) |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    labels = [(n, k, f"{v}, M={m}") for (n, k) in SHAPES for v, m in RUNS]
    for (n, k, v), r in zip(labels, rows):
        def num(key):
            try:
                return float(r.get(key, "nan").replace(",", ""))
            except ValueError:
                return float("nan")
        weights = n * k
        stalls = sorted(((num(key), key.replace("smsp__average_warps_issue_stalled_", "").replace("_per_issue_active.ratio", ""))
                         for key in r if key.startswith("smsp__average_warps_issue_stalled_") and key.endswith("_per_issue_active.ratio")), reverse=True)
        top = ", ".join(f"{name} {val:.1f}" for val, name in stalls[:5] if val == val)
        name = r.get("Kernel Name", "")[:40]
        t = num("gpu__time_duration.sum")
        lines.append(f"| {n}×{k} | {v} | {name} | {t / 1e3:.2f} | {num('dram__bytes_read.sum') / 1e6:.1f} | "
                     f"{32 * num('smsp__inst_executed.sum') / weights:.2f} | {num('smsp__thread_inst_executed.sum') / weights:.2f} | "
                     f"{num('smsp__issue_active.avg.pct_of_peak_sustained_active'):.0f} | "
                     f"{num('sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active'):.0f} | {top} |")
    open(out, "w").write("\n".join(lines) + "\n")
    print("\n".join(lines))


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib")
    ap.add_argument("--report")
    ap.add_argument("--out")
    a = ap.parse_args()
    if a.report:
        report(a.report, a.out)
    else:
        run(a.lib)
