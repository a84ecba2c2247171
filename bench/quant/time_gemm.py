"""Quick A/B of 4-bit GEMM builds: for each library given, check then time w4_linear_nvfp4_bf16
(bench.py's harness: CUDA graph replays, weights rotated over >= 4x L2) at the Pi0.5 shapes and M,
for each GEMM variant in --variants. Prints one row per (shape, M) with every library's µs and
cuBLAS bf16's. Libraries built with a changed kernel (e.g. a -D switch that skips work) show what
that work costs; their rows say when their results are wrong.
    python3 bench/quant/time_gemm.py --lib A.so --lib B.so [--variants 3,4] [--ms 51,816]
        [--envs "KILN_QUANT_RS_SPLIT=cluster;KILN_QUANT_RS_SPLIT=partial"] [--paths]
--envs: each library and variant once per setting (';'-separated NAME=VALUE[,NAME=VALUE]);
--paths: each cell also says which kernel ran (kiln_w4_last_gemm_path)."""
import argparse
import ctypes as C
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(__file__))
import bench  # noqa: E402
import kiln_quant as kq  # noqa: E402

SHAPES = [(16384, 2048), (2048, 16384), (4096, 1024), (1024, 4096)]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--lib", action="append", required=True)
    ap.add_argument("--variants", default="3,4")
    ap.add_argument("--ms", default="51,816")
    ap.add_argument("--envs", default="")
    ap.add_argument("--paths", action="store_true")
    a = ap.parse_args()
    envs = [dict(kv.split("=", 1) for kv in e.split(",") if kv) for e in a.envs.split(";")] if a.envs else [{}]
    libs = [C.CDLL(p) for p in a.lib]
    for lib in libs:
        lib.kiln_w4_last_gemm_path.restype = C.c_char_p
    dev = bench.dev
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    ws = torch.empty(256 << 20, dtype=torch.uint8, device=dev)
    print(f"# {torch.cuda.get_device_name(0)}; libraries: {', '.join(a.lib)}")
    print("| N×K | M | cuBLAS bf16 µs | " + " | ".join(f"lib {i} variant {v}{' ' + ','.join(f'{k}={x}' for k, x in env.items()) if env else ''} µs"
                                                    for i in range(len(libs)) for v in a.variants.split(",") for env in envs) + " |")
    for (n, k) in SHAPES:
        w = bench.weights(n, k, 1000 + n + k)
        q = bench.quantize(w, "nvfp4")
        wd = q.dequant().double()
        copies = bench.copies_for(n * k // 2, l2)
        kws = [kq.KernelWeight(bench.quantize(w + 1e-4 * i, "nvfp4")) for i in range(copies)]
        wbf = [w.to(torch.bfloat16).clone() for _ in range(bench.copies_for(n * k * 2, l2))]
        for m in map(int, a.ms.split(",")):
            x = torch.randn(m, k, device=dev).to(torch.bfloat16)
            y = torch.empty(m, n, device=dev, dtype=torch.bfloat16)
            t_bf = bench.time_calls([lambda b=b: torch.matmul(x, b.T) for b in wbf])
            row = f"| {n}×{k} | {m} | {t_bf:.1f} |"
            for lib in libs:
                for v in a.variants.split(","):
                    for env in envs:
                        os.environ.update(env)
                        os.environ["KILN_QUANT_GEMM_VARIANT"] = v
                        y.fill_(float("nan"))
                        kq.Call(lib, "w4_linear_nvfp4_bf16", [x] + kq.KernelWeight(q).args() + [y], ws)()
                        torch.cuda.synchronize()
                        path = lib.kiln_w4_last_gemm_path().decode()
                        e = bench.rel_err(y, x.double() @ wd.T)
                        t = bench.time_calls([kq.Call(lib, "w4_linear_nvfp4_bf16", [x] + c.args() + [y], ws) for c in kws])
                        row += f" {t:.1f}{'' if e < 8e-3 else f' (WRONG {e:.1e})'}{f' [{path}]' if a.paths else ''} |"
                        for name in env:
                            os.environ.pop(name, None)
            print(row, flush=True)


if __name__ == "__main__":
    main()
