"""The fused MLP layer at M = 1 (kernels/quant/w4_mlp_fused.cuh): correctness first, then the
Gemma-2B and action-expert MLP x18 chains against the two-kernel path and cuBLAS bf16.

  python3 bench/quant/mlp_fused.py --lib libkiln_quant.so [--out DIR] [--tag TAG]

1. Every format (NVFP4, MXFP4, INT4 groups 32/64/128), dtype (bf16, f16) and activation (geglu,
   swiglu) on shapes that take each features-per-CTA R (128, 64, 32): the fused layer against an
   fp64 reference of the dequantized weights, against the two-kernel path (the default;
   KILN_QUANT_MLP_FUSED=1 takes the fused kernel)
   and against itself (bitwise: the fused sum order is fixed).
2. The x18 chains replayed as one CUDA graph (programmatic dependent launches between layers that
   share one workspace): every layer's output against an eager fused call on the same input, then
   µs per 18 layers: fused, two-kernel, cuBLAS bf16 (ratio = cuBLAS / kiln).
"""
import argparse
import ctypes as C
import datetime
import os
import subprocess
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(__file__))
import kiln_quant as kq  # noqa: E402
from bench import copies_for, rel_err, time_calls  # noqa: E402

dev = torch.device("cuda")
lines = []
THREADS = ["1024", "512"]  # KILN_QUANT_MLP_FUSED_THREADS: threads per CTA of the fused kernel


def log(s=""):
    print(s, flush=True)
    lines.append(s)


def weights(n, k, seed):
    g = torch.Generator(device=dev).manual_seed(seed)
    return torch.randn(n, k, device=dev, generator=g) * 0.02


def path(lib):
    lib.kiln_w4_last_gemm_path.restype = C.c_char_p
    return lib.kiln_w4_last_gemm_path().decode()


def set_fused(on):
    os.environ["KILN_QUANT_MLP_FUSED"] = "1" if on else "0"


def mlp_ref(x, qg, qu, qd, act):
    xd = x.double()
    g, u = xd @ qg.dequant().double().T, xd @ qu.dequant().double().T
    hh = (F.gelu(g, approximate="tanh") if act == "geglu" else F.silu(g)) * u
    return hh @ qd.dequant().double().T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", required=True)
    ap.add_argument("--out", default=os.environ.get("OUT", "."))
    ap.add_argument("--tag", default="")
    ap.add_argument("--command", default="python3 bench/quant/mlp_fused.py")
    ap.add_argument("--profile", action="store_true", help="only launch one Gemma layer (nvfp4, bf16) twice per path, for ncu")
    args = ap.parse_args()
    lib = C.CDLL(args.lib)
    if args.profile:
        h, i = 2048, 16384
        qg, qu, qd = (kq.quantize(weights(n, k, seed), "nvfp4") for (n, k, seed) in ((i, h, 1), (i, h, 2), (h, i, 3)))
        gu, dn = kq.KernelWeight(qg, qu), kq.KernelWeight(qd)
        x = torch.randn(1, h, device=dev).to(torch.bfloat16)
        y = torch.empty(1, h, device=dev, dtype=torch.bfloat16)
        ws = torch.empty(64 << 20, dtype=torch.uint8, device=dev)
        for fused in (True, True, False, False):
            set_fused(fused)
            kq.Call(lib, "w4_mlp_nvfp4_bf16_geglu", [x] + gu.args() + dn.args() + [y], ws)()
        torch.cuda.synchronize()
        return
    props = torch.cuda.get_device_properties(0)
    commit = os.environ.get("KILN_COMMIT") or subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    log(f"# Fused MLP layer at M = 1 ({props.name}, {props.multi_processor_count} SMs)")
    log("")
    log(f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}")
    log(f"- commit: {commit}")
    log(f"- command: `{args.command}`")
    log(f"- torch {torch.__version__}, L2 {props.L2_cache_size >> 20} MB")
    log("")
    ok = True
    ws = torch.empty(256 << 20, dtype=torch.uint8, device=dev)

    log("")
    log("## Checks (one layer, M = 1, fresh random weights and x)")
    log("")
    worst = 0.0
    for (h, i, rr) in [(2048, 16384, 128), (3072, 8192, 64), (1024, 4096, 32)]:
        wg, wu, wd = weights(i, h, 11), weights(i, h, 12), weights(h, i, 13)
        for fmt, group in [("nvfp4", 16), ("mxfp4", 32), ("int4", 32), ("int4", 64), ("int4", 128)]:
            for dt, dname in [(torch.bfloat16, "bf16"), (torch.float16, "f16")]:
                qg, qu, qd = (kq.quantize(w, fmt, group=group, scale_dtype=dt) for w in (wg, wu, wd))  # INT4 scales in the activations' dtype
                gu, dn = kq.KernelWeight(qg, qu), kq.KernelWeight(qd)
                for act in ["geglu", "swiglu"]:
                    name = f"w4_mlp_{fmt}_{dname}_{act}"
                    x = torch.randn(1, h, device=dev).to(dt)
                    y_ref = mlp_ref(x, qg, qu, qd, act)
                    for threads in THREADS:
                        os.environ["KILN_QUANT_MLP_FUSED_THREADS"] = threads
                        ys = []
                        for fused in (True, True, False):
                            set_fused(fused)
                            y = torch.full((1, h), float("nan"), device=dev, dtype=dt)
                            kq.Call(lib, name, [x] + gu.args() + dn.args() + [y], ws)()
                            torch.cuda.synchronize()
                            ys.append((y, path(lib)))
                        (y1, p1), (y2, _), (y0, p0) = ys
                        e_ref, e_two = rel_err(y1, y_ref), rel_err(y1, y0.double())
                        same = torch.equal(y1.view(torch.int16), y2.view(torch.int16))
                        took = p1.startswith("fused")
                        good = e_ref < 1.5e-2 and e_two < 1e-2 and same and took and not p0.startswith("fused")
                        worst = max(worst, e_two)
                        ok &= good
                        log(f"- {h}->{i}->{h} (R = {rr}, {threads} threads) {name}{f' g{group}' if fmt == 'int4' else ''}: fused vs fp64 {e_ref:.2e}, "
                            f"vs two-kernel {e_two:.2e}, repeat {'bitwise equal' if same else 'DIFFERS'}; path: {p1!r}{'' if good else '  FAIL'}")
    set_fused(True)
    log("")

    log("## MLP x 18 layers at M = 1 (µs for 18 layers; one CUDA graph of the chain, PDL between layers)")
    log("")
    log("| MLP | bf16 cuBLAS µs | format | fused, 1024 threads µs (x cuBLAS) | fused, 512 threads µs (x cuBLAS) | two-kernel µs (x cuBLAS) | best fused / two-kernel | best fused GB/s |")
    log("|---|---:|---|---:|---:|---:|---:|---:|")
    l2 = props.L2_cache_size
    for (h, i, label) in [(2048, 16384, "Gemma-2B 2048->16384->2048"), (1024, 4096, "action expert 1024->4096->1024")]:
        per_layer_bf16 = 3 * h * i * 2
        layers = max(18, -(-4 * l2 // per_layer_bf16))
        bf = [(weights(2 * i, h, 100 + j).to(torch.bfloat16), weights(h, i, 200 + j).to(torch.bfloat16)) for j in range(layers)]
        x0 = torch.randn(1, h, device=dev).to(torch.bfloat16)
        bufs = [x0] + [torch.empty(1, h, device=dev, dtype=torch.bfloat16) for _ in range(layers)]

        def bf16_mlp():
            for j in range(layers):
                g_u = torch.matmul(bufs[j], bf[j][0].T)
                hh = F.gelu(g_u[:, :i], approximate="tanh") * g_u[:, i:]
                torch.matmul(hh, bf[j][1].T, out=bufs[j + 1])
        t_bf = time_calls([bf16_mlp], reps=3, trials=5) * 18 / layers
        for fmt in ["nvfp4", "mxfp4", "int4"]:
            qw = []
            for j in range(layers):
                wgu = bf[j][0].float()
                qg, qu, qd = kq.quantize(wgu[:i].contiguous(), fmt), kq.quantize(wgu[i:].contiguous(), fmt), kq.quantize(bf[j][1].float(), fmt)
                qw.append((kq.KernelWeight(qg, qu), kq.KernelWeight(qd)))
            calls = [kq.Call(lib, f"w4_mlp_{fmt}_bf16_geglu", [bufs[j]] + qw[j][0].args() + qw[j][1].args() + [bufs[j + 1]], ws)
                     for j in range(layers)]
            set_fused(True)
            t_threads = {}
            for threads in THREADS:
                os.environ["KILN_QUANT_MLP_FUSED_THREADS"] = threads
                t_threads[threads] = time_calls(calls, reps=3, trials=5) * len(calls) * 18 / layers
            t_fused = min(t_threads.values())
            # The chain as the graph left it, layer by layer against an eager fused call on the same input.
            snap = [b.clone() for b in bufs]
            e_chain, checked = 0.0, 0
            for j in range(layers):
                ref = torch.empty_like(bufs[j + 1])
                kq.Call(lib, f"w4_mlp_{fmt}_bf16_geglu", [snap[j]] + qw[j][0].args() + qw[j][1].args() + [ref], ws)()
                torch.cuda.synchronize()
                if torch.isfinite(ref.double()).all() and ref.double().norm() > 1e-6 and torch.isfinite(snap[j]).all():
                    e_chain = max(e_chain, rel_err(snap[j + 1], ref.double()))
                    checked += 1
            chain_ok = e_chain == 0.0 and checked >= 2
            ok &= chain_ok
            set_fused(False)
            t_two = time_calls(calls, reps=3, trials=5) * len(calls) * 18 / layers
            set_fused(True)
            nbytes = sum(w.nbytes() for pair in qw[:1] for w in pair)
            cols = " | ".join(f"{t_threads[t]:.0f} ({t_bf / t_threads[t]:.2f})" for t in THREADS)
            log(f"| {label} | {t_bf:.0f} | {fmt} | {cols} | {t_two:.0f} ({t_bf / t_two:.2f}) | {t_fused / t_two:.3f} | "
                f"{nbytes * 18 / (t_fused * 1e-6) / 1e9:.0f} |")
            log(f"  - graph-replayed fused chain vs eager fused calls on the same layer inputs: worst rel. diff {e_chain:.2e} over {checked} finite layers{'' if chain_ok else '  FAIL'}")
            del qw, calls
        del bf
        torch.cuda.empty_cache()
    log("")
    log(f"Result: {'all checks passed' if ok else 'SOME CHECKS FAILED'}")
    name = props.name.replace(" ", "_")
    date = datetime.date.today().isoformat()
    os.makedirs(args.out, exist_ok=True)
    out = os.path.join(args.out, f"quant_mlp_fused_{name}_{date}{'_' + args.tag if args.tag else ''}.md")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"wrote {out}")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
